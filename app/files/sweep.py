"""Removing upload folders that no upload row names: what an interrupted process left behind.

An upload is written to a hidden `.partial-*` file in `uploads/<id>/`, renamed into place, and
its row committed after; deleting one commits the row's removal, then removes the folder. A
process that dies in between leaves a folder no row names: a half-written partial, a complete
file that was never recorded, or a file whose row is gone. Nothing can reach such a folder (it
has no URL and is not listed), yet it holds disk, so each process looks for them once, in the
background, when it starts.

Only folders named by a UUID are considered, and only once neither the folder nor anything in
it has changed for `STALE_SECONDS`: an upload that another worker is receiving right now keeps
its partial's mtime fresh, and a row is committed within moments of its file's rename. The
rows are read after the folders are listed, so an upload recorded in between is seen.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Upload
from app.files.uploads import UPLOADS_DIR

STALE_SECONDS = 3600.0
BATCH = 500

log = logging.getLogger("hearth.files")


@dataclass(frozen=True, slots=True)
class Candidate:
    upload_id: uuid.UUID
    folder: Path


def stale_folders(data_dir: Path, now: float, stale_seconds: float) -> list[Candidate]:
    """Every `users/<user>/uploads/<uuid>/` folder unchanged for `stale_seconds` before `now`."""
    found: list[Candidate] = []
    for uploads in sorted((data_dir / "users").glob(f"*/{UPLOADS_DIR}")):
        for folder in _subfolders(uploads):
            try:
                upload_id = uuid.UUID(folder.name)
            except ValueError:
                continue  # not a folder hearth made: left alone
            if str(upload_id) == folder.name and _last_change(folder) <= now - stale_seconds:
                found.append(Candidate(upload_id, folder))
    return found


def _subfolders(path: Path) -> Iterable[Path]:
    try:
        with os.scandir(path) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _last_change(folder: Path) -> float:
    """The newest mtime of the folder and what it directly holds (an upload is flat)."""
    try:
        newest = folder.stat().st_mtime
        with os.scandir(folder) as entries:
            for entry in entries:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return float("inf")  # it changed under us: not stale
    return newest


def remove_folders(candidates: Iterable[Candidate]) -> int:
    removed = 0
    for candidate in candidates:
        shutil.rmtree(candidate.folder, ignore_errors=True)
        removed += not candidate.folder.exists()
    return removed


async def sweep_orphan_uploads(
    sessions: async_sessionmaker[AsyncSession],
    data_dir: Path,
    *,
    stale_seconds: float = STALE_SECONDS,
) -> int:
    """Remove the stale upload folders that no row names; how many were removed."""
    candidates = await anyio.to_thread.run_sync(stale_folders, data_dir, time.time(), stale_seconds)
    if not candidates:
        return 0
    known: set[uuid.UUID] = set()
    async with sessions() as db:
        for start in range(0, len(candidates), BATCH):
            ids = [c.upload_id for c in candidates[start : start + BATCH]]
            known.update(await db.scalars(select(Upload.id).where(Upload.id.in_(ids))))
    orphans = [c for c in candidates if c.upload_id not in known]
    removed = await anyio.to_thread.run_sync(remove_folders, orphans)
    if removed:
        log.info("removed %d upload folder(s) that no upload names", removed)
    return removed


def start_sweep(sessions: async_sessionmaker[AsyncSession], data_dir: Path) -> asyncio.Task[None]:
    """Sweep in the background; a database that does not answer yet is left to the next start."""

    async def sweep() -> None:
        try:
            await sweep_orphan_uploads(sessions, data_dir)
        except Exception as exc:
            log.warning("orphan upload folders not swept: %s", exc)

    return asyncio.create_task(sweep(), name="sweep orphan uploads")
