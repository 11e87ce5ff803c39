"""The turn stream in the OpenAPI document: one schema per server-sent event.

A turn answers `text/event-stream` in the Vercel AI SDK UI message stream protocol: each event's
`data` is one JSON chunk, and the last is the literal `[DONE]`. OpenAPI 3.1 has no keyword for
"a stream of", so, as schema-driven tools read it (schemathesis among them), the media type's
`schema` describes one event: an object whose `data` is a string that is either `[DONE]` or
JSON (`contentMediaType: application/json`) matching `contentSchema`, the union of the chunks.
(OpenAPI 3.2 spells this `itemSchema`; FastAPI writes 3.1 documents, where `schema` is what
these tools read per event.) The union is a `oneOf` keyed on `type` (with a `discriminator`
mapping), so a client generator gets one type per chunk.

The standard chunks are not written here: they are pydantic-ai's own Vercel AI chunk models
(`pydantic_ai.ui.vercel_ai.response_types`), the very classes the encoder serializes, taken in
serialization mode with their camelCase aliases. The schema therefore follows the wire when
pydantic-ai adds a field or a chunk. Only hearth's data parts are hearth's: each is a subclass of
pydantic-ai's `DataChunk` whose `type` is a literal and whose `data` is a model of what hearth
puts there (docs/http-api.md, "Sending a message"). The generic `DataChunk` itself is left
out, so a data part the document does not name is a conformance failure, not silently accepted.
One data part is pydantic-ai's own and not hearth's: `data-tool-availability-delta`, which its
deferred tool loading sends when a tool activation reveals tools (`{added, tool_call_id}`); it
is described here because hearth passes it through.

The chunks sit in `components/schemas` (prefixed `UIChunk` / `UIData`, so they cannot collide
with the API's own models); `install` adds them to the document FastAPI generates, since FastAPI
only collects the components of models that routes declare, and a stream route declares none.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema
from pydantic_ai.ui.vercel_ai import response_types as chunks

COMPONENTS = "#/components/schemas/"
UNION = "UIMessageChunk"
DONE = "[DONE]"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserMessageData(_Data):
    id: int
    """The stored user message."""


class AssistantMessageData(_Data):
    id: int
    """The assistant message of the model round that starts."""


class ActivationData(_Data):
    message_id: int
    """The assistant message whose tool call activated the groups."""
    groups: list[str]


class CitationData(_Data):
    chunk_id: str | None
    upload_id: uuid.UUID | None
    """None once the document was deleted."""
    filename: str | None
    page: int | None
    """The PDF page; None outside PDFs."""
    quote: str
    """The cited passage, cut to 500 characters."""


class CitationsData(_Data):
    message_id: int
    citations: list[CitationData]


class CompactionData(_Data):
    summary_id: int
    covers_up_to_message_id: int


class UsageData(_Data):
    """The whole turn's usage, summed over its model rounds."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class ToolAvailabilityData(_Data):
    """pydantic-ai's own part: the tools a tool activation revealed to the model."""

    added: list[str]
    tool_call_id: str | None


class ToolProgressData(_Data):
    tool_call_id: str
    progress: float
    total: float | None
    message: str | None


class ElicitationData(_Data):
    """An MCP server asks the user to fill in a form during a call; the stream ends after it."""

    elicitation_id: str
    tool_call_id: str
    message: str
    requested_schema: dict[str, Any]


class AuthorizationData(_Data):
    """A call's server wants the user to sign in again (a wider scope); the stream ends after it."""

    tool_call_id: str
    group: str
    url: str


class UserMessagePart(chunks.DataChunk):
    type: Literal["data-user-message"]
    data: UserMessageData


class AssistantMessagePart(chunks.DataChunk):
    type: Literal["data-assistant-message"]
    data: AssistantMessageData


class ActivationPart(chunks.DataChunk):
    type: Literal["data-activation"]
    data: ActivationData


class CitationsPart(chunks.DataChunk):
    type: Literal["data-citations"]
    data: CitationsData


class CompactionPart(chunks.DataChunk):
    type: Literal["data-compaction"]
    data: CompactionData


class UsagePart(chunks.DataChunk):
    type: Literal["data-usage"]
    data: UsageData


class ToolAvailabilityPart(chunks.DataChunk):
    type: Literal["data-tool-availability-delta"]
    data: ToolAvailabilityData


class ToolProgressPart(chunks.DataChunk):
    type: Literal["data-tool-progress"]
    data: ToolProgressData


class ElicitationPart(chunks.DataChunk):
    type: Literal["data-elicitation"]
    data: ElicitationData


