"""A server whose tools answer what a careless or broken server sends: errors, bad media."""

from __future__ import annotations

import base64
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, ImageContent, TextContent

server = MCPServer("faults")

PNG_HEADER = b"\x89PNG\r\n\x1a\n"


@server.tool()
def fail(reason: str) -> str:
    """Fail with `reason`, as a tool whose work went wrong does."""
    raise ToolError(f"the lookup failed: {reason}")


@server.tool()
def env(name: str) -> str:
    """The value of the environment variable `name` in this server's process, or `unset`."""
    return os.environ.get(name, "unset")


@server.tool()
def bad_image() -> list[TextContent | ImageContent]:
    """An image block whose base64 does not decode, beside some text."""
    return [
        TextContent(type="text", text="Here is a picture."),
        ImageContent(type="image", data="this is not base64 at all!", mimeType="image/png"),
    ]


@server.tool()
def big_image(megabytes: int) -> list[ImageContent]:
    """A PNG-looking image of `megabytes` MiB."""
    data = PNG_HEADER + b"\x00" * (megabytes * 1024 * 1024 - len(PNG_HEADER))
    return [ImageContent(type="image", data=base64.b64encode(data).decode(), mimeType="image/png")]


@server.tool()
def odd_blob() -> list[EmbeddedResource]:
    """A blob resource of a type nobody knows, whose bytes are not what it says."""
    return [
        EmbeddedResource(
            type="resource",
            resource={
                "uri": "faults://blob/1",
                "mimeType": "application/x-unheard-of",
                "blob": base64.b64encode(b"\x00\x01 not text \xff\xfe").decode(),
            },
        )
    ]


if __name__ == "__main__":
    server.run("stdio")
