"""The application factory.

`create_app()` wires settings, the database engine, the model registry and the routers; it
never touches the schema (that is `hearth migrate`, or `hearth serve` before it starts), so
building an app is cheap and side-effect free apart from the secret key file on first run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agent.supervisor import TurnSupervisor
from app.agent.warmup import settle_heap, warm_up
from app.api import (
    admin,
    approvals,
    auth,
    branches,
    chats,
    compaction,
    data,
    elicitations,
    following,
    health,
    keys,
    mcp_connections,
    messages,
    metrics,
    models,
    tools,
    uploads,
    usage,
    web,
)
from app.api.stream_schema import install as install_stream_schema
from app.auth.tokens import CSRF_HEADER, TokenCodec
from app.clock import Clock
from app.core import errors
from app.core.db.engine import alone_factory, create_engine, session_factory
from app.core.http.json import OrjsonResponse
from app.core.http.limits import BodyLimitMiddleware
from app.core.http.outlet import HearthApp
from app.core.http.request_id import RequestIdMiddleware
from app.core.http.strings import JsonStringsMiddleware
from app.files.data_dir import claim
from app.files.sweep import start_sweep
from app.knowledge.ingest import Ingestor
from app.llm.probe import probe_local_providers
from app.llm.registry import ModelRegistry
from app.observability import traces
from app.observability.http import ObservedRequests
from app.observability.logs import configure_logging
from app.observability.metrics import Metrics, metrics_for
from app.services import Services
from app.settings import Settings
from app.tools.catalogue import Catalogue, Entry
from app.tools.knowledge import KnowledgeGroup
from app.tools.mcp.config import load_mcp_config
from app.tools.mcp.groups import McpGroups
from app.tools.mcp.oauth import Connections, Connector
from app.tools.mcp.sealed import Sealer

log = logging.getLogger("hearth")


def build_services(settings: Settings, clock: Clock | None = None) -> Services:
    clock = clock or Clock()
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    connections = Connections(sessions, Sealer(settings.signing_key), clock)
    mcp = McpGroups(load_mcp_config(settings.mcp_file), clock, connections)
    mcp.connector = connector = Connector(connections, mcp.configs)
    return Services(
        settings=settings,
        engine=engine,
        sessions=sessions,
        alone=alone_factory(engine),
        codec=TokenCodec(settings.signing_key),
        registry=ModelRegistry.from_file(settings.providers_file),
        clock=clock,
        catalogue=Catalogue(
            [
                *(Entry("mcp", group) for group in mcp.groups()),
                Entry("builtin", KnowledgeGroup(sessions)),
            ],
            wait_started=mcp.wait_started,
            ready_for=mcp.ready_for,
        ),
        group_call=mcp.call,
        mcp=mcp,
        connector=connector,
        ingestor=Ingestor(sessions, settings.data_dir),
    )


async def claim_data_dir(engine: AsyncEngine, settings: Settings) -> None:
    """Bind the data dir to the database before any file is touched (`app.files.data_dir`).

    A mismatch stops start-up. A database that does not answer yet leaves the check to the next
    start: the service starts either way, answering `/readyz` 503 until the database does.
    """
    try:
        await claim(engine, settings.database_url, settings.data_dir)
    except (SQLAlchemyError, OSError) as exc:
        log.warning("data dir not checked against the database: %s", exc)


ROUTERS = (
    # FastAPI tries the routes of each router in turn, every route of one before the next, so
    # the routes a chat uses all day come first: a reader's request matched in the 29th place
    # cost it 190 of its 1,520 us of CPU (a 204 from `GET /stream`, PostgreSQL). The document
    # keeps its sections in the order of `OPENAPI_TAGS`.
    messages,
    following,
    chats,
    health,
    metrics,
    auth,
    keys,
    admin,
    usage,
    models,
    compaction,
    branches,
    approvals,
    elicitations,
    tools,
    mcp_connections,
    uploads,
    data,
    web,
)


OPENAPI_TAGS = [
    {"name": "health", "description": "Liveness, readiness and the Prometheus metrics."},
    {"name": "auth", "description": "Accounts, sign-in, sessions."},
    {"name": "keys", "description": "API keys for scripts."},
    {"name": "admin", "description": "Users and their limits, for administrators."},
    {"name": "usage", "description": "Tokens and cost per day."},
    {"name": "models", "description": "The models a user may choose."},
    {"name": "chats", "description": "Chats: create, list, read, rename, delete."},
    {"name": "messages", "description": "Turns: send, follow, stop, edit, regenerate, answer."},
    {"name": "tools", "description": "Tool groups and their activations; MCP accounts."},
    {"name": "uploads", "description": "Files users upload."},
    {"name": "data", "description": "Files served back to their owner."},
]


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    settings = settings or Settings()
    services = build_services(settings, clock)
    services.metrics = metrics_for(settings.metrics_token)
    if services.metrics.enabled and services.mcp is not None:
        services.mcp.watch(services.metrics.mcp_servers)
    services.turns = TurnSupervisor(services)
    services.tracing = traces.install(services.engine, include_content=settings.trace_content)
    app = HearthApp(
        title="hearth",
        version="0.1.0",
        summary="A chat backend for LLM agents.",
        default_response_class=OrjsonResponse,
        openapi_tags=OPENAPI_TAGS,
        lifespan=_lifespan(services),
        telemetry=traces.http_telemetry(services.tracing),
    )
    app.state.services = services
    for module in ROUTERS:
        app.include_router(module.router)
    app.mount("/web", web.client_files(), name="web")
    _document_the_stream(app)
    errors.install(app)
    _add_middleware(app, settings)
    # Outermost: every answer is counted and logged, errors and refusals too.
    app.add_middleware(ObservedRequests, metrics=services.metrics)
    return app


def _lifespan(services: Services) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up (the data dir checked, models built, background work started) and shut-down."""
    settings = services.settings

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await claim_data_dir(services.engine, settings)
        warm_up(services.registry, services.models)
        probe = probe_local_providers(services.registry)
        if services.mcp is not None:
            await services.mcp.start()  # each server starts in the background
        services.turns.start()
        if services.ingestor is not None:
            services.ingestor.start()  # takes up pending ingestions in the background
        sweeping = start_sweep(settings.data_dir, services.clock)
        settle_heap()
        try:
            yield
        finally:
            sweeping.cancel()
            await asyncio.gather(sweeping, return_exceptions=True)
            await services.turns.close()
            if services.ingestor is not None:
                await services.ingestor.close()
            if services.mcp is not None:
                await services.mcp.close()
            probe.cancel()
            await services.engine.dispose()
            if isinstance(services.metrics, Metrics):
                services.metrics.close()
            if services.tracing is not None:
                services.tracing.close()

    return lifespan


def _document_the_stream(app: FastAPI) -> None:
    """FastAPI builds (and caches) the document from the routes; the stream routes' event
    chunks are components no route declares, so they are added once, on first build."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = install_stream_schema(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    # Innermost first: the body ceiling applies before the strings of a body are checked.
    app.add_middleware(JsonStringsMiddleware, exempt=("/api/uploads",))
    app.add_middleware(BodyLimitMiddleware, exempt=("/api/uploads",))
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_credentials=True,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["Content-Type", CSRF_HEADER, "Authorization"],
        )
    app.add_middleware(RequestIdMiddleware)  # outermost: every answer carries the id


def __getattr__(name: str) -> FastAPI:
    # `app.main:app` for uvicorn and other ASGI servers, built on first access only, so that
    # importing this module (tests, the CLI) never reads the environment by accident.
    if name == "app":
        settings = Settings()
        if settings.log_format is not None:  # a worker of `hearth serve --workers N`
            configure_logging(settings.log_format)
        application = create_app(settings)
        globals()["app"] = application
        return application
    raise AttributeError(name)
