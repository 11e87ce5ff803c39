"""Built-in file tools over the user's file root.

`list_files` and `read_file` are read-only. Every path goes through `resolve_inside`, so a model
can't reach anything outside the user's own files however it spells the path, and `read_file`
checks again on the descriptor it actually reads (a link swapped in after the check is caught).
The errors a model gets back are `ModelRetry`s, which it sees and can correct.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic_ai import ModelRetry, RunContext

from app.files.roots import OutsideRoot, display_path, resolve_inside
from app.tools.deps import TurnDeps

MAX_ENTRIES = 500


def _list(root: Path, path: str) -> str:
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
    shown = len(lines) - (1 if len(entries) > MAX_ENTRIES else 0)
    noun = "entry" if shown == 1 else "entries"
    return f"{where} holds {shown} {noun}:\n" + "\n".join(lines)


async def list_files(ctx: RunContext[TurnDeps], path: str = ".") -> str:
    """List the files and folders at `path` in the user's files (relative; "." is the top).

    Folders end in "/"; files show their size in bytes.
    """
    return await asyncio.to_thread(_list, ctx.deps.file_root, path)


MAX_LINES = 2000
MAX_READ_BYTES = 4 * 1024 * 1024


def _read_text(root: Path, path: str, start_line: int, end_line: int | None) -> str:
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
        data = handle.read(MAX_READ_BYTES + 1)
    if b"\x00" in data[:8192]:
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
) -> str:
    """Read a text file from the user's files (relative path), as numbered lines.

    At most 2000 lines come back at a time; use start_line and end_line for the rest.
    """
    return await asyncio.to_thread(_read_text, ctx.deps.file_root, path, start_line, end_line)
