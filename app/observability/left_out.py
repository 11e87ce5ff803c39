"""What no exported span carries, taken out on its way to the exporter.

The GenAI semantic conventions make `gen_ai.tool.definitions` opt-in: every tool's name,
description and schema, on each model request, tens of kilobytes once a few MCP servers are
connected, the same all through a turn, and in no one's question about it. pydantic-ai sets it on
every model request span with no setting to stop it (`include_model_request_parameters=False`
drops only its own `model_request_parameters`), so hearth's span processor leaves it out: a
span that has it is handed on as a copy without it, any other as it is. Imported only when
tracing is on (`app.observability.traces`), like the SDK it builds on.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

LEFT_OUT_ATTRIBUTES: Final = frozenset({"gen_ai.tool.definitions"})


class LeavingOut(SpanProcessor):
    """Hands each ended span to `inner` without `LEFT_OUT_ATTRIBUTES`."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes
        if attributes and not LEFT_OUT_ATTRIBUTES.isdisjoint(attributes):
            span = ReadableSpan(
                name=span.name,
                context=span.context,
                parent=span.parent,
                resource=span.resource,
                attributes={
                    key: value
                    for key, value in attributes.items()
                    if key not in LEFT_OUT_ATTRIBUTES
                },
                events=span.events,
                links=span.links,
                kind=span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=span.end_time,
                instrumentation_scope=span.instrumentation_scope,
            )
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
