"""JSON columns read back exactly what was stored, on both backends.

The engine reads documents with orjson where it reads them as the standard library does, and
with `json` where it would not (`app.core.db.types.read_json`): numbers past 64 bits, `NaN`
and `Infinity`, escaped lone surrogates. A tool's arguments or a provider's response holding
any of them must come back unchanged."""

from __future__ import annotations

import json
import math
import random
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agent.rows import load_rows
from app.core.db.types import read_json
from app.models import ChatLlmTool
from app.services import Services
from tests.chat_rows import append
from tests.support import Client

EXACT = [
    {"id": 123456789012345678901234567890, "negative": -98765432109876543210},
    {"edge": [2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**18, 10**19]},
    {"inside a string": "1234567890123456789012 digits", "number": 12345678901234567},
    {"float": 0.1, "whole": 3.0, "tiny": 1.5e-7, "negative": -2.5},
    {"text": 'naïve café ☕ 漢字 \n \t "quoted" \\ slash', "nested": [[[{"a": None}]]]},
    [True, False, None, "", [], {}],
    "just a string",
    7,
]
"""Documents both backends store; each must read back equal to what was written."""

SQLITE_ONLY = [
    {"nan": math.nan, "inf": math.inf, "minus inf": -math.inf},
    {"small": 5e-324, "large": 1.7976931348623157e308, "zero": -0.0},
    {"surrogate": "\ud800 alone", "nul": "\u0000"},
]
"""What SQLite keeps as `json` wrote it and PostgreSQL's JSONB refuses (`NaN`, lone surrogates,
`\\u0000`) or keeps as a `numeric` (the largest float comes back as an integer, -0.0 as 0)."""


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself, and of the same types (an int is not its float)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def _random_document(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randrange(-(10**30), 10**30), rng.randrange(-1000, 1000)])
    if kind == 2:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randrange(-300, 300)])
    if kind in (3, 4):
        return "".join(rng.choice('ab1 7"\\é☕\n9') for _ in range(rng.randrange(30)))
    if kind == 5:
        return [_random_document(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {str(rng.randrange(100)): _random_document(rng, depth + 1) for _ in range(4)}


@pytest.mark.parametrize("document", EXACT + SQLITE_ONLY)
def test_read_json_reads_what_json_wrote(document: Any) -> None:
    text = json.dumps(document)
    assert _same(read_json(text), json.loads(text))
    assert _same(read_json(text.encode()), json.loads(text))


def test_read_json_agrees_with_json_on_random_documents() -> None:
    rng = random.Random(20261207)
    for _ in range(3000):
        document = _random_document(rng)
        for text in (json.dumps(document), json.dumps(document, ensure_ascii=False)):
            assert _same(read_json(text), json.loads(text)), text


def test_read_json_refuses_what_is_not_json() -> None:
    for text in ("", "{", "[1,]", "nul", "{'a': 1}"):
        with pytest.raises(ValueError):
            read_json(text)


async def test_a_tool_calls_arguments_come_back_exactly(
    services: Services, engine: AsyncEngine, user: Client
) -> None:
    documents = EXACT + (SQLITE_ONLY if engine.dialect.name == "sqlite" else [])
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    now = services.clock.now()
    async with services.sessions() as db:
        await append(db, chat_id, role="user", content="question", status="ok", created_at=now)
        answer = await append(
            db, chat_id, role="assistant", content="", status="ok", created_at=now
        )
        for number, document in enumerate(documents):
            db.add(
                ChatLlmTool(
                    chat_id=chat_id,
                    message_id=answer.id,
                    tool_call_id=f"call-{number}",
                    name="probe",
                    arguments=document,
                    status="ok",
                    result="done",
                    created_at=now,
                    updated_at=now,
                )
            )
        await db.commit()
    async with services.sessions() as db:
        stored = (
            await db.scalars(
                select(ChatLlmTool.arguments)
                .where(ChatLlmTool.message_id == answer.id)
                .order_by(ChatLlmTool.id)
            )
        ).all()
        rows = await load_rows(db, chat_id)
    assert len(stored) == len(documents)
    for document, read in zip(documents, stored, strict=True):
        assert _same(read, document), (document, read)
    calls = rows[-1].tool_calls
    assert [c.tool_call_id for c in calls] == [f"call-{n}" for n in range(len(documents))]
    for document, call in zip(documents, calls, strict=True):
        assert _same(call.arguments, document), (document, call.arguments)
