"""Alembic environment: async engines, one code path for the CLI and for hearth itself.

hearth (serve, migrate, tests) hands over an open connection in `config.attributes`; the
`alembic` command line builds its own engine from `HEARTH_DATABASE_URL`. Batch mode is on so
that ALTERs work on SQLite too.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeDecorator

from app import models  # noqa: F401  (fills Base.metadata)
from app.core.db.base import Base
from app.core.db.engine import create_engine
from app.knowledge.index import include_object
from app.settings import Settings

config = context.config
target_metadata = Base.metadata


def _render_item(kind: str, obj: object, _context: object) -> str | bool:
    """Write hearth's TypeDecorators as the plain SQLAlchemy type they store."""
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl!r}"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        render_item=_render_item,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_engine(url)
    async with engine.connect() as connection:
        await connection.run_sync(_configure)
        await connection.commit()
    await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or Settings().database_url
    asyncio.run(_run_with_own_engine(url))


def run_migrations_offline() -> None:
    url = config.get_main_option("sqlalchemy.url") or Settings().database_url
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
