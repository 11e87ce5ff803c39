"""Fixtures: every API test runs against SQLite and against PostgreSQL, over real HTTP.

`backend` is a session-scoped parameter, so pytest runs the whole API suite once per database;
each backend gets one migrated database and one live uvicorn server, and tables are emptied
between tests.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.auth import signed_in
from app.auth.passwords import hash_password
from app.auth.sessions import open_session
from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.core.db.base import Base
from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.main import create_app
from app.models import Installation
from app.services import Services
from app.settings import Settings
from app.users.service import create_user
from tests import golden
from tests.clock import ShiftedClock
from tests.support import ROOT, Client, fresh_database, http_client, live_server

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
async def database_url(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    async with fresh_database(backend, tmp_path_factory.mktemp(backend)) as url:
        engine = create_engine(url)
        await upgrade(engine)
        await engine.dispose()
        yield url


@pytest.fixture(scope="session")
def settings(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("data"),
        secret_key="test-secret-key-" + secrets.token_hex(8),
        providers_file=ROOT / "config" / "providers.yaml",
        mcp_file=ROOT / "config" / "mcp.yaml",
    )


@pytest.fixture(scope="session")
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest.fixture(scope="session")
async def server(settings: Settings, clock: ShiftedClock) -> AsyncIterator[tuple[str, Services]]:
    app = create_app(settings, clock=clock)
    async with live_server(app) as base_url:
        yield base_url, app.state.services


@pytest.fixture
async def services(server: tuple[str, Services], clock: ShiftedClock) -> AsyncIterator[Services]:
    _, services = server
    original = services.settings
    yield services
    services.settings = original
    clock.reset()
    if services.ingestor is not None:
        await services.ingestor.idle()  # an ingestion still writing would race the emptying
    await _empty_tables(services.engine)


async def _empty_tables(engine: AsyncEngine) -> None:
    # The installation row is the database's identity, which the data dir records: it stays.
    tables = [
        table.name
        for table in reversed(Base.metadata.sorted_tables)
        if table.name != Installation.__tablename__
    ]
    # DELETE, children first, on both engines: on tables this small PostgreSQL's TRUNCATE costs
    # six times as much (about 30 ms against 4.5 ms), paid after every test.
    async with engine.begin() as connection:
        for table in tables:
            await connection.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def engine(services: Services) -> AsyncEngine:
    return services.engine


@pytest.fixture
async def anon(server: tuple[str, Services], services: Services) -> AsyncIterator[Client]:
    """A client with no session."""
    base_url, _ = server
    async with http_client(base_url=base_url, timeout=30) as http:
        yield Client(http)


NewUser = Callable[..., Awaitable[Client]]


_PASSWORD_HASHES: dict[str, str] = {}
"""Each test password hashed once per run, with the service's own Argon2 parameters."""


@pytest.fixture
async def new_user(server: tuple[str, Services], services: Services) -> AsyncIterator[NewUser]:
    """A fresh user and a client signed in as it.

    The user is made as registration makes one (the same row, a session opened by the same
    function, the same cookies and answer), but its password hash is made once per run rather
    than once per test: Argon2 costs a tenth of a second, by design. Registration and sign-in
    themselves are tested through their routes in tests/api/test_auth.py.
    """
    base_url, _ = server
    host = httpx.URL(base_url).host
    opened: list[httpx.AsyncClient] = []

    async def make(email: str | None = None, password: str = "correct horse") -> Client:
        http = http_client(base_url=base_url, timeout=30)
        opened.append(http)
        email = email or f"user-{secrets.token_hex(4)}@example.com"
        if password not in _PASSWORD_HASHES:
            _PASSWORD_HASHES[password] = await hash_password(password)
        now = services.clock.now()
        async with services.sessions() as db:
            user = await create_user(
                db, email=email, password_hash=_PASSWORD_HASHES[password], now=now
            )
            token = await open_session(db, services.codec, user, now, services.session_policy)
            await db.commit()
            answer = signed_in(services, user, token, 201)
        http.cookies.set(SESSION_COOKIE, services.codec.sign(token), domain=host)
        http.cookies.set(CSRF_COOKIE, services.codec.csrf_for(token), domain=host)
        return Client(http, user=json.loads(bytes(answer.body)), password=password)

    yield make
    for http in opened:
        await http.aclose()


@pytest.fixture
async def user(new_user: NewUser) -> Client:
    return await new_user()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).name.startswith("test_e2e"):
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        golden.UPDATE_OPTION,
        action="store_true",
        default=False,
        help="write the golden snapshots under tests/golden/ instead of comparing with them",
    )


def pytest_configure(config: pytest.Config) -> None:
    golden.update = bool(config.getoption(golden.UPDATE_OPTION))
