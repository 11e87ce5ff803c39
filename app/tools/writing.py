"""`write_file`: the one built-in tool that changes the user's files, and its preview.

Every write waits for the user's approval, so the preview is made when the call is made: the
file as it is (`preview_old`, empty for a new file) and as it would be (`preview_new`), stored on
the call's row for the frontend's diff. The write itself goes through the same containment as
every read, refuses anything under `uploads/` (uploads are immutable, whatever a link says), and
replaces the file atomically, so a reader never sees half a file.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from pydantic_ai import ModelRetry, RunContext

from app.files.roots import OutsideRoot, display_path, resolve_inside
from app.tools.deps import TurnDeps

WRITE_FILE = "write_file"
UPLOADS = "uploads"
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_PREVIEW_CHARS = 200_000


def writable_target(root: Path, path: str) -> Path:
    """Where `path` would be written; ModelRetry when it may not be written."""
    try:
        target = resolve_inside(root, path)
    except OutsideRoot as exc:
        raise ModelRetry(str(exc)) from exc
    if target == root:
        raise ModelRetry("give a file path, not the top folder")
    if Path(display_path(root, target)).parts[0] == UPLOADS:
        raise ModelRetry("uploads/ holds the user's uploads, which cannot be changed")
    if target.is_dir():
        raise ModelRetry(f"{path} is a folder")
    return target


def _preview_text(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        return f"[binary file, {len(data)} bytes]"
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_PREVIEW_CHARS:
        return text[:MAX_PREVIEW_CHARS] + f"\n[... {len(text) - MAX_PREVIEW_CHARS} more characters]"
    return text


def preview(root: Path, path: str, content: str) -> tuple[str, str] | None:
    """`(preview_old, preview_new)` for a write, or None when the write is refused anyway."""
    try:
        target = writable_target(root, path)
    except ModelRetry:
        return None
    try:
        old = _preview_text(target.read_bytes()) if target.is_file() else ""
    except OSError:
        old = ""
    return old, _preview_text(content.encode())


def _write(root: Path, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ModelRetry(f"content is {len(data)} bytes; at most {MAX_WRITE_BYTES} can be written")
    target = writable_target(root, path)
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Contained again once the folders exist: a link swapped in for a folder is caught here.
    target = writable_target(root, display_path(root, target))
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".hearth-write-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    verb = "replaced" if existed else "created"
    return f"{display_path(root, target)} {verb} ({len(data)} bytes)."


async def write_file(ctx: RunContext[TurnDeps], path: str, content: str) -> str:
    """Write `content` to the text file at `path` in the user's files (relative path).

    Creates the file and its folders, or replaces the file. The user approves every write.
    Files under uploads/ cannot be changed.
    """
    return await asyncio.to_thread(_write, ctx.deps.file_root, path, content)
