"""The data dir: made private, and bound to the one database whose rows name its files.

Files and rows belong together: an upload folder means something only beside the row that names
it. A data dir therefore records, in `<data_dir>/database_id`, the id of the database it belongs
to (the `installation` row, made by the migration that created that table), and start-up stops
with a clear message when the two do not match: another `HEARTH_DATABASE_URL` pointed at the same
data dir, or the data dir of another installation. Nothing reads or writes files before that.
A data dir without the record (a new one, or one from before the record existed) takes the
database's id on its first start.

Chats, emails and password hashes are nobody else's business on a shared machine: the data dir
is made (and kept) readable by its owner only, as is the SQLite database file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from pathlib import Path

import anyio
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.clock import Clock
from app.core.db.engine import sqlite_file
from app.models import Installation

RECORD = "database_id"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class DataDirMismatch(Exception):
    """The data dir belongs to another database; hearth refuses to start on it."""


async def database_id(engine: AsyncEngine) -> uuid.UUID:
    """The database's installation id (made here if the row is missing)."""
    async with engine.begin() as connection:
        found = await connection.scalar(select(Installation.id).where(Installation.key == 1))
        if found is not None:
            return found
    made = uuid.uuid4()
    try:
        async with engine.begin() as connection:
            await connection.execute(
                insert(Installation).values(key=1, id=made, created_at=Clock().now())
            )
        return made
    except IntegrityError:  # another worker made it first: theirs is the one
        async with engine.connect() as connection:
            found = await connection.scalar(select(Installation.id).where(Installation.key == 1))
        assert found is not None
        return found


def make_private(path: Path, mode: int) -> None:
    """Take away every permission of the group and others on `path`, if we own it."""
    with contextlib.suppress(OSError):
        current = stat.S_IMODE(path.stat().st_mode)
        if current & 0o077:
            os.chmod(path, current & mode)


def bind_data_dir(data_dir: Path, owner: uuid.UUID) -> None:
    """Make `data_dir` private and bound to the database `owner`; DataDirMismatch if it is
    another's. Blocking: run it in a thread."""
    data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    make_private(data_dir, PRIVATE_DIR)
    record = data_dir / RECORD
    try:
        fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        recorded = record.read_text().strip()
        if recorded and recorded != str(owner):
            raise DataDirMismatch(
                f"the data dir {data_dir.resolve()} belongs to another database (its {RECORD} "
                f"says {recorded}; HEARTH_DATABASE_URL names database {owner}). Point "
                "HEARTH_DATA_DIR and HEARTH_DATABASE_URL at the pair that belong together; "
                "hearth will not start on a mismatched pair, so no file is read, written or "
                "removed."
            ) from None
        if recorded:
            return
        # Left empty by a start that died between creating and writing it: write it now.
        fd = os.open(record, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{owner}\n")


async def claim(engine: AsyncEngine, database_url: str, data_dir: Path) -> None:
    """Everything start-up checks and tightens before files are touched."""
    owner = await database_id(engine)
    await anyio.to_thread.run_sync(bind_data_dir, data_dir, owner)
    database = sqlite_file(database_url)
    if database is not None:
        for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
            await anyio.to_thread.run_sync(make_private, path, PRIVATE_FILE)
