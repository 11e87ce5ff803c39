"""Fixtures shared by the database tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiosqlite
import pytest


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each call made on an aiosqlite connection's thread."""
    made: list[str] = []
    execute: Callable[..., Awaitable[Any]] = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(getattr(fn, "__name__", repr(fn)))
        return await execute(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return made
