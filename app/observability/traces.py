"""OpenTelemetry traces, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces-only form) is set.

Nothing of OpenTelemetry's SDK is imported, installed or run otherwise: `install` answers None
and the turn engine opens no span. With it set, spans go over OTLP/HTTP (protobuf) through a
batch processor, configured by the standard `OTEL_*` variables (headers, timeout, batch sizes,
`OTEL_SERVICE_NAME`, default `hearth`):

- a server span per HTTP request, FastAPI's own (`FastAPI(telemetry=...)`, `http_telemetry`),
  which continues an incoming `traceparent`; probes and scrapes (`/healthz`, `/readyz`,
  `/metrics`) are left out. FastAPI's own spans rather than the OpenTelemetry FastAPI
  instrumentation: its ASGI middleware costs 138 us of CPU a request, FastAPI's span 69 us,
  with the same provider (a bare app, 3,000 requests a figure). FastAPI's metrics, logs and
  per-operation spans stay off (hearth has its own metrics and logs);
- a `turn` span per turn, a child of the request that started it (the turn's task inherits the
  request's context), with the chat, the model and how the turn ended;
- pydantic-ai's own spans below it, for the agent run, each model request and each tool call,
  in the GenAI semantic conventions; the messages, instructions and tool arguments and results
  are left out unless `HEARTH_TRACE_CONTENT=true`, and the tool definitions always are: the
  conventions make `gen_ai.tool.definitions` opt-in, and pydantic-ai sets it on every model
  request with no setting to stop it (`include_model_request_parameters` only drops its own
  attribute), so the span processor takes it out before export (`app.observability.left_out`);
- a span per SQL statement (`app.observability.sql_spans`, on SQLAlchemy's engine events),
  statements without their values.

The provider is hearth's own, not the process-wide default, so a library that traces by itself
does not export through it by accident, and FastAPI's telemetry is told which provider to use or,
without an endpoint, to stay off even where something else set a process-wide one. `close`
flushes what is pending and takes every hook back out (tests build apps with and without it in
one process).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from fastapi.telemetry import TelemetryConfig
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from app.observability.sql_spans import StatementSpans

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
UNTRACED_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})


def wanted() -> bool:
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


@dataclass
class Tracing:
    provider: Any
    """The SDK's `TracerProvider`."""
    tracer: Any
    _sql: StatementSpans

    @contextlib.contextmanager
    def turn(self, attributes: dict[str, str]) -> Iterator[Any]:
        with self.tracer.start_as_current_span("turn", attributes=attributes) as span:
            yield span

    def flush(self) -> None:
        self.provider.force_flush()

    def close(self) -> None:
        from pydantic_ai import Agent

        Agent.instrument_all(False)
        self._sql.remove()
        self.provider.shutdown()


def untraced(scope: MutableMapping[str, Any]) -> bool:
    """Whether a request goes without a server span: the probes and the scrape."""
    return scope.get("path") in UNTRACED_PATHS


def http_telemetry(tracing: Tracing | None) -> TelemetryConfig:
    """FastAPI's `telemetry` setting: a server span per request through hearth's provider, or,
    without tracing, nothing at all."""
    if tracing is None:
        return {"tracing": False, "metrics": False, "logs": False}
    return {
        "tracer_provider": tracing.provider,
        "metrics": False,
        "logs": False,
        "operation_spans": False,
        "exclude": untraced,
    }


def install(engine: AsyncEngine, *, include_content: bool) -> Tracing | None:
    """Trace hearth's database and its agents, if an OTLP endpoint is configured; its HTTP
    requests are traced by FastAPI, given `http_telemetry` of what this returns."""
    if not wanted():
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from app.observability.left_out import LeavingOut
    from app.observability.sql_spans import StatementSpans

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "hearth"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(LeavingOut(BatchSpanProcessor(OTLPSpanExporter())))
    sql = StatementSpans(provider.get_tracer("hearth.sql"), engine.sync_engine)
    Agent.instrument_all(
        InstrumentationSettings(
            tracer_provider=provider,
            include_content=include_content,
            include_binary_content=False,
            # The tool definitions (every schema, each model request): the largest attribute
            # of a span by far, the same for every request of a turn, and in no one's question.
            include_model_request_parameters=False,
        )
    )
    return Tracing(provider, provider.get_tracer("hearth"), sql)
