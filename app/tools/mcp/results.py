"""An MCP tool's result as hearth keeps it: one text, and the media it carried as bytes.

pydantic-ai's own mapping of a result (`MCPToolset.direct_call_tool`) hands images, audio and
blob resources back as bytes inside the return value: the recorder would store them as a Python
`repr`, the stream would send them as base64, a provider that cannot take the type would fail
the round, and a malformed base64 block fails the call as if the server had died. So the raw
`CallToolResult` is read here and split in two:

- the text the model, the stored row and the stream all get: text blocks as they are; the
  structured content as JSON when every block is text (the spec has those carry its JSON); a
  resource link as its URI, name and type; an embedded text resource headed by its URI;
- the media (images, audio, blob resources), decoded, each with what its block declared;
  a block whose base64 does not decode becomes a line of the text saying so.

What becomes of the media (a file under the user's root, a note in the text, native input for a
model that can take it) is `app.tools.media`'s.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel


@dataclass(frozen=True, slots=True)
class Medium:
    data: bytes
    declared: str
    """The MIME type the server declared (the stored file's type is sniffed from its bytes)."""
    source: str
    """What sent it, for a note a person reads: `image`, `audio`, `resource <uri>`."""


@dataclass(frozen=True, slots=True)
class McpResult:
    text: str
    media: tuple[Medium, ...] = ()
    is_error: bool = False


def read_result(result: BaseModel) -> McpResult:
    """Read a `CallToolResult` by its wire spelling (camelCase), which both generations of the
    MCP SDK dump the same way."""
    wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    blocks = [block for block in wire.get("content") or [] if isinstance(block, dict)]
    is_error = bool(wire.get("isError"))
    structured = wire.get("structuredContent")
    if structured is not None and all(block.get("type") == "text" for block in blocks):
        value: Any = structured
        if isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]  # how SDKs wrap a primitive or a list
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return McpResult(text, (), is_error)
    lines: list[str] = []
    media: list[Medium] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            _decoded(block.get("data"), block.get("mimeType"), str(kind), lines, media)
        elif kind == "resource_link":
            lines.append(link_text(str(block.get("uri")), block.get("name"), block.get("mimeType")))
        elif kind == "resource":
            resource = block.get("resource") or {}
            uri = str(resource.get("uri"))
            if "text" in resource:
                lines.append(f"Resource {uri}:\n{resource['text']}")
            else:
                source = f"resource {uri}"
                _decoded(resource.get("blob"), resource.get("mimeType"), source, lines, media)
        else:
            lines.append(f"[a {kind} block, which hearth does not read]")
    return McpResult("\n".join(lines), tuple(media), is_error)


def read_resource_result(result: BaseModel) -> McpResult:
    """A `ReadResourceResult`: each of its contents as an embedded resource would be."""
    wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    contents = [c for c in wire.get("contents") or [] if isinstance(c, dict)]
    lines: list[str] = []
    media: list[Medium] = []
    for content in contents:
        uri = str(content.get("uri"))
        if "text" in content:
            lines.append(f"Resource {uri}:\n{content['text']}")
        else:
            _decoded(content.get("blob"), content.get("mimeType"), f"resource {uri}", lines, media)
    return McpResult("\n".join(lines), tuple(media))


def link_text(uri: str, name: str | None, mime: str | None) -> str:
    details = ", ".join(part for part in (name, mime) if part)
    return f"Resource link: {uri}" + (f" ({details})" if details else "")


def _decoded(data: Any, mime: Any, source: str, lines: list[str], media: list[Medium]) -> None:
    try:
        if not isinstance(data, str):
            raise ValueError("no data")
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        lines.append(f"[the {source} the server sent could not be decoded; it is not kept]")
        return
    media.append(Medium(raw, str(mime or "application/octet-stream"), source))
