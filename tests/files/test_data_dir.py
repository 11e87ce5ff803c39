"""The data dir is private and bound to its database; the SQLite file is private too.

A data dir started beside another database must stop start-up with a clear message and lose
nothing; the same pair starts again and again. Checked on SQLite and PostgreSQL (the installation
row), in-process through the app's lifespan and through `hearth serve` as an operator runs it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.files.data_dir import RECORD, DataDirMismatch, bind_data_dir, claim, database_id
from app.main import create_app
from app.settings import Settings
from tests.support import ROOT, fresh_database


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_dir_takes_the_database_id_privately(tmp_path: Path) -> None:
    owner = uuid.uuid4()
    data_dir = tmp_path / "data"
    bind_data_dir(data_dir, owner)
    assert (data_dir / RECORD).read_text().strip() == str(owner)
    assert (mode(data_dir), mode(data_dir / RECORD)) == (0o700, 0o600)
    bind_data_dir(data_dir, owner)  # the same pair, again: fine


def test_another_database_is_refused_with_both_ids(tmp_path: Path) -> None:
    ours, theirs = uuid.uuid4(), uuid.uuid4()
    bind_data_dir(tmp_path, ours)
    with pytest.raises(DataDirMismatch) as refused:
        bind_data_dir(tmp_path, theirs)
    assert str(ours) in str(refused.value) and str(theirs) in str(refused.value)
    assert (tmp_path / RECORD).read_text().strip() == str(ours)


def test_an_empty_record_left_by_a_dead_start_is_written(tmp_path: Path) -> None:
    (tmp_path / RECORD).touch()
    owner = uuid.uuid4()
    bind_data_dir(tmp_path, owner)
    assert (tmp_path / RECORD).read_text().strip() == str(owner)


def test_an_open_data_dir_is_made_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    bind_data_dir(data_dir, uuid.uuid4())
    assert mode(data_dir) == 0o700


async def test_the_database_id_is_stable_and_made_by_the_migration(engine: AsyncEngine) -> None:
    first = await database_id(engine)
    assert await database_id(engine) == first


async def test_a_data_dir_bound_to_another_database_stops_the_app_and_keeps_its_files(
    database_url: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    upload = data_dir / "users" / str(uuid.uuid4()) / "uploads" / str(uuid.uuid4())
    upload.mkdir(parents=True)
    (upload / "report.pdf").write_bytes(b"%PDF-1.7 precious")

    async with fresh_database("sqlite", tmp_path) as other_url:
        engine = create_engine(other_url)
        await upgrade(engine)
        other = await database_id(engine)
        await claim(engine, other_url, data_dir)  # the data dir belongs to the other one
        await engine.dispose()

    settings = Settings(
        _env_file=None, database_url=database_url, data_dir=data_dir, secret_key="k" * 32
    )
    app = create_app(settings)
    with pytest.raises(DataDirMismatch, match=str(other)):
        async with app.router.lifespan_context(app):
            pass
    await app.state.services.engine.dispose()
    assert (upload / "report.pdf").read_bytes() == b"%PDF-1.7 precious"


async def test_a_fresh_sqlite_database_and_its_journal_are_private(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'var' / 'hearth.db'}"
    engine = create_engine(url)
    try:
        await upgrade(engine)
        async with engine.connect():  # the WAL files exist while a connection does
            await database_id(engine)
            files = list((tmp_path / "var").iterdir())
            assert {p.name for p in files} >= {"hearth.db", "hearth.db-wal", "hearth.db-shm"}
            assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    finally:
        await engine.dispose()
    assert mode(tmp_path / "var") == 0o700


async def test_an_open_sqlite_file_is_made_private_at_start(tmp_path: Path) -> None:
    database = tmp_path / "hearth.db"
    url = f"sqlite+aiosqlite:///{database}"
    engine = create_engine(url)
    await upgrade(engine)
    os.chmod(database, 0o644)
    await claim(engine, url, tmp_path / "data")
    await engine.dispose()
    assert mode(database) == 0o600


def test_a_wildcard_origin_is_refused() -> None:
    with pytest.raises(ValidationError, match="cannot hold '\\*'"):
        Settings(_env_file=None, allowed_origins="*")
    with pytest.raises(ValidationError, match="cannot hold '\\*'"):
        Settings(_env_file=None, allowed_origins="https://a.example, https://*.example")


def _serve(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "HEARTH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'hearth.db'}",
        "HEARTH_DATA_DIR": str(tmp_path / "data"),
        "HEARTH_SECRET_KEY": "k" * 32,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", "1"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_hearth_serve_refuses_a_mismatched_pair_and_a_wildcard_origin(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / RECORD).write_text(f"{uuid.uuid4()}\n")
    refused = _serve(tmp_path)
    assert refused.returncode != 0
    assert "configuration error: the data dir" in refused.stderr
    assert "belongs to another database" in refused.stderr
    assert "Traceback" not in refused.stderr

    wildcard = _serve(tmp_path, HEARTH_ALLOWED_ORIGINS="*")
    assert wildcard.returncode != 0
    assert "configuration error" in wildcard.stderr and "cannot hold '*'" in wildcard.stderr
    assert "Traceback" not in wildcard.stderr
