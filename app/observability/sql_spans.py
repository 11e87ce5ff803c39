"""A span per SQL statement, from SQLAlchemy's own engine events.

What the OpenTelemetry instrumentation's `EngineTracer` did, with each statement's span name and
attributes worked out once: a turn runs the same dozen statements as every other turn, and the
tracer worked out the database's name and address, stripped the statement's leading comment
and split it for its first word, and built its attribute dict anew for every one of them. It
also counted pool checkouts and checkins into a metric hearth never exports. Measured in one
process (a statement on SQLite, 3,000 times, a tracer provider that keeps its spans): the
instrumentation added 148 µs of CPU to a statement, a span with its attributes known beforehand
107 µs; a turn runs 15 to 21 statements (`bench/turn_overhead.py` o has the whole figure).

The attributes are the stable database conventions: `db.system.name`, `db.namespace` (the
database), `db.operation.name` (the statement's first word), `db.query.text` (the statement as
sent, with its placeholders and never its values), and `server.address` and `server.port` where
the database is reached over the network. The span, a client span named `<operation>
<database>`, is a child of whatever is current where the statement runs: the request, or the
turn, whose context `app.core.db.sqlite_trips.in_one_trip` carries to a connection's thread.
A statement that fails ends its span with an error status and the driver's message.
"""

from __future__ import annotations

import re
from typing import Any, Final

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from sqlalchemy import event
from sqlalchemy.engine import Engine, ExceptionContext

KEEP = 1024
"""Distinct statements whose span name and attributes are kept; past that they are forgotten
and worked out again (a list of values renders its own statement for each length)."""

_LEADING_COMMENT: Final = re.compile(r"^\s*/\*.*?\*/", re.DOTALL)


class StatementSpans:
    """The spans of one engine's statements, while its listeners are in place (`remove`)."""

    def __init__(self, tracer: Tracer, engine: Engine) -> None:
        self.tracer = tracer
        self.engine = engine
        url = engine.url
        self.namespace = url.database or ""
        self.base: dict[str, Any] = {"db.system.name": engine.dialect.name}
        if url.database:
            self.base["db.namespace"] = url.database
        if url.host:
            self.base["server.address"] = url.host
        if url.port:
            self.base["server.port"] = url.port
        self.known: dict[str, tuple[str, dict[str, Any]]] = {}
        self.listening = True
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(engine, "handle_error", self._failed)

    def remove(self) -> None:
        """Take the listeners out; again does nothing."""
        if not self.listening:
            return
        self.listening = False
        event.remove(self.engine, "before_cursor_execute", self._before)
        event.remove(self.engine, "after_cursor_execute", self._after)
        event.remove(self.engine, "handle_error", self._failed)

    def described(self, statement: str) -> tuple[str, dict[str, Any]]:
        """The span name and attributes of `statement`."""
        found = self.known.get(statement)
        if found is None:
            if len(self.known) >= KEEP:
                self.known.clear()
            words = _LEADING_COMMENT.sub("", statement, count=1).split(None, 1)
            operation = words[0].upper() if words else ""
            attributes = {**self.base, "db.query.text": statement}
            if operation:
                attributes["db.operation.name"] = operation
            name = " ".join(part for part in (operation, self.namespace) if part)
            found = self.known[statement] = (name or self.engine.dialect.name, attributes)
        return found

    def _before(
        self,
        conn: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        if context is None:
            return
        name, attributes = self.described(statement)
        context._hearth_span = self.tracer.start_span(
            name, kind=SpanKind.CLIENT, attributes=attributes
        )

    @staticmethod
    def _after(
        conn: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        span = getattr(context, "_hearth_span", None)
        if span is not None:
            context._hearth_span = None
            span.end()

    @staticmethod
    def _failed(failure: ExceptionContext) -> None:
        context: Any = failure.execution_context
        span = getattr(context, "_hearth_span", None)
        if span is None:
            return
        context._hearth_span = None
        span.set_status(Status(StatusCode.ERROR, str(failure.original_exception)))
        span.end()
