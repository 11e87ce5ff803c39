"""Tool arguments made from a tool's input schema, as a model would make them up.

The conformance adapter scripts its fake model from the tools the test server lists, so it needs
a value each schema accepts. This lives apart from the adapter, which imports all of hearth, so
that its test costs nothing to collect.
"""

from __future__ import annotations

from typing import Any


def example(schema: Any) -> Any:
    """A value that `schema` (a JSON Schema) accepts, as a model would make one up."""
    if not isinstance(schema, dict):
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: example(properties.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [example(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "hearth".ljust(schema.get("minLength", 0), "!")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1 if kind == "integer" else 1.5)
        value = min(low, schema.get("maximum", low))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    return None
