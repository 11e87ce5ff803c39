"""An OpenTelemetry collector for tests: OTLP/HTTP on a loopback port, protobuf decoded.

It accepts what an SDK exporter sends to `/v1/traces` (an `ExportTraceServiceRequest`, binary
protobuf, gzip or not), decodes it with the protocol's own generated classes, and keeps every
span with its resource's attributes, so a test reads the trace as a collector would store it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import live_server


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: plain(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[dict[str, Any]]
    scope: str


@dataclass
class Collector:
    base_url: str = ""
    spans: list[Span] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    """Every export as it arrived (decompressed), to search for what must not be there."""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self, request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.append(body)
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            resource = {a.key: plain(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        Span(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: plain(a.value) for a in span.attributes},
                            resource=resource,
                            events=[
                                {a.key: plain(a.value) for a in event.attributes}
                                for event in span.events
                            ],
                            scope=scope_spans.scope.name,
                        )
                    )
        self.arrived.set()
        return Response(
            ExportTraceServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    def named(self, name: str) -> list[Span]:
        return [span for span in self.spans if span.name == name]

    def tally(self) -> dict[str, Any]:
        """How many spans arrived, by instrumentation scope and by the name of their trace's
        root (the span whose parent is not in the export: a caller's, or none)."""
        ids = {span.span_id for span in self.spans}
        roots = {s.trace_id: s.name for s in self.spans if s.parent_id not in ids}
        return {
            "spans": len(self.spans),
            "by_scope": dict(Counter(span.scope for span in self.spans)),
            "by_root": dict(Counter(roots.get(span.trace_id, "") for span in self.spans)),
        }


@asynccontextmanager
async def collector() -> AsyncIterator[Collector]:
    found = Collector()
    app = Starlette(routes=[Route("/v1/traces", found.receive, methods=["POST"])])
    async with live_server(app) as base_url:
        found.base_url = base_url
        yield found


def main() -> None:
    """A collector in a process of its own, for benchmarks: `GET /count` says how many spans
    arrived, by scope and by trace (`Collector.tally`)."""
    import argparse

    import uvicorn
    from starlette.responses import JSONResponse

    parser = argparse.ArgumentParser(description="an OTLP/HTTP trace receiver")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    found = Collector()

    async def count(_: Request) -> Response:
        return JSONResponse(found.tally())

    app = Starlette(
        routes=[
            Route("/v1/traces", found.receive, methods=["POST"]),
            Route("/count", count, methods=["GET"]),
        ]
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
