"""Built-in file tools over the user's file root.

`list_files` is read-only. Every path goes through `resolve_inside`, so a model can't list
anything outside the user's own files however it spells the path; the errors it gets back are
`ModelRetry`s, which the model sees and can correct.
"""

from __future__ import annotations

import asyncio
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
