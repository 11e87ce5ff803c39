"""`write_file`: the one built-in tool that changes the user's files, and its preview.

Every write waits for the user's approval, so the preview is made when the call is made: the
file as it is (`preview_old`, empty for a new file) and as it would be (`preview_new`), stored on
the call's row for the frontend's diff. The write itself goes through the same containment as
every read, refuses anything under `uploads/` (uploads are immutable, whatever a link says), and
replaces the file atomically, so a reader never sees half a file.

What the user approves is all that is written: `preview_new` is exactly the content the write
stores, never a cut or a stand-in. So the preview shows the whole content, up to the write limit
(`MAX_WRITE_BYTES`, 4 MiB of UTF-8) rather than a shorter preview limit, and a content that could
not be shown exactly is not written at all: over the limit, holding a NUL character, or not
encodable as UTF-8 (a lone surrogate) — such a call has no preview and fails as a tool error the
model can correct. Only `preview_old`, which is context for the diff and is never written, may be
cut (`MAX_PREVIEW_CHARS`) or stand for a binary file.

An operating-system error (a name too long, a path through a file, a permission) is a tool error
that names the path as the model gave it, never the absolute host path.

A write counts against the user's storage quota (`app.files.quota`) by what it adds: the new
size less the size of the file it replaces. One that would pass the quota is a tool error naming
the quota, checked when the call is made (so nobody is asked to approve a write that cannot
happen) and again when it is written; nothing is written then.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from pydantic_ai import ModelRetry, RunContext

from app.files.quota import OverQuota, allowance
from app.files.roots import OutsideRoot, display_path, os_error_reason, resolve_inside
from app.tools.deps import TurnDeps

WRITE_FILE = "write_file"
UPLOADS = "uploads"
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_PREVIEW_CHARS = 200_000
"""How much of the file as it is `preview_old` shows; the new content is always shown whole."""


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


def writable_content(content: str) -> bytes:
    """The bytes a write stores for `content`; ModelRetry when it cannot be written as text."""
    if "\x00" in content:
        raise ModelRetry("content holds a NUL character; write_file writes text files only")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ModelRetry("content is not valid Unicode text; it cannot be written") from exc
    if len(data) > MAX_WRITE_BYTES:
        raise ModelRetry(f"content is {len(data)} bytes; at most {MAX_WRITE_BYTES} can be written")
    return data


def check_room(root: Path, path: str, size: int, quota: int | None) -> None:
    """ModelRetry when writing `size` bytes at `path` would take the user past `quota`.

    Blocking: it measures the user's files."""
    if quota is None:
        return
    try:
        target = resolve_inside(root, path)
        replaced = target.stat().st_size if target.is_file() else 0
    except (OutsideRoot, OSError):
        replaced = 0  # refused or created anyway: the write itself says which
    try:
        allowance(root, quota).check(size - replaced)
    except OverQuota as exc:
        raise ModelRetry(str(exc)) from exc


def _old_text(data: bytes) -> str:
    if b"\x00" in data:
        return f"[binary file, {len(data)} bytes]"
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_PREVIEW_CHARS:
        return text[:MAX_PREVIEW_CHARS] + f"\n[... {len(text) - MAX_PREVIEW_CHARS} more characters]"
    return text


def preview(root: Path, path: str, content: str) -> tuple[str, str] | None:
    """`(preview_old, preview_new)` for a write, or None when the write is refused anyway.

    `preview_new` is `content` itself: exactly what is written once the user approves."""
    try:
        writable_content(content)
        target = writable_target(root, path)
    except (ModelRetry, OSError):
        return None
    try:
        old = _old_text(target.read_bytes()) if target.is_file() else ""
    except OSError:
        old = ""
    return old, content


def replace_atomically(target: Path, data: bytes) -> None:
    """Write `data` to `target` through a temporary file beside it: a reader sees the old file
    or the new one, never half of it. Blocking."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".hearth-write-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write(root: Path, path: str, content: str, quota: int | None = None) -> str:
    data = writable_content(content)
    check_room(root, path, len(data), quota)
    try:
        return _write_inside(root, path, data)
    except OSError as exc:
        raise ModelRetry(f"{path}: {os_error_reason(exc)}") from exc


def _write_inside(root: Path, path: str, data: bytes) -> str:
    target = writable_target(root, path)
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Contained again once the folders exist: a link swapped in for a folder is caught here.
    target = writable_target(root, display_path(root, target))
    replace_atomically(target, data)
    verb = "replaced" if existed else "created"
    return f"{display_path(root, target)} {verb} ({len(data)} bytes)."


async def write_file(ctx: RunContext[TurnDeps], path: str, content: str) -> str:
    """Write `content` to the text file at `path` in the user's files (relative path).

    Creates the file and its folders, or replaces the file. The user approves every write.
    Files under uploads/ cannot be changed.
    """
    return await asyncio.to_thread(
        _write, ctx.deps.file_root, path, content, ctx.deps.storage_quota
    )
