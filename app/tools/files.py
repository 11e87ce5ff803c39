"""Built-in file tools over the user's file root.

`list_files` and `read_file` are read-only. Every path goes through `resolve_inside`, so a model
can't reach anything outside the user's own files however it spells the path, and `read_file`
checks again on the descriptor it actually reads (a link swapped in after the check is caught).
A file whose first bytes make it a medium (image, PDF, video) is answered with a neutral note
and its reference in the return's metadata, never its bytes: the request builder decides per
model whether the medium itself is shown.
The errors a model gets back are `ModelRetry`s, which it sees and can correct. That includes
whatever the operating system refuses (a name too long, a path through a file, a permission):
such an error names the path as the model gave it and the reason in words, never the absolute
host path the `OSError` carries. A file with a NUL byte anywhere in what would be read is binary
and refused as such: text that holds NUL could be neither stored (PostgreSQL) nor read sensibly.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path

from pydantic_ai import ModelRetry, RunContext, ToolReturn
from pydantic_ai.models import Model
from pydantic_ai.tools import ToolDefinition

from app.files.media import is_medium, media_note, viewable_sentence
from app.files.roots import OutsideRoot, display_path, os_error_reason, resolve_inside
from app.files.sniff import SNIFF_BYTES, sniff
from app.llm.dtl import MEDIA_KEY
from app.llm.media_policy import Policy
from app.tools.deps import TurnDeps

MAX_ENTRIES = 500


def file_error(path: str, exc: OSError) -> ModelRetry:
    """The tool error for an `OSError` on `path` (as the model gave it): no host path in it."""
    return ModelRetry(f"{path}: {os_error_reason(exc)}")


def _list(root: Path, path: str) -> str:
    try:
        return _list_inside(root, path)
    except OSError as exc:
        raise file_error(path, exc) from exc


def _list_inside(root: Path, path: str) -> str:
    try:
        folder = resolve_inside(root, path)
    except OutsideRoot as exc:
        raise ModelRetry(str(exc)) from exc
    if not folder.exists():
        raise ModelRetry(f"{path} does not exist")
    if not folder.is_dir():
        raise ModelRetry(f"{path} is a file, not a folder")
    lines = []
    entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    for entry in entries[:MAX_ENTRIES]:
        try:
            inside = resolve_inside(root, display_path(root, folder / entry.name))
        except OutsideRoot:
            continue  # a link that leads out is not shown at all
        shown = display_path(root, folder / entry.name)
        if inside.is_dir():
            lines.append(f"{shown}/")
        else:
            lines.append(f"{shown} ({inside.stat().st_size} bytes)")
    if len(entries) > MAX_ENTRIES:
        lines.append(f"... and {len(entries) - MAX_ENTRIES} more")
    where = display_path(root, folder)
    if not lines:
        return f"{where} is empty."
    count = len(lines) - (1 if len(entries) > MAX_ENTRIES else 0)
    noun = "entry" if count == 1 else "entries"
    return f"{where} holds {count} {noun}:\n" + "\n".join(lines)


async def list_files(ctx: RunContext[TurnDeps], path: str = ".") -> str:
    """List the files and folders at `path` in the user's files (relative; "." is the top).

    Folders end in "/"; files show their size in bytes.
    """
    return await asyncio.to_thread(_list, ctx.deps.file_root, path)


MAX_LINES = 2000
MAX_READ_BYTES = 4 * 1024 * 1024


def _read(root: Path, path: str, start_line: int, end_line: int | None) -> str | ToolReturn:
    try:
        return _read_inside(root, path, start_line, end_line)
    except OSError as exc:
        raise file_error(path, exc) from exc


def _read_inside(root: Path, path: str, start_line: int, end_line: int | None) -> str | ToolReturn:
    try:
        target = resolve_inside(root, path)
    except OutsideRoot as exc:
        raise ModelRetry(str(exc)) from exc
    if not target.exists():
        raise ModelRetry(f"{path} does not exist")
    if target.is_dir():
        raise ModelRetry(f"{path} is a folder; use list_files")
    with target.open("rb") as handle:
        # Contained again at the moment of reading: the open descriptor is what gets read.
        real = Path(os.path.realpath(f"/proc/self/fd/{handle.fileno()}"))
        if real != root and root not in real.parents:
            raise ModelRetry("path leads outside your files")
        head = handle.read(SNIFF_BYTES)
        mime = sniff(head)
        if is_medium(mime):
            size = os.fstat(handle.fileno()).st_size
            shown = display_path(root, real)
            medium = {"path": shown, "mime": mime, "size": size}
            # The bytes stay on disk: the request builder reads them again, contained, for
            # the models that can view them (docs/wire.md §3).
            return ToolReturn(media_note(shown, mime, size), metadata={MEDIA_KEY: [medium]})
        data = head + handle.read(MAX_READ_BYTES + 1 - len(head))
    if b"\x00" in data:
        raise ModelRetry(f"{path} is a binary file; it cannot be read as text")
    try:
        text = data[:MAX_READ_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelRetry(f"{path} is not UTF-8 text; it cannot be read as text") from exc
    lines = text.splitlines()
    if start_line < 1:
        raise ModelRetry("start_line counts from 1")
    last = min(len(lines), end_line if end_line is not None else len(lines))
    last = min(last, start_line + MAX_LINES - 1)
    if start_line > max(len(lines), 1):
        raise ModelRetry(f"{path} has {len(lines)} lines")
    numbered = [f"{n:>6}\t{lines[n - 1]}" for n in range(start_line, last + 1)]
    more = len(lines) - last
    tail = f"\n[{more} more lines; read on with start_line={last + 1}]" if more > 0 else ""
    return "\n".join(numbered) + tail


async def read_file(
    ctx: RunContext[TurnDeps], path: str, start_line: int = 1, end_line: int | None = None
) -> str | ToolReturn:
    """Read a file from the user's files (relative path).

    Text comes back as numbered lines, 2000 at most; use start_line and end_line for more.
    Images, PDFs and videos are described.
    """
    return await asyncio.to_thread(_read, ctx.deps.file_root, path, start_line, end_line)


async def describe_read_file(ctx: RunContext[TurnDeps], tool: ToolDefinition) -> ToolDefinition:
    """`read_file` as the serving model sees it: its description ends with what it can view."""
    if not isinstance(ctx.model, Model):  # a realtime model: no media policy to tell
        return tool
    sentence = viewable_sentence(Policy.of(ctx.model).capabilities)
    if not sentence:
        return tool
    return replace(tool, description=f"{tool.description}\n\n{sentence}")
