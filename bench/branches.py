"""What branches cost: the message builder and the chat route on a tree against a linear chat.

Two chats of the same user, in one fresh database, with the same kind of content (prose of
realistic length, stored provider responses on every assistant round, a tool call on every
fourth):

* **linear**: 1,000 messages, one branch;
* **branchy**: 2,000 messages with 50 forks: a main line of 1,000 messages, its active path, and
  50 side branches of 20 messages each that fork off it, alternately edits of a user message
  (a sibling user message) and regenerated answers (a sibling first round).

Measured, each chat right beside the other and the order flipped every repetition (ABBA), so
drift falls on both alike:

* **builder**: what a turn reads and builds before its first model request, in this process:
  `load_rows` (the path's messages and tool calls), `load_anchors`, `latest_summary`, then
  `build_history`; median time per chat, and the SQL statements each sends.
  Targets: branchy ≤ 1.2 x linear, the same statement count.
* **GET /api/chats/{id}**: over HTTP against a hearth server in its own process (the one
  `api_overhead.py` runs), signed in as the owner, one request at a time; median per chat. The
  statements are counted in this process on the route's own query function
  (`repository.chat_detail`). Target: branchy ≤ 1.3 x linear.

Both engines by default (`--db sqlite` or `--db postgresql` for one). Exit status 0 when every
target holds.

    .venv/bin/python bench/branches.py
    .venv/bin/python bench/branches.py --db sqlite --repeat 10 --json figures.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _chats import link_in_order
from _loadgen import request_once
from _turns import free_port, fresh_database
from api_overhead import _prose, register, start_server, stop_server, wait_ready
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.usage import RequestUsage
from sqlalchemy.ext.asyncio import AsyncEngine
from turn_overhead import statements

from app.agent.activations import load_anchors
from app.agent.history import build_history
from app.agent.rows import load_rows
from app.agent.summaries import latest_summary
from app.chats import repository
from app.core.db.engine import create_engine, session_factory
from app.core.db.migrate import upgrade
from app.core.http.json import json_response
from app.models import Chat, ChatLlmTool, Message

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
PATH_LENGTH = 1_000
FORKS = 50
FORK_LENGTH = 20
CHAT_MODEL = "bench/model"


def _message(
    rng: random.Random, chat_id: uuid.UUID, role: str, at: datetime
) -> tuple[Message, tuple[str, str, dict[str, Any]] | None]:
    """A message as a turn stores it; an assistant round may make a tool call."""
    if role == "user":
        content = _prose(rng, 80, 400)
        return Message(chat_id=chat_id, role="user", content=content, created_at=at, meta={}), None
    content = _prose(rng, 250, 900)
    parts: list[ModelResponsePart] = [TextPart(content=content)]
    tool = None
    if rng.random() < 0.25:
        tool = (f"call_{rng.getrandbits(96):024x}", "read_file", {"path": _prose(rng, 10, 40)})
        parts.append(ToolCallPart(tool_name=tool[1], args=tool[2], tool_call_id=tool[0]))
    usage = RequestUsage(input_tokens=rng.randint(500, 20_000), output_tokens=rng.randint(50, 800))
    response = ModelResponse(parts=parts, usage=usage, model_name=CHAT_MODEL, timestamp=at)
    stored = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    message = Message(
        chat_id=chat_id,
        role="assistant",
        content=content,
        status="ok",
        model=CHAT_MODEL,
        provider_details={"response": stored},
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        created_at=at,
        meta={},
    )
    return message, tool


async def _store(
    db: Any, rng: random.Random, chat: Chat, roles: list[str], parent: int | None, start: datetime
) -> list[Message]:
    """A chain of messages: the first under `parent`, each next under the one before."""
    made = [
        _message(rng, chat.id, role, start + timedelta(seconds=n)) for n, role in enumerate(roles)
    ]
    messages = [message for message, _ in made]
    db.add_all(messages)
    await db.flush()
    previous = parent
    for message in messages:
        message.parent_id = previous
        previous = message.id
    db.add_all(
        ChatLlmTool(
            chat_id=chat.id,
            message_id=message.id,
            tool_call_id=tool[0],
            name=tool[1],
            arguments=tool[2],
            status="done",
            result=_prose(rng, 150, 600),
            result_type="text",
            created_at=message.created_at,
            updated_at=message.created_at,
        )
        for message, tool in made
        if tool is not None
    )
    await db.flush()
    return messages


def _roles(first: str, count: int) -> list[str]:
    other = {"user": "assistant", "assistant": "user"}
    roles = [first]
    while len(roles) < count:
        # an answer is one round here, so roles alternate
        roles.append(other[roles[-1]])
    return roles


async def seed(engine: AsyncEngine, user_id: uuid.UUID, forks: int) -> uuid.UUID:
    """A chat whose active path is PATH_LENGTH messages, with `forks` side branches."""
    rng = random.Random(20261202)  # the same main line in both chats
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with session_factory(engine)() as db:
        chat = Chat(
            user_id=user_id, title="Bench", model=CHAT_MODEL, created_at=start, updated_at=start
        )
        db.add(chat)
        await db.flush()
        main = await _store(db, rng, chat, _roles("user", PATH_LENGTH), None, start)
        link_in_order(chat, main)
        for fork in range(forks):
            # Evenly along the main line; edits and regenerations in turn.
            at = (fork + 1) * (PATH_LENGTH - FORK_LENGTH) // (forks + 1)
            at -= at % 2
            if fork % 2:
                at += 1  # an assistant round: a regenerated answer
            sibling = main[at]
            roles = _roles(sibling.role, FORK_LENGTH)
            await _store(db, rng, chat, roles, sibling.parent_id, start + timedelta(days=1 + fork))
        await db.commit()
        return chat.id


async def build(engine: AsyncEngine, chat_id: uuid.UUID) -> int:
    """What a turn reads and builds before its first request; the number of messages built."""
    async with session_factory(engine)() as db:
        rows = await load_rows(db, chat_id)
        anchors = await load_anchors(db, chat_id)
        summary = await latest_summary(db, chat_id)
    history = build_history(rows, anchors, summary.covers_up_to_message_id if summary else 0)
    return len(history)


async def detail(engine: AsyncEngine, user_id: uuid.UUID, chat_id: uuid.UUID) -> int:
    async with engine.connect() as connection:
        view = await repository.chat_detail(connection, user_id, chat_id, datetime.now(UTC))
    assert view is not None
    return len(json_response(view).body)


async def timed(step: Any, chat_id: uuid.UUID) -> float:
    began = time.perf_counter()
    await step(chat_id)
    return time.perf_counter() - began


async def measure_db(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="hearth-bench-"))
    try:
        async with fresh_database(backend, args.pg_url, workdir, "branches") as url:
            engine = create_engine(url)
            try:
                await upgrade(engine)
            finally:
                await engine.dispose()
            port = free_port()
            server = start_server(url, workdir, port)
            try:
                await wait_ready(port, server)
                cookie, user_id = await register(port)
                engine = create_engine(url)
                try:
                    chats = {
                        "linear": await seed(engine, user_id, 0),
                        "branchy": await seed(engine, user_id, args.forks),
                    }
                    return await _measure(engine, port, cookie, user_id, chats, args)
                finally:
                    await engine.dispose()
            finally:
                stop_server(server)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _measure(
    engine: AsyncEngine,
    port: int,
    cookie: str,
    user_id: uuid.UUID,
    chats: dict[str, uuid.UUID],
    args: argparse.Namespace,
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    async with session_factory(engine)() as db:
        for name, chat_id in chats.items():
            assert len(await load_rows(db, chat_id)) == PATH_LENGTH, name
    counted: dict[str, dict[str, int]] = {"builder": {}, "get": {}}
    for name, chat_id in chats.items():
        with statements(engine) as seen:
            await build(engine, chat_id)
        counted["builder"][name] = len(seen)
        with statements(engine) as seen:
            await detail(engine, user_id, chat_id)
        counted["get"][name] = len(seen)

    headers = {"Cookie": f"hearth_session={cookie}"}

    async def get(chat_id: uuid.UUID) -> None:
        reply = await request_once(port, "GET", f"/api/chats/{chat_id}", headers)
        assert reply.status == 200, reply.status

    times: dict[str, dict[str, list[float]]] = {"builder": {}, "get": {}}
    for part, step in (
        ("builder", lambda chat_id: build(engine, chat_id)),
        ("get", get),
    ):
        for chat_id in chats.values():  # warm caches and pools once
            await step(chat_id)
        samples: dict[str, list[float]] = {name: [] for name in chats}
        for repetition in range(args.repeat):
            order = list(chats) if repetition % 2 == 0 else list(reversed(chats))
            for name in order:
                samples[name].append(await timed(step, chats[name]))
        times[part] = samples
    for part, target in (("builder", args.builder_target), ("get", args.get_target)):
        linear = statistics.median(times[part]["linear"])
        branchy = statistics.median(times[part]["branchy"])
        figures[part] = {
            "linear_ms": round(linear * 1000, 2),
            "branchy_ms": round(branchy * 1000, 2),
            "ratio": round(branchy / linear, 3),
            "target": target,
            "statements": counted[part],
        }
    return figures


def report(results: dict[str, dict[str, Any]]) -> bool:
    ok = True
    for backend, figures in results.items():
        print(
            f"\n{backend}: path of {PATH_LENGTH} messages; branchy chat {PATH_LENGTH * 2} messages"
        )
        for part, label in (("builder", "builder (load + build)"), ("get", "GET /api/chats/{id}")):
            row = figures[part]
            met = row["ratio"] <= row["target"]
            same = row["statements"]["linear"] == row["statements"]["branchy"]
            needs_same = part == "builder"
            verdict = "PASS" if met and (same or not needs_same) else "FAIL"
            ok &= verdict == "PASS"
            print(
                f"  {label:24} linear {row['linear_ms']:8.2f} ms  branchy {row['branchy_ms']:8.2f}"
                f" ms  ratio {row['ratio']:.3f} (≤ {row['target']})  statements"
                f" {row['statements']['linear']} / {row['statements']['branchy']}  {verdict}"
            )
    return ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--repeat", type=int, default=30, help="measurements per chat and part")
    parser.add_argument("--forks", type=int, default=FORKS)
    parser.add_argument("--builder-target", type=float, default=1.2)
    parser.add_argument("--get-target", type=float, default=1.3)
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    return parser.parse_args(argv)


async def main(args: argparse.Namespace) -> bool:
    backends = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    results = {backend: await measure_db(backend, args) for backend in backends}
    ok = report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return ok


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main(parse_args())) else 1)
