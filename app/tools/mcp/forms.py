"""The user's answer to an MCP server's form, checked against the schema the server asked with.

A form's schema is the restricted JSON Schema of MCP elicitation (a flat object of strings,
numbers, booleans and enums), written by the server. The answer is what the server will
read, so it is checked as JSON Schema defines it (`"42"` is no integer) before anything is
stored or sent, and the fields the user left out take the schema's defaults (SEP-1034), so a
form accepted as it was shown sends what it showed. `$ref`s resolve inside the schema only: a
server's schema never makes hearth fetch anything.
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable


class BadAnswer(ValueError):
    """The answer does not fit the form; the message says where and why, for the user."""


def with_defaults(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """`content` with each property it leaves out that has a default set to that default."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return dict(content)
    filled = dict(content)
    for name, spec in properties.items():
        if name not in filled and isinstance(spec, dict) and "default" in spec:
            filled[name] = spec["default"]
    return filled


def checked_answer(schema: dict[str, Any], content: dict[str, Any] | None) -> dict[str, Any]:
    """The accepted form's content, defaults filled in, or `BadAnswer`."""
    filled = with_defaults(schema, content or {})
    try:
        kind = validator_for(schema)
        kind.check_schema(schema)
        validator = kind(schema, registry=Registry())
        problems = sorted(validator.iter_errors(filled), key=lambda error: list(error.path))
    except SchemaError as exc:  # the server's own schema is broken: nothing fits it
        raise BadAnswer(f"the form's schema cannot be checked: {exc.message}") from None
    except Unresolvable as exc:  # a `$ref` outside the schema, which is never fetched
        raise BadAnswer(f"the form's schema cannot be checked: {exc}") from None
    if problems:
        raise BadAnswer("; ".join(_describe(problem) for problem in problems[:5]))
    return filled


def _describe(problem: ValidationError) -> str:
    where = ".".join(str(part) for part in problem.path)
    return f"{where}: {problem.message}" if where else problem.message
