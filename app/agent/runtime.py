"""What the turn engine needs from the running service, and nothing more.

`app.services.Services` provides all of it structurally (it is never imported here, and the
members are read-only, so any object with these attributes will do). The engine depends on the
database sessions, the clock, the settings, the models and the tool catalogue, and not on HTTP,
the auth codec, the ingestion queue or the container itself.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.clock import Clock
from app.llm.factory import ModelCache
from app.llm.registry import ModelRegistry
from app.observability.metrics import Reporter
from app.observability.traces import Tracing
from app.settings import Settings
from app.tools.catalogue import Catalogue
from app.tools.groups import GroupCall


class TurnRuntime(Protocol):
    @property
    def settings(self) -> Settings:
        """Read afresh at each use: a test (or a reload) may swap it."""

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]: ...
    @property
    def alone(self) -> async_sessionmaker[AsyncSession]:
        """Sessions whose statements each run alone (`app.core.db.engine.alone_factory`)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def registry(self) -> ModelRegistry: ...
    @property
    def models(self) -> ModelCache:
        """Every configured model, and its agent, built once."""

    @property
    def catalogue(self) -> Catalogue: ...
    @property
    def group_call(self) -> GroupCall: ...
    @property
    def metrics(self) -> Reporter:
        """Where turns, model requests and tool calls are counted (or not, when it is off)."""

    @property
    def tracing(self) -> Tracing | None:
        """Where a turn's span is opened, when traces are exported."""