class AuthorizationPart(chunks.DataChunk):
    type: Literal["data-authorization"]
    data: AuthorizationData


DATA_PARTS: tuple[type[chunks.DataChunk], ...] = (
    UserMessagePart,
    AssistantMessagePart,
    ActivationPart,
    CitationsPart,
    CompactionPart,
    UsagePart,
    ToolAvailabilityPart,
    ToolProgressPart,
    ElicitationPart,
    AuthorizationPart,
)


def standard_chunks() -> list[type[chunks.BaseChunk]]:
    """pydantic-ai's chunk models, in the order it declares them: all but the generic data
    chunk (hearth's data parts replace it) and `[DONE]` (not JSON; the event schema has it)."""
    return [
        value
        for value in vars(chunks).values()
        if isinstance(value, type)
        and issubclass(value, chunks.BaseChunk)
        and value not in (chunks.BaseChunk, chunks.DataChunk, chunks.DoneChunk)
    ]


def _type_of(model: type[BaseModel]) -> str:
    annotation = model.model_fields["type"].annotation
    values: tuple[object, ...] = getattr(annotation, "__args__", ())
    (value,) = values
    return str(value)


def _component(model: type[BaseModel]) -> str:
    name = model.__name__
    if issubclass(model, _Data):
        return "UIData" + name.removesuffix("Data")
    if issubclass(model, chunks.DataChunk):
        return "UIChunkData" + name.removesuffix("Part")
    return "UIChunk" + name.removesuffix("Chunk")


def chunk_schemas() -> dict[str, Any]:
    """`components/schemas` entries: each chunk, each data payload, and their union."""
    models = [*standard_chunks(), *DATA_PARTS]
    names = {model: _component(model) for model in (*models, *_Data.__subclasses__())}
    _, top = models_json_schema(
        [(model, "serialization") for model in models],
        by_alias=True,
        ref_template=COMPONENTS + "{model}",
    )
    defs: dict[str, Any] = top.get("$defs", {})
    # pydantic names components after the class; rename them to the prefixed names.
    renames = {model.__name__: names[model] for model in names}
    schemas = {renames.get(name, name): _rename(schema, renames) for name, schema in defs.items()}
    mapping: dict[str, str] = {}
    for model in models:
        schema = schemas[names[model]]
        kind = _type_of(model)
        # The type is what tells the chunks apart: always present on the wire.
        schema["required"] = ["type", *[r for r in schema.get("required", []) if r != "type"]]
        schema["properties"]["type"] = {"type": "string", "const": kind}
        mapping[kind] = COMPONENTS + names[model]
    schemas[UNION] = {
        "description": "One chunk of the Vercel AI SDK UI message stream, as hearth sends it.",
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "type", "mapping": mapping},
    }
    return schemas


def _rename(value: Any, renames: dict[str, str]) -> Any:
    """`value` with every component reference renamed."""
    if isinstance(value, dict):
        out = {key: _rename(item, renames) for key, item in value.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(COMPONENTS):
            name = ref.removeprefix(COMPONENTS)
            out["$ref"] = COMPONENTS + renames.get(name, name)
        return out
    if isinstance(value, list):
        return [_rename(item, renames) for item in value]
    return value


EVENT_SCHEMA: dict[str, Any] = {
    "title": "UIMessageStreamEvent",
    "description": (
        "One server-sent event of the turn: `data` is a JSON chunk, or `[DONE]` after the last."
    ),
    "type": "object",
    "required": ["data"],
    "properties": {
        "id": {
            "description": "The event's number in the turn, from 1 (for `Last-Event-ID`).",
            "type": "string",
            "pattern": "^[0-9]+$",
        },
        "data": {
            "type": "string",
            "anyOf": [
                {"const": DONE},
                {
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": COMPONENTS + UNION},
                },
            ],
        },
    },
}

STREAM_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "The turn, as a Vercel AI SDK UI message stream (server-sent events, header "
            "`x-vercel-ai-ui-message-stream: v1`); the schema describes one event."
        ),
        "headers": {
            "x-vercel-ai-ui-message-stream": {
                "description": "The stream protocol's version",
                "schema": {"type": "string", "const": "v1"},
            }
        },
        "content": {"text/event-stream": {"schema": EVENT_SCHEMA}},
    }
}


def install(document: dict[str, Any]) -> dict[str, Any]:
    """Add the chunk schemas to an OpenAPI document FastAPI generated (in place, and returned)."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in chunk_schemas().items():
        if name in components and components[name] != schema:
            raise ValueError(f"the OpenAPI component {name} exists already")
        components[name] = schema
    return document
