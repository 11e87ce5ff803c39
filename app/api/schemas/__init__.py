"""Request and response bodies of the public API (API.md), one module per resource."""
