"""What a running hearth holds for the life of the process, built once in `create_app`.

Routes reach it through `request.app.state.services`; tests swap pieces (the clock) on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.auth.sessions import SessionPolicy
from app.auth.tokens import TokenCodec
from app.clock import Clock
from app.llm.registry import ModelRegistry
from app.settings import Settings


@dataclass
class Services:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    codec: TokenCodec
    registry: ModelRegistry
    clock: Clock = field(default_factory=Clock)

    @property
    def session_policy(self) -> SessionPolicy:
        return SessionPolicy(
            idle=timedelta(days=self.settings.session_idle_days),
            lifetime=timedelta(days=self.settings.session_max_days),
        )
