"""A well-behaved server whose tools answer with media of fixed bytes: a picture, a sound and
an archive, so a request that carries them is the same from one run to the next.

The picture is a 2x2 PNG any image library decodes; the sound an eight-sample WAV; the archive
a gzip of one line, written with no timestamp.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
)

server = MCPServer("gallery")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGM8oaHBwMDAxMDAwMDAAAAN6gEcJJUQ"
    "NAAAAABJRU5ErkJggg=="
)
WAV = (
    b"RIFF,\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00@\x1f\x00\x00"
    b"\x01\x00\x08\x00data\x08\x00\x00\x00" + b"\x80" * 8
)
GZIP = (
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcbHM,*\xc9\xe0\x02\x00\xc2\xbda\x06\x07\x00\x00\x00"
)
"""`gzip.compress(b"hearth\\n", mtime=0)`."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@server.tool()
def chart() -> list[TextContent | ImageContent | AudioContent]:
    """A small chart, and the sound it makes."""
    return [
        TextContent(type="text", text="The chart, and how it sounds."),
        ImageContent(type="image", data=_b64(PNG), mime_type="image/png"),
        AudioContent(type="audio", data=_b64(WAV), mime_type="audio/wav"),
    ]


@server.tool()
def archive() -> list[TextContent | EmbeddedResource]:
    """The chart's data, compressed."""
    return [
        TextContent(type="text", text="The data, compressed."),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="gallery://data.txt.gz", mime_type="application/gzip", blob=_b64(GZIP)
            ),
        ),
    ]


if __name__ == "__main__":
    server.run("stdio")
