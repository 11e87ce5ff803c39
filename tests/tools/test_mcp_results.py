"""Reading MCP tool results and tool lists, block by block, as a server may send them."""

from __future__ import annotations

import base64
import io
import zlib

from mcp import types
from PIL import Image

from app.agent.capabilities.media import without_broken_ancillary_chunks
from app.tools.mcp.groups import _group_tools
from app.tools.mcp.results import Medium, read_result


def result(*blocks: object, structured: object = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult.model_validate(
        {"content": list(blocks), "structuredContent": structured, "isError": error}
    )


def test_text_links_and_text_resources_keep_their_words() -> None:
    read = read_result(
        result(
            {"type": "text", "text": "Found two."},
            {
                "type": "resource_link",
                "uri": "file:///a.txt",
                "name": "a",
                "mimeType": "text/plain",
            },
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
            {"type": "resource", "resource": {"uri": "memo://1", "text": "remember"}},
        )
    )
    assert read.text == (
        "Found two.\nResource link: file:///a.txt (a, text/plain)\nResource link: file:///b (b)\n"
        "Resource memo://1:\nremember"
    )
    assert read.media == () and not read.is_error


def test_structured_content_is_json_when_every_block_is_text() -> None:
    read = read_result(result({"type": "text", "text": '{"t": 1}'}, structured={"result": [1, 2]}))
    assert read.text == "[1,2]"
    beside_an_image = read_result(
        result(
            {"type": "image", "data": base64.b64encode(b"x").decode(), "mimeType": "image/png"},
            structured={"t": 1},
        )
    )
    assert beside_an_image.media == (Medium(b"x", "image/png", "image"),)


def test_media_are_decoded_and_bad_base64_is_a_note() -> None:
    read = read_result(
        result(
            {"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"},
            {"type": "image", "data": "%%% not base64", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://b", "blob": "AAEC"}},
            {"type": "text", "text": "done"},
            error=True,
        )
    )
    assert read.media == (
        Medium(b"RIFF", "audio/wav", "audio"),
        Medium(b"\x00\x01\x02", "application/octet-stream", "resource x://b"),
    )
    assert read.text == ("[the image the server sent could not be decoded; it is not kept]\ndone")
    assert read.is_error


def test_task_only_and_app_only_tools_are_not_offered() -> None:
    tools = [
        types.Tool.model_validate({"name": "plain", "inputSchema": {"type": "object"}}),
        types.Tool.model_validate(
            {
                "name": "task",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "required"},
            }
        ),
        types.Tool.model_validate(
            {
                "name": "either",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "optional"},
            }
        ),
    ]
    assert [t.remote_name for t in _group_tools("s", tools)] == ["plain", "either"]


def png(extra: bytes = b"") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(out, format="PNG")
    data = out.getvalue()
    return data[:33] + extra + data[33:]  # after the signature and IHDR


def chunk(kind: bytes, body: bytes, crc: int | None = None) -> bytes:
    checksum = zlib.crc32(kind + body) if crc is None else crc
    return len(body).to_bytes(4, "big") + kind + body + checksum.to_bytes(4, "big")


def test_a_png_with_a_broken_ancillary_chunk_is_repaired_and_a_broken_critical_one_is_not() -> None:
    broken = png(chunk(b"iCCP", b"profile\x00\x00junk", crc=1))
    repaired = without_broken_ancillary_chunks(broken)
    assert repaired == png()
    with Image.open(io.BytesIO(repaired)) as image:
        image.verify()
    assert without_broken_ancillary_chunks(png()) is None  # nothing to repair
    assert without_broken_ancillary_chunks(png(chunk(b"IDAT", b"x", crc=1))) is None
    assert without_broken_ancillary_chunks(broken[:40]) is None
    assert without_broken_ancillary_chunks(b"GIF89a") is None
