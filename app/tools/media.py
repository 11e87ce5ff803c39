"""Media a tool returned, kept the way `read_file` media are: a file, a note, a reference.

Each medium is written once under the user's file root, at
`tool-media/<chat id>/<tool call row id>-<n>.<ext>` (the extension from the type sniffed from
the bytes, never from what the server declared), and the tool's text gets the same neutral note
`read_file` gives; the return's metadata carries `{path, mime, size}` references, which the
recorder stores in `chat_llm_tools.media` and the request builder routes per serving model
(docs/wire.md §3). So the stored row, the stream and the request hold no bytes, and a type no
model can take (an archive, something unknown) stays a note that never fails a round.

A medium that would take the user past their storage quota, or is larger than an upload may be,
is not kept: the text says so instead.
"""

from __future__ import annotations

import asyncio
import mimetypes
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import ToolReturn

from app.files.media import media_note
from app.files.quota import human_bytes, storage_used
from app.files.sniff import sniff
from app.llm.dtl import MEDIA_KEY
from app.tools.mcp.results import McpResult, Medium
from app.tools.writing import replace_atomically

TOOL_MEDIA = "tool-media"
EXTENSIONS = {"image/jpeg": ".jpg", "text/plain": ".txt", "application/octet-stream": ".bin"}


def extension(mime: str) -> str:
    return EXTENSIONS.get(mime) or mimetypes.guess_extension(mime, strict=False) or ".bin"


def keep_media(
    root: Path,
    chat_id: uuid.UUID,
    row_id: int,
    media: Sequence[Medium],
    *,
    quota: int | None,
    largest: int,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Write `media` for the call stored as `row_id`; the notes for its text and the references
    for its metadata. Blocking."""
    notes: list[str] = []
    kept: list[dict[str, Any]] = []
    folder = root / TOOL_MEDIA / str(chat_id)
    used = storage_used(root) if quota is not None and media else 0
    for n, medium in enumerate(media, start=1):
        size = len(medium.data)
        if size > largest:
            notes.append(
                f"[the {medium.source} the tool sent ({human_bytes(size)}) is larger than "
                f"{human_bytes(largest)}; it is not kept]"
            )
            continue
        if quota is not None and used + size > quota:
            notes.append(
                f"[the {medium.source} the tool sent ({human_bytes(size)}) would pass the "
                f"storage quota of {human_bytes(quota)}; it is not kept]"
            )
            continue
        mime = sniff(medium.data[:4096])
        path = f"{TOOL_MEDIA}/{chat_id}/{row_id}-{n}{extension(mime)}"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_atomically(root / path, medium.data)
        used += size
        notes.append(media_note(path, mime, size))
        kept.append({"path": path, "mime": mime, "size": size})
    return notes, kept


async def tool_return(
    result: McpResult,
    *,
    root: Path,
    chat_id: uuid.UUID,
    row_id: int | None,
    quota: int | None,
    largest: int,
) -> str | ToolReturn:
    """What a tool call answers: its text, with a note per medium and their references."""
    if not result.media:
        return result.text
    if row_id is None:  # not recorded (never the case in a turn): nothing to name the files by
        notes = [f"[the tool sent a {m.source}, which is not kept]" for m in result.media]
        return "\n".join(filter(None, [result.text, *notes]))
    notes, kept = await asyncio.to_thread(
        keep_media, root, chat_id, row_id, result.media, quota=quota, largest=largest
    )
    text = "\n".join(filter(None, [result.text, *notes]))
    return ToolReturn(text, metadata={MEDIA_KEY: kept}) if kept else text
