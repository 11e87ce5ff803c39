"""A database that does not take hearth's connection: requests are answered 503 with
`Retry-After`, not 500, and the log says so in a warning, without a traceback."""

from __future__ import annotations

import logging
import secrets
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import create_async_engine

from app.auth.tokens import SESSION_COOKIE
from app.core.db.engine import create_engine
from app.core.db.retry import database_unavailable
from app.core.errors import DATABASE_UNAVAILABLE
from app.main import create_app
from app.settings import Settings
from tests.support import (
    PG_ADMIN_URL,
    ROOT,
    asyncpg_dsn,
    free_port,
    http_client,
    live_server,
    pg_available,
    skip_or_fail_without_pg,
)


def settings_for(url: str, data_dir: Path) -> Settings:
    return Settings(
        _env_file=None,
        database_url=url,
        data_dir=data_dir,
        secret_key="k" + secrets.token_hex(8),
        providers_file=ROOT / "config" / "providers.yaml",
    )


async def assert_unavailable(url: str, data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every kind of request that needs the database is a 503 with `Retry-After`."""
    chat = uuid.uuid4()
    async with (
        live_server(create_app(settings_for(url, data_dir))) as base_url,
        http_client(base_url=base_url) as http,
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            answers = [
                await http.post("/api/auth/login", json={"email": "a@b.io", "password": "x" * 12}),
                await http.get(f"/api/chats/{chat}", headers={"Cookie": f"{SESSION_COOKIE}=a.b.c"}),
                await http.get("/api/chats", headers={"Authorization": "Bearer hk_" + "x" * 40}),
            ]
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json() == {"detail": DATABASE_UNAVAILABLE}
            assert answer.headers["retry-after"] == "2"
            assert answer.headers["x-request-id"]
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 503
    said = [r for r in caplog.records if r.name == "hearth"]
    assert said and all(r.levelno == logging.WARNING and r.exc_info is None for r in said)
    assert all("the database is unavailable" in r.getMessage() for r in said)


async def test_a_database_that_does_not_answer_is_503(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none"
    await assert_unavailable(url, tmp_path, caplog)


@pytest.fixture
async def refused_url() -> AsyncIterator[str]:
    """A PostgreSQL role that may open no connection: the server answers `too many
    connections` (SQLSTATE 53300), as it does when hearth's pools outgrow max_connections."""
    if not await pg_available():
        skip_or_fail_without_pg()
    role = "hearth_no_room_" + secrets.token_hex(4)
    admin = await asyncpg.connect(asyncpg_dsn(PG_ADMIN_URL))
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
        yield make_url(PG_ADMIN_URL).set(username=role).render_as_string(hide_password=False)
    finally:
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def test_a_database_out_of_connections_is_503(
    refused_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await assert_unavailable(refused_url, tmp_path, caplog)


async def test_a_fault_of_the_work_is_not_an_outage(tmp_path: Path) -> None:
    """A statement the database rejects is hearth's fault (500), not the database's absence."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with engine.connect() as connection:
            with pytest.raises(DBAPIError) as caught:
                await connection.execute(text("SELECT * FROM no_such_table"))
    finally:
        await engine.dispose()
    assert not database_unavailable(caught.value)
    assert not database_unavailable(ProgrammingError("SELECT", {}, Exception("syntax")))
    assert not database_unavailable(ConnectionRefusedError("a provider, not the database"))


async def test_a_locked_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    """SQLite busy beyond its timeout is the database unable to take the work now."""
    path = tmp_path / "x.db"
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.05})
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("CREATE TABLE t (x INTEGER)")
        holder.execute("BEGIN EXCLUSIVE")
        async with engine.connect() as connection:
            with pytest.raises(DBAPIError) as caught:
                await connection.execute(text("INSERT INTO t VALUES (1)"))
    finally:
        holder.close()
        await engine.dispose()
    assert "locked" in str(caught.value)
    assert database_unavailable(caught.value)
