"""HTTP routes, one router per resource, and what they share (dependencies, schemas, errors)."""
