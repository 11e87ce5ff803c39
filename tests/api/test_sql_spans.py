"""The span of each SQL statement (`app.observability.sql_spans`), on SQLite and PostgreSQL:
its name and attributes, its parent, its values never recorded, a failure's status, and
nothing once the listeners are removed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db.engine import create_engine
from app.models import User
from app.observability import sql_spans
from app.observability.sql_spans import StatementSpans

SECRET = "a-value-that-must-never-be-exported"


@pytest.fixture
async def traced(
    database_url: str,
) -> AsyncIterator[tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = create_engine(database_url)
    spans = StatementSpans(provider.get_tracer("hearth.sql"), engine.sync_engine)
    try:
        yield engine, spans, exporter, provider
    finally:
        spans.remove()
        await engine.dispose()
        provider.shutdown()


def statement_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]


async def test_a_statement_is_a_client_span_with_its_text_and_never_its_values(
    traced: tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider],
    database_url: str,
) -> None:
    engine, _, exporter, provider = traced
    url = make_url(database_url)
    query = select(User.id).where(User.email == bindparam("email"))
    with provider.get_tracer("test").start_as_current_span("request") as parent:
        async with engine.connect() as connection:
            found = (await connection.execute(query, {"email": SECRET})).all()
    assert found == []

    (span,) = [s for s in statement_spans(exporter) if "users" in str(s.attributes)]
    assert span.name == f"SELECT {url.database}"
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    attributes = dict(span.attributes or {})
    assert attributes["db.system.name"] == engine.dialect.name
    assert attributes["db.namespace"] == url.database
    assert attributes["db.operation.name"] == "SELECT"
    text_sent = attributes["db.query.text"]
    assert isinstance(text_sent, str) and text_sent.startswith("SELECT users.id")
    assert "email" in text_sent and SECRET not in text_sent
    if url.host:  # PostgreSQL over the network says where
        assert attributes["server.address"] == url.host
        assert attributes.get("server.port") == url.port
    else:
        assert "server.address" not in attributes
    for each in exporter.get_finished_spans():
        assert SECRET not in str(each.attributes)
    assert span.status.status_code == StatusCode.UNSET


async def test_a_leading_comment_does_not_name_the_operation(
    traced: tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider],
) -> None:
    engine, _, exporter, _ = traced
    async with engine.connect() as connection:
        assert (await connection.execute(text("/* a note\n over lines */ select 1"))).scalar() == 1
    (span,) = [s for s in statement_spans(exporter) if "a note" in str(s.attributes)]
    assert (span.attributes or {})["db.operation.name"] == "SELECT"
    assert span.name.startswith("SELECT ")


async def test_a_failing_statement_ends_its_span_with_the_drivers_message(
    traced: tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider],
) -> None:
    engine, _, exporter, _ = traced
    with pytest.raises(DBAPIError):
        async with engine.connect() as connection:
            await connection.execute(text("SELECT * FROM no_such_table"))
    (span,) = [s for s in statement_spans(exporter) if "no_such_table" in str(s.attributes)]
    assert span.status.status_code == StatusCode.ERROR
    assert "no_such_table" in (span.status.description or "")
    assert span.end_time is not None


async def test_the_same_statement_is_described_once_and_distinct_ones_are_bounded(
    traced: tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine, spans, exporter, _ = traced
    worked_out: list[str] = []
    pattern = sql_spans._LEADING_COMMENT

    class Counting:
        def sub(self, replacement: str, statement: str, count: int = 0) -> str:
            worked_out.append(statement)
            return pattern.sub(replacement, statement, count=count)

    monkeypatch.setattr(sql_spans, "_LEADING_COMMENT", Counting())
    async with engine.connect() as connection:
        for _ in range(3):
            await connection.execute(text("SELECT 1 AS once"))
    assert [s for s in worked_out if "once" in s] == ["SELECT 1 AS once"]
    named = [s for s in statement_spans(exporter) if "once" in str(s.attributes)]
    assert len(named) == 3

    monkeypatch.setattr(sql_spans, "KEEP", 5)
    async with engine.connect() as connection:
        for n in range(12):
            await connection.execute(text(f"SELECT {n} AS distinct_{n}"))
    assert len(spans.known) <= 5
    last = [s for s in statement_spans(exporter) if "distinct_11" in str(s.attributes)]
    assert len(last) == 1 and (last[0].attributes or {})["db.query.text"].startswith("SELECT 11")


async def test_nothing_is_traced_once_the_listeners_are_removed(
    traced: tuple[AsyncEngine, StatementSpans, InMemorySpanExporter, TracerProvider],
) -> None:
    engine, spans, exporter, _ = traced
    spans.remove()
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 2 AS untraced"))
    assert not [s for s in statement_spans(exporter) if "untraced" in str(s.attributes)]
    spans.remove()  # a second time changes nothing (the fixture's is a third)
