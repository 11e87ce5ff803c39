"""A form's answer against the schema its server asked with: defaults, types, and broken schemas."""

from __future__ import annotations

from typing import Any

import pytest

from app.tools.mcp.forms import BadAnswer, checked_answer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 5},
        "age": {"type": "integer", "default": 30},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a"]},
        "ok": {"type": "boolean"},
    },
    "required": ["name"],
}


def test_left_out_fields_take_their_defaults() -> None:
    assert checked_answer(SCHEMA, {"name": "Ada"}) == {"name": "Ada", "age": 30, "tags": ["a"]}
    assert checked_answer(SCHEMA, {"name": "Ada", "age": 5, "ok": False})["age"] == 5


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "'name' is a required property"),
        ({"name": "Ada Lovelace"}, "name: 'Ada Lovelace' is too long"),
        ({"name": "Ada", "age": "30"}, "age: '30' is not of type 'integer'"),
        ({"name": "Ada", "tags": ["c"]}, "tags.0: 'c' is not one of"),
        ({"name": "Ada", "ok": "yes"}, "ok: 'yes' is not of type 'boolean'"),
    ],
)
def test_an_answer_that_breaks_the_schema_says_where(content: Any, says: str) -> None:
    with pytest.raises(BadAnswer, match=says):
        checked_answer(SCHEMA, content)


def test_a_broken_schema_refuses_every_answer_and_fetches_nothing() -> None:
    with pytest.raises(BadAnswer, match="cannot be checked"):
        checked_answer({"type": "object", "properties": {"a": {"type": 7}}}, {"a": 1})
    remote = {"$ref": "https://example.invalid/schema.json"}
    with pytest.raises(BadAnswer, match="cannot be checked"):
        checked_answer(remote, {})
