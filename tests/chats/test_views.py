"""The views (what the chat routes serialise, as `TypedDict`s) and the schemas (what the OpenAPI
document promises) name the same fields, and the row types select what the views read."""

from __future__ import annotations

from typing import get_type_hints

import pytest
from pydantic import BaseModel
from sqlalchemy import inspect

from app.chats import schemas, views
from app.files import schemas as file_schemas
from app.models import ChatLlmTool, Message, Upload

PAIRS: list[tuple[type, type[BaseModel]]] = [
    (views.ChatView, schemas.ChatOut),
    (views.ChatDetailView, schemas.ChatDetailOut),
    (views.MessageView, schemas.MessageOut),
    (views.ToolCallView, schemas.ToolCallOut),
    (views.UsageView, schemas.UsageOut),
    (views.SummaryView, schemas.SummaryOut),
    (views.UploadView, file_schemas.UploadOut),
    (views.IngestionView, file_schemas.IngestionOut),
]


@pytest.mark.parametrize(("view", "schema"), PAIRS, ids=[v.__name__ for v, _ in PAIRS])
def test_a_view_has_exactly_its_schemas_fields(view: type, schema: type[BaseModel]) -> None:
    assert set(get_type_hints(view)) == set(schema.model_fields)


@pytest.mark.parametrize(
    ("row", "table"),
    [(views.MessageRow, Message), (views.ToolRow, ChatLlmTool), (views.UploadRow, Upload)],
)
def test_each_row_field_is_a_column(row: type, table: type) -> None:
    columns = set(inspect(table).column_attrs.keys())
    assert set(row._fields) <= columns  # type: ignore[attr-defined]
