"""What a running hearth holds for the life of the process, built once in `create_app`.

Routes reach it through `request.app.state.services`; tests swap pieces (the settings) on it. The
clock is given to `create_app`, which hands it to everything that reads the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.agent.supervisor import TurnSupervisor
from app.auth.sessions import SessionPolicy
from app.auth.tokens import TokenCodec
from app.clock import Clock
from app.knowledge.ingest import Ingestor
from app.llm.factory import ModelCache
from app.llm.registry import ModelRegistry
from app.observability.metrics import NO_METRICS, Reporter
from app.observability.traces import Tracing
from app.settings import Settings
from app.tools.catalogue import Catalogue
from app.tools.groups import GroupCall, no_group_call
from app.tools.mcp.groups import McpGroups
from app.tools.mcp.oauth import Connector


@dataclass
class Services:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    alone: async_sessionmaker[AsyncSession]
    """Sessions whose statements each run alone, without a transaction, on PostgreSQL: for reads
    and one-statement writes (`app.core.db.engine.alone_factory`)."""
    codec: TokenCodec
    registry: ModelRegistry
    clock: Clock = field(default_factory=Clock)
    catalogue: Catalogue = field(default_factory=Catalogue)
    """Every group of tools that can be activated (MCP servers, built-in groups)."""
    group_call: GroupCall = field(default=no_group_call)
    """Calls a tool of a group: routes to the group's MCP server or built-in implementation."""
    models: ModelCache = field(default_factory=ModelCache)
    """The pydantic-ai model of each configured model, built once."""
    mcp: McpGroups | None = None
    """The MCP servers of `config/mcp.yaml`, shared by every chat of the process."""
    connector: Connector | None = None
    """Users connecting the MCP servers they use with their own accounts (`auth: oauth`)."""
    ingestor: Ingestor | None = None
    """Makes uploaded documents searchable, in the background."""
    metrics: Reporter = NO_METRICS
    """Prometheus metrics when `HEARTH_METRICS_TOKEN` is set; else reports are dropped."""
    tracing: Tracing | None = None
    """OpenTelemetry, when an OTLP endpoint is configured (`app.observability.traces`)."""
    turns: TurnSupervisor = field(init=False)
    """The turns running in this process; attached by `create_app`."""

    @property
    def session_policy(self) -> SessionPolicy:
        return SessionPolicy(
            idle=timedelta(days=self.settings.session_idle_days),
            lifetime=timedelta(days=self.settings.session_max_days),
        )
