"""The start-up sweep: upload folders that no row names are removed once stale, nothing else.

Folders are planted as an interrupted process would leave them and aged by setting their mtimes.
Each test sweeps a data folder of its own (the service's is shared by every test of the run),
holding copies of real uploads made over HTTP, whose rows are in the test database.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from app.db.models import Upload
from app.files.roots import user_root
from app.files.sweep import STALE_SECONDS, start_sweep, sweep_orphan_uploads
from app.services import Services
from tests.api.test_uploads import PNG, TEXT, upload_one
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

AGED = time.time() - STALE_SECONDS - 60


def age(folder: Path, when: float = AGED) -> Path:
    """Set the folder's and its entries' mtimes to `when`, as if untouched since."""
    for entry in folder.iterdir():
        os.utime(entry, (when, when), follow_symlinks=False)
    os.utime(folder, (when, when))
    return folder


def user_folder(data_dir: Path, client: Client) -> Path:
    return data_dir / "users" / client.user["id"]


async def recorded(
    client: Client, services: Services, data_dir: Path, name: str, content: bytes
) -> tuple[dict[str, Any], Path]:
    """An upload made over HTTP (its row stored), its folder copied into `data_dir` and aged."""
    item = await upload_one(client, name, content)
    source = user_root(services.settings.data_dir, client.user["id"]) / "uploads" / item["id"]
    copy = user_folder(data_dir, client) / "uploads" / item["id"]
    shutil.copytree(source, copy)
    age(copy)
    return item, copy


def plant(root: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = root / "uploads" / name
    folder.mkdir(parents=True)
    for filename, content in files.items():
        (folder / filename).write_bytes(content)
    return folder


async def test_stale_folders_no_row_names_are_removed_and_nothing_else(
    user: Client, services: Services, tmp_path: Path
) -> None:
    data_dir = tmp_path
    root = user_folder(data_dir, user)
    _, kept_folder = await recorded(user, services, data_dir, "chart.png", PNG)
    half_written = age(plant(root, str(uuid.uuid4()), {".partial-k3j2": b"half a fi"}))
    unrecorded = age(plant(root, str(uuid.uuid4()), {"notes.txt": TEXT}))
    receiving = plant(root, str(uuid.uuid4()), {".partial-live": b"arriving"})  # fresh
    not_ours = age(plant(root, "drafts", {"a.txt": b"mine"}))
    upper = age(plant(root, str(uuid.uuid4()).upper(), {"b.txt": b"mine too"}))
    touched = plant(root, str(uuid.uuid4()), {"old.txt": b"old", "new.txt": b"new"})
    age(touched)
    os.utime(touched / "new.txt")  # one entry changed just now: the folder is not stale
    (root / "workspace.txt").write_text("kept")

    assert await sweep_orphan_uploads(services.sessions, data_dir) == 2

    assert not half_written.exists() and not unrecorded.exists()
    for folder in (receiving, not_ours, upper, touched):
        assert folder.is_dir(), folder
    assert (root / "workspace.txt").read_text() == "kept"
    assert (kept_folder / "chart.png").read_bytes() == PNG
    assert await sweep_orphan_uploads(services.sessions, data_dir) == 0  # nothing left to do


async def test_a_folder_left_by_a_delete_that_did_not_finish_is_removed(
    user: Client, services: Services, tmp_path: Path
) -> None:
    gone, gone_folder = await recorded(user, services, tmp_path, "notes.txt", TEXT)
    stays, stays_folder = await recorded(user, services, tmp_path, "chart.png", PNG)
    async with services.sessions() as db:  # the row went; the process died before the folder
        await db.execute(delete(Upload).where(Upload.id == uuid.UUID(gone["id"])))
        await db.commit()

    assert await sweep_orphan_uploads(services.sessions, tmp_path) == 1

    assert not gone_folder.exists()
    assert (stays_folder / "chart.png").read_bytes() == PNG
    listed = (await user.get("/api/uploads")).json()["items"]
    assert [item["id"] for item in listed] == [stays["id"]]


async def test_many_folders_are_checked_in_batches(
    user: Client, services: Services, tmp_path: Path
) -> None:
    _, kept = await recorded(user, services, tmp_path, "notes.txt", TEXT)
    root = user_folder(tmp_path, user)
    orphans = [age(plant(root, str(uuid.uuid4()), {"f.txt": b"x"})) for _ in range(1203)]

    assert await sweep_orphan_uploads(services.sessions, tmp_path) == 1203

    assert not any(folder.exists() for folder in orphans)
    assert (kept / "notes.txt").read_bytes() == TEXT


async def test_a_database_that_does_not_answer_leaves_everything_and_says_so(
    user: Client, services: Services, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    orphan = age(plant(user_folder(tmp_path, user), str(uuid.uuid4()), {"f.txt": b"x"}))
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'no.db'}")
    try:
        with caplog.at_level(logging.WARNING, logger="hearth.files"):
            await start_sweep(async_sessionmaker(engine), tmp_path)
    finally:
        await engine.dispose()
    assert orphan.is_dir()
    assert "orphan upload folders not swept" in caplog.text
