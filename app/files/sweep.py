"""Removing what an interrupted upload left behind: its own temporary files, and nothing else.

An upload is written to a hidden `.partial-*` file in `uploads/<id>/`, renamed into place, and
its row committed after. A process that dies while receiving leaves the partial; nothing can
reach it (it has no URL and is not listed), yet it holds disk, so each process removes them
once, in the background, when it starts, together with the upload folder when the partial was
all it held.

The sweep removes only files that hearth itself names as temporary, and only once they have
not changed for `STALE_SECONDS` (an upload that another worker is receiving right now keeps its
partial's mtime fresh). It never decides from the database what a file is: a data dir started
once beside another database, or beside a restored backup, would otherwise lose every upload that
database does not name. A complete file whose row never committed, or a folder whose row was
deleted by a process that died before removing it, is left where it is.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import anyio

from app.clock import Clock
from app.files.uploads import PARTIAL_PREFIX, UPLOADS_DIR

STALE_SECONDS = 3600.0

log = logging.getLogger("hearth.files")


@dataclass(frozen=True, slots=True)
class Swept:
    partials: int = 0
    """Temporary files removed."""
    folders: int = 0
    """Upload folders removed because a stale partial was all they held."""


def sweep_partials(data_dir: Path, *, now: float, stale_seconds: float = STALE_SECONDS) -> Swept:
    """Remove every stale `.partial-*` file under `users/*/uploads/<uuid>/` (blocking)."""
    partials = folders = 0
    for uploads in sorted((data_dir / "users").glob(f"*/{UPLOADS_DIR}")):
        for folder in _upload_folders(uploads):
            removed = _remove_stale_partials(folder, now - stale_seconds)
            partials += removed
            if removed and _remove_if_empty(folder):
                folders += 1
    return Swept(partials, folders)


def _upload_folders(path: Path) -> list[Path]:
    """The folders in `path` named as hearth names an upload's (a canonical UUID)."""
    try:
        with os.scandir(path) as entries:
            return [
                Path(entry.path)
                for entry in entries
                if entry.is_dir(follow_symlinks=False) and _is_upload_id(entry.name)
            ]
    except OSError:
        return []


def _is_upload_id(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def _remove_stale_partials(folder: Path, cutoff: float) -> int:
    removed = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.startswith(PARTIAL_PREFIX):
                    continue
                info = entry.stat(follow_symlinks=False)
                if entry.is_file(follow_symlinks=False) and info.st_mtime <= cutoff:
                    os.unlink(entry.path)
                    removed += 1
    except OSError as exc:  # changed under us, or not ours to touch: left for another start
        log.debug("partials in %s not swept: %s", folder, exc)
    return removed


def _remove_if_empty(folder: Path) -> bool:
    try:
        folder.rmdir()  # refused unless empty
    except OSError:
        return False
    return True


async def sweep(data_dir: Path, clock: Clock, *, stale_seconds: float = STALE_SECONDS) -> Swept:
    """Sweep off the event loop; say what was removed."""
    now = clock.now().timestamp()  # file times are seconds since the epoch
    swept = await anyio.to_thread.run_sync(
        lambda: sweep_partials(data_dir, now=now, stale_seconds=stale_seconds)
    )
    if swept.partials:
        log.info(
            "removed %d unfinished upload file(s) and %d empty upload folder(s)",
            swept.partials,
            swept.folders,
        )
    return swept


def start_sweep(data_dir: Path, clock: Clock) -> asyncio.Task[None]:
    """Sweep in the background; a failure is logged and left to the next start."""

    async def run() -> None:
        try:
            await sweep(data_dir, clock)
        except Exception as exc:
            log.warning("unfinished uploads not swept: %s", exc)

    return asyncio.create_task(run(), name="sweep unfinished uploads")
