"""What a chat turn costs on top of the model provider it streams, against pydantic-ai alone.

The provider is the fake one (`tests/fakes`), in a process of its own, answering every request
on a fixed schedule: the first token after 200 ms, then 50 tokens 20 ms apart (1.2 s in all).
Since the provider's part is fixed, whatever a client sees beyond it is hearth's. The floor of
each figure is pydantic-ai alone in this process: the model class and client hearth uses
(`OpenAIChatModel` over `HearthAsyncOpenAI`), no HTTP server, no database, no browser encoding.

(a) Time to first text, sequentially. For each of `--sequential` turns (200), a direct
    streaming request to the fake (until the first chunk with content), a hearth turn
    (`POST /api/chats/{id}/messages`, until the first `text-delta` with text) and a pydantic-ai
    run alone (until its first text event), the same content for all three, in an order that
    rotates every turn so drift falls on all alike. Every turn goes to a chat created just
    before it (not timed): the same one message of history each time. Target: p50 of hearth's
    time minus pydantic-ai alone's <= 6 ms. `WARMUP_PAIRS` (5) turns are run first and not
    counted; their times are printed (the first is the first the server serves after start).

(b) Concurrent turns on one worker. For each of `--concurrency` (50, 100, 200): that many chats
    are created, a connection opened for each, and all turns sent at once, each with its own
    content. Every stream must end with `[DONE]` and a `finish` and carry no error; its
    `data-user-message` id must be the stored user message of its own chat, holding exactly
    the content that client sent; its `data-assistant-message` id must be that chat's stored
    answer, with status `ok` and the streamed text; and the chat must have exactly one
    `llm_requests` row, without error. The server's CPU (from /proc) per turn is set beside the
    CPU per run of the same number of pydantic-ai runs at once in this process. Target: at
    N = 100, server CPU per turn <= 1.4 x the library's per run, every turn complete and
    uncrossed. Wall times (slowest over the schedule) and direct requests are printed. Beside
    the library alone, the same runs served by pydantic-ai itself over HTTP
    (`_library_server.py`, one uvicorn worker, its own Vercel adapter): its CPU per run says
    how much of the 1.4 x the HTTP layer and the stream's encoding take before hearth adds a
    database, an account and a turn log.

(c) Realistic pacing on every core. `hearth serve --workers 2` (`--workers`) on PostgreSQL, a
    fake that answers the first token after 400 ms and then 200 tokens 25 ms apart (5.4 s);
    N turns at once for N in `--pacing` (100, 200, 400), checked as in (b). Reported: the
    slowest turn over the schedule, and the p99 of the gaps between consecutive text events at
    the client minus the provider's 25 ms. Targets at 200: slowest <= 1.15 x, p99 added gap
    <= 40 ms, nothing lost or crossed. Then, from the largest N that met both, N grows by 50
    until one does not (`--capacity-limit` at most): the last that did is the capacity.
    Beside each N, the floor: pydantic-ai serving the same runs by itself
    (`_library_server.py`: its own Vercel adapter on uvicorn with as many workers, the same
    client, the same fake), measured the same way, with its own capacity. Every N streams
    start within the time the server takes to accept them, on either side, so the floor
    says what this machine and the library allow the target to be.

(d) Per streamed token. Answers of 50 and of 500 tokens (2 ms apart), `--token-rounds` (3)
    bursts of `--token-turns` (20) turns at once on one worker, each beside the same burst of
    pydantic-ai runs alone; the medians' slope over the 450 extra tokens is the CPU per token
    of each. Target: hearth's minus the library's <= 15 us. The floor, in the same rounds: the
    same burst served by pydantic-ai itself over HTTP (`_library_server.py`: its Vercel adapter
    on uvicorn, the same client): what encoding each token for the wire and writing it to a
    socket costs the library before hearth adds anything.

(l) Building the request for long chats, in this process (hearth's own functions and app, no
    HTTP server): chats of `--sizes` (200, 1,000, 2,000) messages, user and assistant in turn,
    every 4th message an assistant message with a tool call whose `chat_llm_tools` row holds its
    result, contents of a few hundred characters, written through the ORM. Assistant rows are
    seeded two ways: with `provider_details.response` (pydantic-ai's serialised response, as the
    recorder stores every round) and without (rebuilt from columns, as for older rows). Timed:
    `load_rows` then `build_history` (median of `--repeats`). Counted: the SQL statements one
    `load_rows` runs, and those a whole turn runs (one real turn per chat through hearth's app,
    against a fake in its own process that answers at once; that turn's wall time is shown too,
    for what the rest of the request costs: pydantic-ai's mapping, the SDK, the wire). Target:
    the time for 2,000 messages <= 12 x that for 200, and the same number of statements for
    every size. Floor: the same statements as SQL text with the chat's id written in, on a
    pooled connection without the ORM or column types (`SQL ms`), and their own growth: on
    SQLite the database's share grows faster than the chat (deeper B-trees, and pages that no
    longer fit the caches).

(o) Observability: server CPU per turn with metrics and tracing
    on (`HEARTH_METRICS_TOKEN`, and `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP
    receiver in a process of its own, `tests/fakes/otlp.py`, which decodes every export; the
    server is scraped once a burst) against both off, the two servers side by side, each on its
    own database and fake; `--observe-rounds` (6) bursts of `--observe-turns` (50) turns at once
    to each, the order rotated every round. Target: the median of the rounds' ratios, on over
    off, <= 1.10. With `--baseline DIR` a third server runs from DIR (a tree from before
    observability existed) with both off: off over it should show no difference beyond the
    baseline's own spread between rounds (or 3 %). Two floors are printed: the OpenTelemetry
    SDK alone making and exporting as many spans as a turn's own (not those of setting its chat
    up, made before a burst's CPU is read, nor pydantic-ai's, which the second floor counts),
    and pydantic-ai's own instrumentation (which the issue asks for) on the same runs at once
    with and without it; together they are what tracing costs before hearth's own spans and
    metrics. Beside the verdict, a distribution-free 90 % interval for the median of the ratios:
    a target inside it is within the machine's noise.

`--parts` picks the parts (default a,b,c,d); `--json FILE` writes every figure, each part's
under its letter with the database it was measured on (`db`): `a.hearth_minus_library_ms_p50`,
`b.cpu_ratio_to_library_n100`, `c.slowest_over_schedule_n200`, `c.p99_added_gap_ms_n200`,
`c.capacity`, `d.extra_us_per_token`, `l.passed`, `o.on_over_off` and more. A shorter run
(`--sequential`, `--concurrency`, `--pacing`) gives the same keys, measured at the N it ran
(`n`).

hearth runs as `hearth serve` does: `python -m app.cli serve`, one uvicorn worker (two in (c);
uvloop and httptools when installed), schema upgraded at start, on a fresh database: a SQLite
file in a temporary folder (`--db sqlite`, the default) or a randomly named PostgreSQL database
created from `--pg-url` and dropped at the end (`--db postgresql`). The client is this process:
plain asyncio sockets (`_turns.Connection`) that stamp every event as its bytes arrive and parse
it only after the stream ended, so its own cost stays out of the times. On a 2-core machine the
three processes share the cores; part (b) says how much CPU each used, and the header gives the
machine's load average, since anything else running skews every figure. `--checkout DIR` runs
the server and the fake from another source tree, to set a change beside this one.

Exit status 0 when every target of the parts run is met, 1 otherwise.

    .venv/bin/python bench/turn_overhead.py --json figures.json
    .venv/bin/python bench/turn_overhead.py --db postgresql --parts b --concurrency 100
    .venv/bin/python bench/turn_overhead.py --parts o --baseline ../hearth-before
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import platform
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import orjson
from _chats import link_in_order
from _figures import add_json_option, write_figures
from _loadgen import LOOPBACK, build_request
from _turns import (
    DEFAULT_PG_URL,
    ROOT,
    Account,
    Connection,
    Exchange,
    cpu_seconds,
    free_port,
    fresh_database,
    median_interval,
    quantile,
    register,
    revision,
    start_process,
    stop_process,
    wait_answering,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
)
from pydantic_ai.models import create_async_httpx2_client
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage
from sqlalchemy import event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.history import build_history
from app.agent.rows import _CALLS, _MESSAGES_PROBED, load_rows
from app.agent.turn import INSTRUCTIONS
from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.llm.wire.openai_client import HearthAsyncOpenAI
from app.main import create_app
from app.models import Chat, ChatLlmTool, LlmRequest, Message
from app.settings import Settings

DEFAULT_SCHEDULE = "first_ms=200,tokens=50,interval_ms=20"
INSTANT_SCHEDULE = "first_ms=0,tokens=5,interval_ms=0"
PROVIDER_KEY_ENV = "HEARTH_BENCH_PROVIDER_KEY"
PROVIDER_KEY = "bench-key"
PROVIDER_MODEL = "gpt-4.1"
CHAT_MODEL = f"fake/{PROVIDER_MODEL}"
TTFT_EXTRA_TARGET_MS = 6.0
CPU_TO_LIBRARY_TARGET = 1.4
PACING_SCHEDULE = "first_ms=400,tokens=200,interval_ms=25"
PACING_TARGET_N = 200
PACING_STEP = 50
PACING_SLOWEST_TARGET = 1.15
PACING_GAP_TARGET_MS = 40.0
TOKEN_COUNTS = (50, 500)
TOKEN_EXTRA_TARGET_US = 15.0
TARGET_CONCURRENCY = 100
GROWTH_TARGET = 12.0
WARMUP_PAIRS = 5


@dataclass(frozen=True)
class Schedule:
    """The fake's answer to every request: `tokens` deltas of `token`, paced as given."""

    first_ms: float
    tokens: int
    interval_ms: float
    token: str = "tok "

    @classmethod
    def parse(cls, spec: str) -> Schedule:
        values = dict(part.split("=", 1) for part in spec.split(","))
        return cls(
            first_ms=float(values.get("first_ms", 0)),
            tokens=int(values.get("tokens", 1)),
            interval_ms=float(values.get("interval_ms", 0)),
            token=values.get("token", "tok "),
        )

    @property
    def nominal_seconds(self) -> float:
        """The schedule as stated: the first wait plus one interval per token."""
        return (self.first_ms + self.tokens * self.interval_ms) / 1000

    @property
    def text(self) -> str:
        return self.token * self.tokens


# --------------------------------------------------------------------------------------------
# What the streams said.
# --------------------------------------------------------------------------------------------


@dataclass
class TurnOutcome:
    """A hearth turn's stream, read after it ended."""

    exchange: Exchange
    first_text_ns: int | None = None
    done_ns: int | None = None
    text: str = ""
    user_message_id: int | None = None
    assistant_message_ids: list[int] = field(default_factory=list)
    finished: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def ttft(self) -> float | None:
        if self.first_text_ns is None:
            return None
        return (self.first_text_ns - self.exchange.sent_ns) / 1e9

    @property
    def wall(self) -> float | None:
        if self.done_ns is None:
            return None
        return (self.done_ns - self.exchange.sent_ns) / 1e9

    @property
    def ok(self) -> bool:
        return (
            self.exchange.status == 200
            and self.exchange.complete
            and self.done_ns is not None
            and self.finished
            and not self.errors
            and self.first_text_ns is not None
        )

    def problem(self) -> str:
        exchange = self.exchange
        if exchange.error:
            return exchange.error
        if exchange.status != 200:
            return f"HTTP {exchange.status}: {exchange.body[:200]!r}"
        if self.errors:
            return f"stream error: {self.errors[0]}"
        if self.done_ns is None:
            return "no [DONE]"
        if not self.finished:
            return "no finish event"
        return "no text"


def read_turn(exchange: Exchange) -> TurnOutcome:
    outcome = TurnOutcome(exchange)
    text: list[str] = []
    for arrived, payload in exchange.events:
        if payload == b"[DONE]":
            outcome.done_ns = arrived
            continue
        chunk = orjson.loads(payload)
        kind = chunk.get("type")
        if kind == "text-delta":
            delta = chunk.get("delta") or ""
            if delta and outcome.first_text_ns is None:
                outcome.first_text_ns = arrived
            text.append(delta)
        elif kind == "data-user-message":
            outcome.user_message_id = chunk["data"]["id"]
        elif kind == "data-assistant-message":
            outcome.assistant_message_ids.append(chunk["data"]["id"])
        elif kind == "finish":
            outcome.finished = True
        elif kind == "error":
            outcome.errors.append(str(chunk.get("errorText")))
        elif kind == "abort":
            outcome.errors.append(f"aborted: {chunk.get('reason')}")
    outcome.text = "".join(text)
    return outcome


@dataclass
class DirectOutcome:
    """A streaming completion straight from the fake, read after it ended."""

    exchange: Exchange
    first_text_ns: int | None = None
    done_ns: int | None = None
    text: str = ""

    @property
    def ttft(self) -> float | None:
        if self.first_text_ns is None:
            return None
        return (self.first_text_ns - self.exchange.sent_ns) / 1e9

    @property
    def wall(self) -> float | None:
        if self.done_ns is None:
            return None
        return (self.done_ns - self.exchange.sent_ns) / 1e9

    @property
    def ok(self) -> bool:
        exchange = self.exchange
        return exchange.status == 200 and exchange.complete and self.done_ns is not None


def read_completion(exchange: Exchange) -> DirectOutcome:
    outcome = DirectOutcome(exchange)
    text: list[str] = []
    for arrived, payload in exchange.events:
        if payload == b"[DONE]":
            outcome.done_ns = arrived
            continue
        for choice in orjson.loads(payload).get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if content:
                if outcome.first_text_ns is None:
                    outcome.first_text_ns = arrived
                text.append(content)
    outcome.text = "".join(text)
    return outcome


# --------------------------------------------------------------------------------------------
# Requests.
# --------------------------------------------------------------------------------------------


def direct_request(content: str) -> bytes:
    """The request pydantic-ai sends the provider for a chat holding just `content`."""
    body = {
        "model": PROVIDER_MODEL,
        "stream": True,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": content},
        ],
        "max_completion_tokens": 1024,
        "stream_options": {"include_usage": True},
        "tool_choice": "auto",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "list_files",
                    "description": "List the files and folders at `path` in the user's files "
                    '(relative; "." is the top).\n\nFolders end in "/"; files show their size '
                    "in bytes.",
                    "parameters": {
                        "additionalProperties": False,
                        "properties": {"path": {"default": ".", "type": "string"}},
                        "type": "object",
                    },
                },
            }
        ],
    }
    headers = {
        "Authorization": f"Bearer {PROVIDER_KEY}",
        "Accept": "application/json",
        "Content-Type": "application/json",
    }
    return build_request("POST", "/v1/chat/completions", headers, orjson.dumps(body))


def turn_request(account: Account, chat_id: str, content: str) -> bytes:
    headers = account.headers() | {"Content-Type": "application/json"}
    body = orjson.dumps({"content": content})
    return build_request("POST", f"/api/chats/{chat_id}/messages", headers, body)


async def create_chat(conn: Connection, account: Account) -> str:
    reply = await conn.call("POST", "/api/chats", account.headers(), {"model": CHAT_MODEL})
    if reply.status != 201:
        raise RuntimeError(f"creating a chat answered {reply.status}: {reply.body[:200]!r}")
    return str(reply.json()["id"])


def message_text(index: int, label: str) -> str:
    return f"{label} {index} ({secrets.token_hex(6)}): what does this turn cost?"


# --------------------------------------------------------------------------------------------
# The processes: the fake provider and hearth.
# --------------------------------------------------------------------------------------------


@dataclass
class Stack:
    fake: subprocess.Popen[bytes]
    fake_port: int
    server: subprocess.Popen[bytes]
    port: int
    database_url: str
    log_path: Path


def providers_yaml(fake_port: int) -> str:
    return f"""\
providers:
  - id: fake
    kind: openai
    base_url: http://{LOOPBACK}:{fake_port}/v1
    api_key_env: {PROVIDER_KEY_ENV}
    models:
      - id: {PROVIDER_MODEL}
        context_window: 1000000
        max_output_tokens: 1024
"""


async def start_fake(
    schedule: str, log: IO[bytes], tree: Path = ROOT
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [sys.executable, "-m", "tests.fakes.providers", "--kind", "openai"]
    command += ["--host", LOOPBACK, "--port", str(port), "--schedule", schedule]
    fake = start_process(command, log, cwd=tree)
    try:
        await wait_answering(port, "/v1/models", fake)
    except BaseException:
        stop_process(fake)
        raise
    return fake, port


@contextlib.asynccontextmanager
async def running_stack(
    database_url: str,
    workdir: Path,
    spec: str,
    tree: Path,
    extra_env: dict[str, str] | None = None,
    name: str = "processes",
    workers: int = 1,
) -> AsyncIterator[Stack]:
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        fake, fake_port = await start_fake(spec, log, tree)
        server = None
        try:
            providers = workdir / f"providers-{name}.yaml"
            providers.write_text(providers_yaml(fake_port))
            port = free_port()
            env = {
                "HEARTH_DATABASE_URL": database_url,
                "HEARTH_DATA_DIR": str(workdir / f"data-{name}"),
                "HEARTH_SECRET_KEY": secrets.token_urlsafe(32),
                "HEARTH_PROVIDERS_FILE": str(providers),
                "HEARTH_AUTO_MIGRATE": "1",
                PROVIDER_KEY_ENV: PROVIDER_KEY,
                **(extra_env or {}),
            }
            command = [sys.executable, "-m", "app.cli", "serve", "--host", LOOPBACK]
            command += ["--port", str(port), "--workers", str(workers)]
            server = start_process(command, log, env, cwd=tree)
            try:
                await wait_answering(port, "/healthz", server)
            except RuntimeError as exc:
                log.flush()
                tail = log_path.read_text(errors="replace").splitlines()[-15:]
                raise RuntimeError(f"{exc}; its log ends:\n" + "\n".join(tail)) from exc
            print(
                f"  hearth pid {server.pid} on port {port}, fake pid {fake.pid} on {fake_port}",
                file=sys.stderr,
                flush=True,
            )
            yield Stack(fake, fake_port, server, port, database_url, log_path)
        finally:
            if server is not None:
                stop_process(server)
            stop_process(fake)


def log_problems(log_path: Path) -> tuple[int, Counter[str]]:
    """How many errors the processes logged, and the exceptions their tracebacks ended in."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return 0, Counter()
    errors = sum(1 for line in lines if line.startswith("ERROR"))
    raised = Counter(
        line[:160]
        for line in lines
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Timeout)\w*: ", line)
    )
    return errors, raised


# --------------------------------------------------------------------------------------------
# (a) Time to first text, sequentially.
# --------------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


async def part_a(
    stack: Stack, account: Account, args: argparse.Namespace, figures: dict[str, Any]
) -> bool:
    hearth = await Connection.open(stack.port)
    fake = await Connection.open(stack.fake_port)
    agent, library_client = library_agent(stack)
    triplets: list[tuple[DirectOutcome, TurnOutcome, float | None]] = []
    failures: list[str] = []
    wait = 60.0

    async def one_triplet(
        index: int, label: str
    ) -> tuple[DirectOutcome, TurnOutcome, float | None]:
        """A direct request, a hearth turn and a pydantic-ai run alone with the same content,
        in an order that rotates with `index`, so drift falls on all three alike."""
        chat_id = await create_chat(hearth, account)
        content = message_text(index, label)
        direct: DirectOutcome | None = None
        turn: TurnOutcome | None = None
        library: float | None = None
        sides = ("direct", "hearth", "library")
        for side in sides[index % 3 :] + sides[: index % 3]:
            if side == "direct":
                direct = read_completion(await fake.exchange(direct_request(content), wait=wait))
                if not fake.usable:
                    await fake.reopen()
            elif side == "hearth":
                request = turn_request(account, chat_id, content)
                turn = read_turn(await hearth.exchange(request, wait=wait))
                if not hearth.usable:
                    await hearth.reopen()
            else:
                library, _ = await library_run(agent, content)
        assert direct is not None and turn is not None
        return direct, turn, library

    warm: list[tuple[DirectOutcome, TurnOutcome, float | None]] = []
    try:
        for index in range(WARMUP_PAIRS):
            warm.append(await one_triplet(index, "Warm-up turn"))
        started = time.monotonic()
        for index in range(args.sequential):
            if time.monotonic() - started > args.time_limit:
                print(f"  (a) stopped at the {args.time_limit:g} s limit", file=sys.stderr)
                break
            direct, turn, library = await one_triplet(index, "Sequential turn")
            if not turn.ok:
                failures.append(f"turn {index}: {turn.problem()}")
            if not direct.ok or direct.ttft is None:
                failures.append(f"direct {index}: {direct.exchange.error or 'incomplete'}")
            if library is None:
                failures.append(f"library {index}: no text")
            triplets.append((direct, turn, library))
            if (index + 1) % 50 == 0:
                print(f"  (a) {index + 1}/{args.sequential} turns", file=sys.stderr, flush=True)
    finally:
        hearth.close()
        fake.close()
        await library_client.close()

    print(
        "\n(a) the first turns after the server started (the warm-up, not counted below), "
        "time to first text in ms:\n"
        f"    hearth   {', '.join(ms(t.ttft) if t.ttft is not None else '-' for _, t, _ in warm)}\n"
        f"    library  {', '.join(ms(lib) if lib is not None else '-' for _, _, lib in warm)}\n"
        f"    direct   {', '.join(ms(d.ttft) if d.ttft is not None else '-' for d, _, _ in warm)}"
    )
    good = [
        (d.ttft, t.ttft, lib, d.wall, t.wall)
        for d, t, lib in triplets
        if d.ttft is not None and t.ttft is not None and lib is not None
    ]
    provider = [g[0] for g in good]
    ours = [g[1] for g in good]
    library = [g[2] for g in good]
    over_library = [g[1] - g[2] for g in good]
    ratios = [g[1] / g[0] for g in good]
    print()
    print(
        f"(a) time to first text, {len(triplets)} sequential turns, each in a new chat (one "
        f"message of history), each beside a direct request to the fake and a pydantic-ai run "
        f"alone (this process: the model class and client hearth uses, no HTTP server, no "
        f"database), the order rotated every turn"
    )
    print(f"{'':<38}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    rows: list[tuple[str, list[float], bool]] = [
        ("provider, direct (ms)", provider, True),
        ("pydantic-ai alone (ms)", library, True),
        ("hearth turn (ms)", ours, True),
        ("hearth - pydantic-ai alone (ms)", over_library, True),
        ("hearth - provider (ms)", [o - p for o, p in zip(ours, provider, strict=True)], True),
        (
            "pydantic-ai alone - provider (ms)",
            [lib - p for lib, p in zip(library, provider, strict=True)],
            True,
        ),
        ("ratio hearth/provider", ratios, False),
        ("whole turn to [DONE], hearth (ms)", [g[4] for g in good if g[4] is not None], True),
    ]
    for label, values, in_ms in rows:
        cells = [quantile(values, f) for f in (0.5, 0.9, 0.99, 1.0)]
        text = "".join(f"{ms(v) if in_ms else f'{v:.3f}':>9}" for v in cells)
        print(f"{label:<38}{text}")
    if len(over_library) >= 8:
        size = len(over_library) // 4
        quarters = [over_library[i * size : (i + 1) * size] for i in range(4)]
        drift = " / ".join(ms(quantile(q, 0.5)) for q in quarters)
        print(
            f"hearth - pydantic-ai alone, p50 per quarter of the run, first to last (ms): {drift}"
        )
    extra_ms = 1000 * quantile(over_library, 0.5) if over_library else float("nan")
    passed = bool(over_library) and extra_ms <= TTFT_EXTRA_TARGET_MS and not failures
    figures["a"] = {
        "db": args.db,
        "turns": len(good),
        "hearth_minus_library_ms_p50": round(extra_ms, 3),
        "hearth_minus_library_ms_p90": round(1000 * quantile(over_library, 0.9), 3)
        if over_library
        else None,
        "hearth_ttft_ms_p50": round(1000 * quantile(ours, 0.5), 3) if ours else None,
        "library_ttft_ms_p50": round(1000 * quantile(library, 0.5), 3) if library else None,
        "provider_ttft_ms_p50": round(1000 * quantile(provider, 0.5), 3) if provider else None,
        "ratio_to_provider_p50": round(quantile(ratios, 0.5), 4) if ratios else None,
        "failures": len(failures),
        "target_ms": TTFT_EXTRA_TARGET_MS,
        "passed": passed,
    }
    print(
        f"hearth - pydantic-ai alone, p50 {extra_ms:.2f} ms; target <= "
        f"{TTFT_EXTRA_TARGET_MS:g} ms: {'PASS' if passed else 'FAIL'}"
    )
    for line in failures[:10]:
        print(f"  failed: {line}")
    if len(failures) > 10:
        print(f"  ... and {len(failures) - 10} more failures")
    return passed


# --------------------------------------------------------------------------------------------
# (b) Concurrent turns.
# --------------------------------------------------------------------------------------------


async def open_connections(port: int, count: int) -> list[Connection]:
    connections: list[Connection] = []
    try:
        for start in range(0, count, 50):
            batch = min(50, count - start)
            connections += await asyncio.gather(*(Connection.open(port) for _ in range(batch)))
    except BaseException:
        for conn in connections:
            conn.close()
        raise
    return connections


async def send_all(port: int, requests: Sequence[bytes], wait: float) -> list[Exchange]:
    """Every request at once, each on a connection of its own, read to its end."""
    connections = await open_connections(port, len(requests))
    try:
        return await asyncio.gather(
            *(
                conn.exchange(req, wait=wait)
                for conn, req in zip(connections, requests, strict=True)
            )
        )
    finally:
        for conn in connections:
            conn.close()


async def direct_burst(stack: Stack, count: int, wait: float) -> list[DirectOutcome]:
    connections = await open_connections(stack.fake_port, count)
    try:
        requests = [direct_request(message_text(i, "Direct burst")) for i in range(count)]
        exchanges = await asyncio.gather(
            *(
                conn.exchange(req, wait=wait)
                for conn, req in zip(connections, requests, strict=True)
            )
        )
    finally:
        for conn in connections:
            conn.close()
    return [read_completion(exchange) for exchange in exchanges]


@dataclass(frozen=True)
class LibraryBurst:
    walls: list[float]
    cpu_seconds: float


def library_agent(stack: Stack) -> tuple[Agent[None, str], HearthAsyncOpenAI]:
    """pydantic-ai alone, as hearth's turns drive it: the same model class and client
    (`OpenAIChatModel` over `HearthAsyncOpenAI`) to the same fake, and nothing else: no HTTP
    server, no database, no encoding for a browser. What it costs is a floor under hearth's."""
    client = HearthAsyncOpenAI(
        base_url=f"http://{LOOPBACK}:{stack.fake_port}/v1",
        api_key=PROVIDER_KEY,
        max_retries=0,
        http_client=create_async_httpx2_client(),
    )
    model = OpenAIChatModel(PROVIDER_MODEL, provider=OpenAIProvider(openai_client=client))
    return Agent(model), client


async def library_run(agent: Agent[None, str], content: str) -> tuple[float | None, float]:
    """One run consumed to its end: (seconds to the first text event, seconds in all)."""
    started = time.perf_counter()
    first: float | None = None
    async with agent.run_stream_events(content) as events:
        async for event in events:
            if first is None and _carries_text(event):
                first = time.perf_counter() - started
    return first, time.perf_counter() - started


def _carries_text(event: object) -> bool:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return bool(event.part.content)
    return isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta)


async def library_burst(stack: Stack, count: int) -> LibraryBurst:
    """`count` pydantic-ai runs at once, in this process (see `library_agent`)."""
    agent, client = library_agent(stack)
    try:
        await library_run(agent, "warm-up")  # connections and imports warm
        cpu = time.process_time()
        runs = await asyncio.gather(
            *(library_run(agent, message_text(i, "Library run")) for i in range(count))
        )
        return LibraryBurst([wall for _, wall in runs], time.process_time() - cpu)
    finally:
        await client.close()


@dataclass
class BurstCheck:
    """Chat id -> the first problem found, per kind of problem."""

    lost: dict[str, str] = field(default_factory=dict)
    crossed: dict[str, str] = field(default_factory=dict)
    not_ok: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        found = [*self.lost.items(), *self.crossed.items(), *self.not_ok.items()]
        return [f"chat {chat_id}: {problem}" for chat_id, problem in found]


def _note(problems: dict[str, str], chat_id: str, problem: str) -> None:
    problems.setdefault(chat_id, problem)


async def check_burst(
    stack: Stack,
    control: Connection,
    account: Account,
    chats: Sequence[str],
    contents: Sequence[str],
    outcomes: Sequence[TurnOutcome],
    schedule: Schedule,
) -> BurstCheck:
    """Every stream whole, its own chat's, and every chat stored as the stream said.

    A turn that failed is `lost`; it counts as `crossed` only where something of another chat
    shows: a stream naming messages its chat does not hold, a chat holding a user message its
    client did not send, two streams naming the same message, or a whole stream whose text is
    not its chat's stored answer.
    """
    check = BurstCheck()
    named = Counter(o.user_message_id for o in outcomes if o.user_message_id is not None)
    for chat_id, content, outcome in zip(chats, contents, outcomes, strict=True):
        if not outcome.ok:
            _note(check.lost, chat_id, outcome.problem())
        reply = await control.call("GET", f"/api/chats/{chat_id}", account.headers())
        if reply.status != 200:
            _note(check.lost, chat_id, f"GET answered {reply.status}")
            continue
        messages = reply.json()["messages"]
        users = [m for m in messages if m["role"] == "user"]
        answers = [m for m in messages if m["role"] == "assistant"]
        user_ids = [m["id"] for m in users]
        answer_ids = [m["id"] for m in answers]
        if any(m["content"] != content for m in users) or len(users) > 1:
            _note(check.crossed, chat_id, f"holds user messages {users!r:.160}")
        if outcome.user_message_id is not None and outcome.user_message_id not in user_ids:
            _note(
                check.crossed,
                chat_id,
                f"stream named user message {outcome.user_message_id}, the chat holds {user_ids}",
            )
        if named[outcome.user_message_id] > 1:
            _note(check.crossed, chat_id, f"user message {outcome.user_message_id} named twice")
        foreign = [i for i in outcome.assistant_message_ids if i not in answer_ids]
        if foreign:
            _note(check.crossed, chat_id, f"stream named answers {foreign} of another chat")
        if not users:
            _note(check.lost, chat_id, "no user message stored")
        if not answers:
            _note(check.not_ok, chat_id, "no answer stored")
        for answer in answers:
            if answer["status"] != "ok":
                _note(check.not_ok, chat_id, f"answer {answer['id']} is {answer['status']}")
            elif outcome.ok and answer["content"] != outcome.text:
                _note(check.crossed, chat_id, f"answer {answer['id']} is not the streamed text")
            elif answer["content"] != schedule.text:
                _note(check.crossed, chat_id, f"answer {answer['id']} is not the provider's")
    engine = create_engine(stack.database_url)
    try:
        async with async_sessionmaker(engine)() as db:
            wanted = [uuid.UUID(c) for c in chats]
            rows = await db.execute(
                select(LlmRequest.chat_id, func.count(), func.count(LlmRequest.error))
                .where(LlmRequest.chat_id.in_(wanted))
                .group_by(LlmRequest.chat_id)
            )
            logged = {chat_id: (count, errors) for chat_id, count, errors in rows}
    finally:
        await engine.dispose()
    for chat_id in chats:
        count, errors = logged.get(uuid.UUID(chat_id), (0, 0))
        if count != 1 or errors:
            _note(check.lost, chat_id, f"{count} llm_requests rows, {errors} with errors")
    return check


async def part_b(
    stack: Stack,
    account: Account,
    args: argparse.Namespace,
    schedule: Schedule,
    figures: dict[str, Any],
    workdir: Path,
) -> bool:
    async with library_server(stack, workdir, 1) as served:
        return await _part_b(stack, account, args, schedule, figures, served)


async def _part_b(
    stack: Stack,
    account: Account,
    args: argparse.Namespace,
    schedule: Schedule,
    figures: dict[str, Any],
    served: tuple[int, subprocess.Popen[bytes]],
) -> bool:
    served_port, served_process = served
    await floor_burst(served_port, 3, schedule)  # warm-up
    control = await Connection.open(stack.port)
    passed = True
    lines: list[str] = []
    floors: list[str] = []
    target_n = (
        TARGET_CONCURRENCY if TARGET_CONCURRENCY in args.concurrency else max(args.concurrency)
    )
    by_n: dict[int, dict[str, Any]] = {}
    try:
        for index in range(3):  # warm the server up (imports, caches) when (a) has not
            chat_id = await create_chat(control, account)
            request = turn_request(account, chat_id, message_text(index, "Warm-up turn"))
            await control.exchange(request, wait=60)
            if not control.usable:
                await control.reopen()
        for count in args.concurrency:
            wait = 60.0 + count * 0.5
            direct = await direct_burst(stack, count, wait)
            direct_walls = [d.wall for d in direct if d.wall is not None]
            chats = [await create_chat(control, account) for _ in range(count)]
            contents = [
                message_text(i, f"Concurrent turn of {count}, number") for i in range(count)
            ]
            requests = [turn_request(account, c, t) for c, t in zip(chats, contents, strict=True)]
            connections = await open_connections(stack.port, count)
            server_cpu = cpu_seconds(stack.server.pid)
            fake_cpu = cpu_seconds(stack.fake.pid)
            client_cpu = time.process_time()
            started = time.perf_counter()
            try:
                exchanges = await asyncio.gather(
                    *(
                        conn.exchange(req, wait=wait)
                        for conn, req in zip(connections, requests, strict=True)
                    )
                )
            finally:
                for conn in connections:
                    conn.close()
            elapsed = time.perf_counter() - started
            client_used = time.process_time() - client_cpu
            server_used = _used(cpu_seconds(stack.server.pid), server_cpu)
            fake_used = _used(cpu_seconds(stack.fake.pid), fake_cpu)
            outcomes = [read_turn(exchange) for exchange in exchanges]
            await asyncio.sleep(0.5)  # the turns' last writes (lease release) follow [DONE]
            check = await check_burst(stack, control, account, chats, contents, outcomes, schedule)
            walls = [o.wall for o in outcomes if o.wall is not None]
            ttfts = [o.ttft for o in outcomes if o.ttft is not None]
            slowest = max(walls) if walls else float("nan")
            ratio = slowest / schedule.nominal_seconds
            complete = len(walls) == count and not (check.lost or check.crossed or check.not_ok)
            passed &= complete
            print(f"  (b) {count} concurrent turns in {elapsed:.2f} s", file=sys.stderr)
            await asyncio.sleep(1.0)
            library = await library_burst(stack, count)
            await asyncio.sleep(1.0)
            served_burst, served_used = await floor_burst(
                served_port, count, schedule, served_process.pid
            )
            passed &= not served_burst.problems
            cpu_ratio = (
                server_used / library.cpu_seconds
                if server_used is not None and library.cpu_seconds > 0
                else float("nan")
            )
            verdict = "-"
            if count == target_n:
                ok = complete and cpu_ratio <= CPU_TO_LIBRARY_TARGET
                verdict = "PASS" if ok else "FAIL"
                passed &= ok
            by_n[count] = {
                "server_cpu_ms_per_turn": _ms_per(server_used, count),
                "library_cpu_ms_per_run": _ms_per(library.cpu_seconds, count),
                "library_served_cpu_ms_per_run": _ms_per(served_used, count),
                "cpu_ratio_to_library": round(cpu_ratio, 4),
                "slowest_over_schedule": round(ratio, 4),
                "complete": complete,
            }
            lines.append(
                f"{count:>5}{len(walls):>7}{len(check.lost):>6}{len(check.crossed):>8}"
                f"{len(check.not_ok):>8}{ms(quantile(ttfts, 0.5)):>9}{ms(max(ttfts or [0])):>9}"
                f"{ms(quantile(walls, 0.5)):>9}{ms(slowest):>9}{ratio:>8.3f}"
                f"   {ms(max(direct_walls or [0])):>9}"
                f"{_per_turn(server_used, count):>10}{_per_turn(fake_used, count):>9}"
                f"{1000 * client_used / count:>9.2f}{cpu_ratio:>8.3f}{verdict:>6}"
            )
            lines.extend(f"      {problem}" for problem in check.problems()[:5])
            floors.append(
                f"{count:>5}{ms(quantile(library.walls, 0.5)):>9}{ms(max(library.walls)):>9}"
                f"{max(library.walls) / schedule.nominal_seconds:>8.3f}"
                f"{1000 * library.cpu_seconds / count:>10.2f}"
                f"   {_per_turn(served_used, count):>10}"
                f"{served_burst.slowest_over_schedule:>8.3f}"
                f"{served_used / library.cpu_seconds if served_used else float('nan'):>8.3f}"
            )
            floors.extend(f"      {problem}" for problem in served_burst.problems[:3])
            await asyncio.sleep(1.0)
    finally:
        control.close()

    print()
    print(
        f"(b) concurrent turns, each in its own chat, all sent at once to one worker; schedule "
        f"{schedule.nominal_seconds:.2f} s ({schedule.first_ms:g} ms + {schedule.tokens} x "
        f"{schedule.interval_ms:g} ms); wall = request sent -> [DONE]"
    )
    print(
        f"{'N':>5}{'[DONE]':>7}{'lost':>6}{'crossed':>8}{'not ok':>8}{'TTFT50':>9}{'TTFTmax':>9}"
        f"{'wall50':>9}{'slowest':>9}{'/sched':>8}   {'fake-only':>9}"
        f"{'srv CPU':>10}{'fake CPU':>9}{'cli CPU':>9}{'/lib':>8}"
    )
    print(
        f"{'':>5}{'':>7}{'':>6}{'':>8}{'':>8}{'ms':>9}{'ms':>9}{'ms':>9}{'ms':>9}{'':>8}"
        f"   {'slowest ms':>9}{'ms/turn':>10}{'ms/turn':>9}{'ms/turn':>9}{'CPU':>8}"
    )
    for line in lines:
        print(line)
    print(
        "pydantic-ai alone, the same N runs at once in one process (the bench's own) over the "
        "same fake: no HTTP server, no database; then pydantic-ai serving them by itself over "
        "HTTP (`_library_server.py`: its Vercel adapter on one uvicorn worker, the same client), "
        "its CPU per run and that over the library alone's"
    )
    print(
        f"{'N':>5}{'wall50':>9}{'slowest':>9}{'/sched':>8}{'CPU':>10}   {'served CPU':>10}"
        f"{'/sched':>8}{'/lib':>8}"
    )
    print(f"{'':>5}{'ms':>9}{'ms':>9}{'':>8}{'ms/run':>10}   {'ms/run':>10}{'':>8}{'CPU':>8}")
    for line in floors:
        print(line)
    target = by_n.get(target_n, {})
    figures["b"] = {
        "db": args.db,
        "n": target_n,
        "cpu_ratio_to_library_n100": target.get("cpu_ratio_to_library"),
        "server_cpu_ms_per_turn_n100": target.get("server_cpu_ms_per_turn"),
        "library_cpu_ms_per_run_n100": target.get("library_cpu_ms_per_run"),
        "library_served_cpu_ms_per_run_n100": target.get("library_served_cpu_ms_per_run"),
        "by_n": {str(n): values for n, values in by_n.items()},
        "target": CPU_TO_LIBRARY_TARGET,
        "passed": passed,
    }
    print(
        f"target: every turn complete and uncrossed at every N; at N={target_n} the server's "
        f"CPU per turn <= {CPU_TO_LIBRARY_TARGET:g} x pydantic-ai alone's per run (/lib CPU): "
        f"{'PASS' if passed else 'FAIL'}"
    )
    return passed


def _ms_per(seconds: float | None, count: int) -> float | None:
    return None if seconds is None else round(1000 * seconds / count, 3)


def _used(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _per_turn(used: float | None, count: int) -> str:
    return "-" if used is None else f"{1000 * used / count:.2f}"


# --------------------------------------------------------------------------------------------
# (o) Observability: metrics and traces on against both off.
# --------------------------------------------------------------------------------------------
OBSERVED_TARGET = 1.10
METRICS_TOKEN = "bench-metrics-token"
SET_UP_TRACES = frozenset({"POST /api/chats", "POST /api/auth/register"})
"""The traces (by their root span) of what part (o) does before it reads a burst's CPU."""


@dataclass
class Observed:
    """One server of part (o) and the CPU its bursts used."""

    label: str
    stack: Stack
    account: Account
    cpu: list[float] = field(default_factory=list)
    """Server CPU seconds per turn, one figure per burst."""
    scrape: bool = False


async def _burst_cpu(observed: Observed, count: int, round_index: int) -> str | None:
    """`count` turns at once; the server CPU per turn, or what went wrong."""
    stack, account = observed.stack, observed.account
    control = await Connection.open(stack.port)
    try:
        chats = [await create_chat(control, account) for _ in range(count)]
        if observed.scrape:  # a Prometheus scraping meanwhile, once a burst
            reply = await control.call(
                "GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
            )
            if reply.status != 200 or b"hearth_turns_started_total" not in reply.body:
                return f"/metrics answered {reply.status}"
    finally:
        control.close()
    requests = [
        turn_request(account, chat, message_text(i, f"Observed round {round_index} turn"))
        for i, chat in enumerate(chats)
    ]
    connections = await open_connections(stack.port, count)
    before = cpu_seconds(stack.server.pid)
    try:
        exchanges = await asyncio.gather(
            *(c.exchange(r, wait=60 + count) for c, r in zip(connections, requests, strict=True))
        )
    finally:
        for conn in connections:
            conn.close()
    await asyncio.sleep(0.5)  # the turns' last writes follow [DONE]
    used = _used(cpu_seconds(stack.server.pid), before)
    bad = [o.problem() for o in map(read_turn, exchanges) if not o.ok]
    if bad:
        return f"{len(bad)} of {count} turns failed: {bad[0]}"
    if used is None:
        return "the server's CPU time could not be read"
    observed.cpu.append(used / count)
    return None


def sdk_floor(endpoint: str, spans_per_turn: int, turns: int) -> float:
    """CPU seconds per turn (every thread of this process: the exporter's too) that the
    OpenTelemetry SDK alone spends making `spans_per_turn` spans like a turn's, in a tree, and
    exporting them over OTLP/HTTP through a batch processor, as hearth's tracing does."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    # A queue for every span of the run: none is dropped, so each is paid for in full.
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=turns * spans_per_turn))
    tracer = provider.get_tracer("floor")
    statement = "SELECT messages.id, messages.chat_id, messages.role FROM messages WHERE " * 3
    attributes = {
        "db.system.name": "postgresql",
        "db.namespace": "hearth",
        "db.query.text": statement,
        "db.operation.name": "SELECT",
        "server.address": LOOPBACK,
        "server.port": 5432,
    }
    started = time.process_time()
    for _ in range(turns):
        with (
            tracer.start_as_current_span("POST /api/chats/{chat_id}/messages"),
            tracer.start_as_current_span("turn"),
        ):
            for _ in range(spans_per_turn - 2):
                with tracer.start_as_current_span("SELECT hearth", attributes=attributes):
                    pass
    provider.force_flush()
    used = time.process_time() - started
    provider.shutdown()
    return used / turns


async def library_tracing_floor(
    stack: Stack, endpoint: str, count: int, rounds: int
) -> tuple[float, float]:
    """pydantic-ai's own instrumentation, as hearth configures it (`app.observability.traces`:
    no content, no request parameters), exporting to the same receiver: CPU seconds per run
    (every thread of this process) of `count` runs at once with it and without it, medians of
    `rounds` bursts of each in turn. What it adds is the library's, which the issue asks for."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from pydantic_ai.models.instrumented import InstrumentationSettings

    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    plain, client = library_agent(stack)
    traced = Agent(plain.model)
    traced.instrument = InstrumentationSettings(
        tracer_provider=provider,
        include_content=False,
        include_binary_content=False,
        include_model_request_parameters=False,
    )
    used: dict[bool, list[float]] = {False: [], True: []}
    try:
        for agent in (plain, traced):
            await library_run(agent, "warm-up")
        for round_index in range(rounds):
            for on in (False, True) if round_index % 2 == 0 else (True, False):
                agent = traced if on else plain
                started = time.process_time()
                await asyncio.gather(
                    *(library_run(agent, message_text(i, "Traced run")) for i in range(count))
                )
                if on:
                    provider.force_flush()
                used[on].append((time.process_time() - started) / count)
                await asyncio.sleep(0.3)
    finally:
        await client.close()
        provider.shutdown()
    return statistics.median(used[False]), statistics.median(used[True])


async def part_o(args: argparse.Namespace, workdir: Path, figures: dict[str, Any]) -> bool:
    """Server CPU per turn: metrics and tracing on (exporting to a receiver in its own process)
    against both off, and both off against `--baseline`, a tree from before they existed. The
    servers run side by side on their own databases and fakes; bursts go to each in turn, the
    order rotated every round, so drift falls on all alike."""
    receiver_port = free_port()
    with (workdir / "receiver.log").open("wb") as log:
        receiver = start_process(
            [sys.executable, "-m", "tests.fakes.otlp", "--port", str(receiver_port)], log
        )
    try:
        await wait_answering(receiver_port, "/count", receiver)
        on_env = {
            "HEARTH_METRICS_TOKEN": METRICS_TOKEN,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{LOOPBACK}:{receiver_port}",
            "PROMETHEUS_MULTIPROC_DIR": str(workdir / "metrics"),
        }
        trees = [("off", ROOT, {}), ("on", ROOT, on_env)]
        if args.baseline is not None:
            trees.insert(0, ("before", args.baseline, {}))
        async with contextlib.AsyncExitStack() as stacks:
            servers: list[Observed] = []
            for label, tree, env in trees:
                url = await stacks.enter_async_context(
                    fresh_database(args.db, args.pg_url, workdir, f"obs_{label}")
                )
                stack = await stacks.enter_async_context(
                    running_stack(url, workdir, args.schedule, tree, env, name=label)
                )
                control = await Connection.open(stack.port)
                try:
                    account = await register(control)
                    for index in range(3):  # warm-up: imports, caches, the first exports
                        chat = await create_chat(control, account)
                        text = message_text(index, "Warm-up turn")
                        await control.exchange(turn_request(account, chat, text), wait=60)
                        if not control.usable:
                            await control.reopen()
                finally:
                    control.close()
                servers.append(Observed(label, stack, account, scrape=label == "on"))
            for round_index in range(args.observe_rounds):
                shift = round_index % len(servers)
                for observed in servers[shift:] + servers[:shift]:
                    problem = await _burst_cpu(observed, args.observe_turns, round_index)
                    if problem is not None:
                        print(f"(o) {observed.label}: {problem}")
                        return False
                    await asyncio.sleep(0.5)
                print(f"  (o) round {round_index + 1} of {args.observe_rounds}", file=sys.stderr)
            async with httpx.AsyncClient(base_url=f"http://{LOOPBACK}:{receiver_port}") as http:
                # hearth's spans only: the floors below export to the same receiver
                tally = (await http.get("/count")).json()
            untraced, traced = await library_tracing_floor(
                servers[0].stack,
                f"http://{LOOPBACK}:{receiver_port}",
                args.observe_turns,
                args.observe_rounds,
            )
        turns_on = len(servers[-1].cpu) * args.observe_turns + 3
        spans = tally["spans"]
        # A floor is what cannot be avoided: the SDK's part counts neither the spans of setting
        # the chats up (made before each burst's CPU is read) nor pydantic-ai's own (the
        # library's floor below counts those).
        set_up = sum(n for root, n in tally["by_root"].items() if root in SET_UP_TRACES)
        library_spans = sum(
            n for scope, n in tally["by_scope"].items() if scope.startswith("pydantic-ai")
        )
        floor_spans = max(round((spans - set_up - library_spans) / turns_on), 2)
        floor = await asyncio.to_thread(
            sdk_floor, f"http://{LOOPBACK}:{receiver_port}", floor_spans, 200
        )
    finally:
        stop_process(receiver)

    by_label = {o.label: o for o in servers}
    print()
    print(
        f"(o) server CPU per turn, {args.observe_rounds} rounds of {args.observe_turns} turns at "
        f"once per server; 'on' has HEARTH_METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set "
        f"(a receiver in its own process) and is scraped once a burst"
    )
    print(f"{'server':>8}{'median':>10}{'min':>10}{'max':>10}")
    print(f"{'':>8}{'ms/turn':>10}{'ms/turn':>10}{'ms/turn':>10}")
    for observed in servers:
        cpu = observed.cpu
        print(
            f"{observed.label:>8}{1000 * statistics.median(cpu):>10.2f}"
            f"{1000 * min(cpu):>10.2f}{1000 * max(cpu):>10.2f}"
        )
    print(
        f"spans the receiver decoded: {spans} ({spans / turns_on:.1f} a turn: "
        f"{set_up / turns_on:.1f} setting a chat up before the CPU is read, "
        f"{library_spans / turns_on:.1f} of pydantic-ai's)"
    )
    ratios = [on / off for on, off in zip(by_label["on"].cpu, by_label["off"].cpu, strict=True)]
    ratio = statistics.median(ratios)
    off_cpu = statistics.median(by_label["off"].cpu)
    print(
        f"floor: the OpenTelemetry SDK alone, making and exporting {floor_spans} "
        f"spans like a turn's own (SQL statements with their text) to the same receiver, in this "
        f"process: {1000 * floor:.2f} ms a turn, {floor / off_cpu:.3f} x the CPU of a turn "
        f"with both off, so on / off >= {1 + floor / off_cpu:.3f} from the SDK alone"
    )
    library_extra = max(traced - untraced, 0.0)
    print(
        f"floor: pydantic-ai's own instrumentation (as hearth sets it, exporting to the same "
        f"receiver), {args.observe_turns} runs at once, median of {args.observe_rounds} bursts: "
        f"{1000 * untraced:.2f} ms a run without it, {1000 * traced:.2f} ms with it, "
        f"+{1000 * library_extra:.2f} ms; with the SDK's spans above, on / off >= "
        f"{1 + (floor + library_extra) / off_cpu:.3f} before hearth's own tracing and metrics"
    )
    passed = ratio <= OBSERVED_TARGET and spans > 0
    low, high = median_interval(ratios)
    print(
        f"on / off, median of the rounds' ratios: {ratio:.3f} "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}); target <= {OBSERVED_TARGET:.2f}: "
        f"{'PASS' if passed else 'FAIL'}"
    )
    print(
        f"  the rounds place the median of on / off between {low:.3f} and {high:.3f} (90 %, "
        f"distribution-free); a target inside that interval is within this machine's noise"
    )
    figures["o"] = {
        "db": args.db,
        "on_over_off": round(ratio, 4),
        "on_over_off_interval_90": [round(low, 4), round(high, 4)],
        "rounds": [round(r, 4) for r in ratios],
        "off_cpu_ms_per_turn": round(1000 * off_cpu, 3),
        "on_cpu_ms_per_turn": round(1000 * statistics.median(by_label["on"].cpu), 3),
        "spans_per_turn": round(spans / turns_on, 2),
        "spans_in_the_sdk_floor": floor_spans,
        "floor_sdk_alone": round(1 + floor / off_cpu, 4),
        "floor_with_library_instrumentation": round(1 + (floor + library_extra) / off_cpu, 4),
        "target": OBSERVED_TARGET,
        "passed": passed,
    }
    if "before" in by_label:
        before = by_label["before"].cpu
        drift = [off / b for off, b in zip(by_label["off"].cpu, before, strict=True)]
        spread = statistics.pstdev(before) / statistics.mean(before)
        same = abs(statistics.median(drift) - 1) <= max(0.03, 2 * spread)
        figures["o"]["off_over_before"] = round(statistics.median(drift), 4)
        figures["o"]["same_as_before"] = same
        print(
            f"off / before ({revision(args.baseline)}), median of the rounds' ratios: "
            f"{statistics.median(drift):.3f} (rounds {', '.join(f'{r:.2f}' for r in drift)}); "
            f"the baseline's own spread between rounds: {100 * spread:.1f} %; no measurable "
            f"difference (within 3 % or twice that spread): {'PASS' if same else 'FAIL'}"
        )
        passed &= same
    return passed


# --------------------------------------------------------------------------------------------
# (c) Building the request for long chats.
# --------------------------------------------------------------------------------------------

_WORD_TEXT = (
    "the a of to and in is it that for on with as this be are you can not or by from at an"
    " we if will use function model request server database query session token cookie chat"
    " message response latency throughput cache index migration schema column row table"
    " python async await event loop worker process thread memory disk network retry timeout"
    " error value result argument config provider stream upload file image document search"
    " naïve café déjà-vu résumé über 東京 🙂"
)
_WORDS = tuple(_WORD_TEXT.split())
_TOOLS = ("list_files", "web_search", "read_file")


def prose(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + "."


async def seed_chat(
    sessions: async_sessionmaker[AsyncSession],
    user_id: uuid.UUID,
    count: int,
    *,
    stored_responses: bool,
) -> uuid.UUID:
    """A chat of `count` messages, user and assistant in turn; every 4th one calls a tool."""
    rng = random.Random(count * 2 + stored_responses)
    start = datetime.now(UTC) - timedelta(minutes=count + 5)
    async with sessions() as db:
        chat = Chat(
            user_id=user_id,
            title=f"Benchmark chat of {count} messages",
            model=CHAT_MODEL,
            created_at=start,
            updated_at=start + timedelta(minutes=count),
        )
        db.add(chat)
        await db.flush()
        messages: list[Message] = []
        calls: list[tuple[Message, str, str, dict[str, Any]]] = []
        for index in range(count):
            at = start + timedelta(minutes=index, seconds=rng.random())
            if index % 2 == 0:
                messages.append(
                    Message(
                        chat_id=chat.id,
                        role="user",
                        content=prose(rng, 80, 400),
                        status="ok",
                        created_at=at,
                        meta={},
                    )
                )
                continue
            content = prose(rng, 250, 900)
            parts: list[ModelResponsePart] = [TextPart(content=content)]
            tool: tuple[str, str, dict[str, Any]] | None = None
            if index % 4 == 3:
                tool = (
                    f"call_{rng.getrandbits(96):024x}",
                    rng.choice(_TOOLS),
                    {"path": prose(rng, 10, 40), "limit": 50},
                )
                parts.append(ToolCallPart(tool_name=tool[1], args=tool[2], tool_call_id=tool[0]))
            usage = RequestUsage(
                input_tokens=rng.randint(500, 20_000), output_tokens=rng.randint(50, 800)
            )
            details = None
            if stored_responses:
                response = ModelResponse(
                    parts=parts,
                    usage=usage,
                    model_name=PROVIDER_MODEL,
                    timestamp=at,
                    provider_name="openai",
                    provider_response_id=f"chatcmpl-{rng.getrandbits(96):024x}",
                    finish_reason="tool_call" if tool else "stop",
                )
                stored = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
                details = {"response": stored}
            message = Message(
                chat_id=chat.id,
                role="assistant",
                content=content,
                status="ok",
                model=CHAT_MODEL,
                provider_details=details,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=0,
                cache_write_tokens=0,
                created_at=at,
                meta={},
            )
            messages.append(message)
            if tool is not None:
                calls.append((message, *tool))
        db.add_all(messages)
        await db.flush()
        link_in_order(chat, messages)
        db.add_all(
            ChatLlmTool(
                chat_id=chat.id,
                message_id=message.id,
                tool_call_id=call_id,
                name=name,
                arguments=arguments,
                status="done",
                result=prose(rng, 150, 600),
                result_type="text",
                created_at=message.created_at,
                updated_at=message.created_at,
            )
            for message, call_id, name, arguments in calls
        )
        await db.commit()
        return chat.id


@contextlib.contextmanager
def statements(engine: Any) -> Any:
    """Collects every SQL statement the engine sends while the block runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        seen.append(sql)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


def statement_kind(sql: str) -> str:
    """`SELECT messages`, `UPDATE chats`, ...: the verb and the first table named."""
    words = sql.replace('"', "").split()
    if not words:
        return "?"
    verb = words[0].upper()
    upper = [word.upper() for word in words]
    try:
        if verb == "UPDATE":
            table = words[1]
        elif verb in ("SELECT", "DELETE", "INSERT"):
            table = words[upper.index("INTO" if verb == "INSERT" else "FROM") + 1]
        else:
            return verb
    except (IndexError, ValueError):
        return verb
    return f"{verb} {table.split('.')[-1].strip('(),')}"


@dataclass
class SizeResult:
    size: int
    variant: str
    load: float
    build: float
    load_queries: int
    repeats: int
    history_messages: int
    sql: float = math.nan
    """The same statements as plain SQL text on a pooled connection (the floor)."""


async def time_statements(engine: Any, chat_id: uuid.UUID, repeats: int) -> float:
    """What the database and its driver alone take for `load_rows`'s statements: each as SQL
    text with the chat's id written in, run with `exec_driver_sql` (no ORM, no column types),
    median of `repeats`."""
    texts = [
        str(
            statement.params(chat_id=chat_id).compile(
                dialect=engine.dialect, compile_kwargs={"literal_binds": True}
            )
        )
        for statement in (_MESSAGES_PROBED, _CALLS)
    ]
    times: list[float] = []
    async with engine.connect() as connection:
        for _ in range(repeats + 1):
            started = time.perf_counter()
            for text in texts:
                (await connection.exec_driver_sql(text)).all()
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


async def time_build(
    sessions: async_sessionmaker[AsyncSession],
    engine: Any,
    chat_id: uuid.UUID,
    size: int,
    variant: str,
    repeats: int,
    budget: float,
) -> SizeResult:
    async def once() -> tuple[float, float, int]:
        started = time.perf_counter()
        async with sessions() as db:
            rows = await load_rows(db, chat_id)
        loaded = time.perf_counter()
        history = build_history(rows)
        built = time.perf_counter()
        return loaded - started, built - loaded, len(history)

    with statements(engine) as seen:
        await once()  # warm: pool connection, compiled statement cache
    load_queries = len(seen)
    loads: list[float] = []
    builds: list[float] = []
    messages = 0
    deadline = time.monotonic() + budget
    while len(loads) < repeats and (len(loads) < 3 or time.monotonic() < deadline):
        load, build, messages = await once()
        loads.append(load)
        builds.append(build)
    return SizeResult(
        size,
        variant,
        statistics.median(loads),
        statistics.median(builds),
        load_queries,
        len(loads),
        messages,
        await time_statements(engine, chat_id, len(loads)),
    )


async def turn_statements(
    client: httpx.AsyncClient, engine: Any, chat_id: uuid.UUID, csrf: str
) -> tuple[Counter[str], float]:
    """The statements a whole turn in `chat_id` runs, and its wall time in this process."""
    with statements(engine) as seen:
        started = time.perf_counter()
        response = await client.post(
            f"/api/chats/{chat_id}/messages",
            json={"content": "One more question about the query plan."},
            headers={"X-CSRF-Token": csrf},
        )
        elapsed = time.perf_counter() - started
        if response.status_code != 200 or "data: [DONE]" not in response.text:
            raise RuntimeError(f"the turn answered {response.status_code}: {response.text[:300]}")
        name = f"hearth-turn-{chat_id}"
        running = [t for t in asyncio.all_tasks() if t.get_name() == name]
        if running:  # the lease release follows the end of the stream
            await asyncio.wait_for(asyncio.gather(*running), 30)
    return Counter(statement_kind(sql) for sql in seen), elapsed


async def part_l(args: argparse.Namespace, workdir: Path, figures: dict[str, Any]) -> bool:
    log_path = workdir / "part-c.log"
    results: list[SizeResult] = []
    turn_counts: dict[int, Counter[str]] = {}
    turn_times: dict[int, float] = {}
    with log_path.open("wb") as log:
        fake, fake_port = await start_fake(INSTANT_SCHEDULE, log)
        try:
            async with fresh_database(args.db, args.pg_url, workdir, "build") as url:
                engine = create_engine(url)
                try:
                    await upgrade(engine)
                finally:
                    await engine.dispose()
                providers = workdir / "providers-c.yaml"
                providers.write_text(providers_yaml(fake_port))
                os.environ[PROVIDER_KEY_ENV] = PROVIDER_KEY
                settings = Settings(
                    _env_file=None,
                    database_url=url,
                    data_dir=workdir / "data-c",
                    secret_key=secrets.token_urlsafe(32),
                    providers_file=providers,
                )
                app = create_app(settings)
                services = app.state.services
                try:
                    transport = httpx.ASGITransport(app=app)
                    async with httpx.AsyncClient(
                        transport=transport, base_url=f"http://{LOOPBACK}", timeout=120
                    ) as client:
                        reply = await client.post(
                            "/api/auth/register",
                            json={"email": "bench-c@example.com", "password": "correct horse"},
                        )
                        if reply.status_code != 201:
                            raise RuntimeError(f"register answered {reply.status_code}")
                        user_id = uuid.UUID(reply.json()["id"])
                        csrf = client.cookies["hearth_csrf"]
                        warm = await seed_chat(services.sessions, user_id, 8, stored_responses=True)
                        await turn_statements(client, services.engine, warm, csrf)
                        for size in args.sizes:
                            chats = {}
                            for variant, stored in (("stored", True), ("columns", False)):
                                chats[variant] = await seed_chat(
                                    services.sessions, user_id, size, stored_responses=stored
                                )
                                results.append(
                                    await time_build(
                                        services.sessions,
                                        services.engine,
                                        chats[variant],
                                        size,
                                        variant,
                                        args.repeats,
                                        budget=30.0,
                                    )
                                )
                            counts, elapsed = await turn_statements(
                                client, services.engine, chats["stored"], csrf
                            )
                            turn_counts[size] = counts
                            turn_times[size] = elapsed
                            print(f"  (l) {size} messages done", file=sys.stderr, flush=True)
                finally:
                    await services.engine.dispose()
        finally:
            stop_process(fake)
    return report_c(args, results, turn_counts, turn_times, figures)


def report_c(
    args: argparse.Namespace,
    results: list[SizeResult],
    turn_counts: dict[int, Counter[str]],
    turn_times: dict[int, float],
    figures: dict[str, Any],
) -> bool:
    figures["l"] = {
        "db": args.db,
        "sizes": {
            f"{r.variant}.{r.size}": {
                "load_ms": round(1000 * r.load, 3),
                "build_ms": round(1000 * r.build, 3),
                "load_statements": r.load_queries,
                "sql_alone_ms": round(1000 * r.sql, 3),
            }
            for r in results
        },
        "turn_statements": {str(size): sum(c.values()) for size, c in turn_counts.items()},
    }
    print()
    print(
        f"(l) building the request for long chats (load_rows + build_history, median of up to "
        f"{args.repeats}); user and assistant in turn, a tool call every 4th message"
    )
    print(
        f"{'messages':>9}{'rows':>9}{'runs':>6}{'load ms':>10}{'build ms':>10}{'total ms':>10}"
        f"{'us/msg':>8}{'load SQL':>9}{'SQL ms':>8}   {'turn SQL':>8}{'SELECTs':>8}{'turn ms':>9}"
    )
    passed = True
    for variant in ("stored", "columns"):
        rows = [r for r in results if r.variant == variant]
        label = (
            "assistant rows with provider_details.response (as the recorder stores them)"
            if variant == "stored"
            else "assistant rows without provider_details (rebuilt from columns)"
        )
        print(f"  {label}")
        for r in rows:
            total = r.load + r.build
            turn = ""
            if variant == "stored" and r.size in turn_counts:
                counts = turn_counts[r.size]
                selects = sum(n for kind, n in counts.items() if kind.startswith("SELECT"))
                turn = (
                    f"   {sum(counts.values()):>8}{selects:>8}"
                    f"{ms(turn_times.get(r.size, float('nan'))):>9}"
                )
            print(
                f"{r.size:>9}{r.history_messages:>9}{r.repeats:>6}{ms(r.load):>10}"
                f"{ms(r.build):>10}{ms(total):>10}{1e6 * total / r.size:>8.1f}"
                f"{r.load_queries:>9}{ms(r.sql):>8}{turn}"
            )
        if len(rows) >= 2:
            small, large = rows[0], rows[-1]
            growth = (large.load + large.build) / (small.load + small.build)
            allowed = GROWTH_TARGET * large.size / small.size / 10
            ok = growth <= allowed
            same = len({r.load_queries for r in rows}) == 1
            passed &= ok and same
            counts = sorted({r.load_queries for r in rows})
            floor = large.sql / small.sql
            print(
                f"  {large.size}/{small.size} messages: x{growth:.2f} (target <= {allowed:g}) "
                f"{'PASS' if ok else 'FAIL'}; the statements alone (SQL ms, the floor): "
                f"x{floor:.2f}; statements per load_rows {counts}, "
                f"{'equal for every size' if same else 'DIFFER by size'}"
            )
            figures["l"][f"{variant}.growth"] = round(growth, 3)
            figures["l"][f"{variant}.sql_alone_growth"] = round(floor, 3)
    if turn_counts:
        kinds = list(turn_counts.values())
        same = all(k == kinds[0] for k in kinds)
        passed &= same
        breakdown = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds[0].items()))
        print(
            f"  statements per whole turn {'equal for every size' if same else 'DIFFER by size'}"
            f": {breakdown}"
        )
        if not same:
            for size, counts in turn_counts.items():
                print(f"    {size}: {dict(sorted(counts.items()))}")
    print(f"target: linear growth and a fixed statement count: {'PASS' if passed else 'FAIL'}")
    figures["l"]["passed"] = passed
    return passed


# --------------------------------------------------------------------------------------------
# Running it.
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# (c) Realistic pacing on every core, and (d) the cost of one streamed token.
# --------------------------------------------------------------------------------------------


@dataclass
class PacedBurst:
    """`n` turns at once at the realistic pace, read after they ended."""

    n: int
    slowest_over_schedule: float
    p99_added_gap_ms: float
    ttft_p50_ms: float
    problems: list[str]

    @property
    def meets(self) -> bool:
        return (
            not self.problems
            and self.slowest_over_schedule <= PACING_SLOWEST_TARGET
            and self.p99_added_gap_ms <= PACING_GAP_TARGET_MS
        )


def text_gaps(exchange: Exchange) -> list[float]:
    """Seconds between consecutive `text-delta` events with text, as they reached the client."""
    stamps = []
    for arrived, payload in exchange.events:
        if b"text-delta" in payload and payload != b"[DONE]":
            chunk = orjson.loads(payload)
            if chunk.get("type") == "text-delta" and chunk.get("delta"):
                stamps.append(arrived)
    return [(b - a) / 1e9 for a, b in itertools.pairwise(stamps)]


async def paced_burst(
    stack: Stack, control: Connection, account: Account, count: int, schedule: Schedule
) -> PacedBurst:
    chats = [await create_chat(control, account) for _ in range(count)]
    contents = [message_text(i, f"Paced turn of {count}, number") for i in range(count)]
    requests = [turn_request(account, c, t) for c, t in zip(chats, contents, strict=True)]
    exchanges = await send_all(stack.port, requests, 4 * schedule.nominal_seconds + 60.0)
    outcomes = [read_turn(exchange) for exchange in exchanges]
    await asyncio.sleep(1.0)  # the turns' last writes (lease release) follow [DONE]
    check = await check_burst(stack, control, account, chats, contents, outcomes, schedule)
    problems = check.problems()
    finished = sum(o.wall is not None for o in outcomes)
    if finished < count:
        problems.append(f"{count - finished} turns without [DONE]")
    return paced_figures(count, exchanges, outcomes, schedule, problems)


def paced_figures(
    count: int,
    exchanges: Sequence[Exchange],
    outcomes: Sequence[TurnOutcome],
    schedule: Schedule,
    problems: list[str],
) -> PacedBurst:
    """A burst's figures from its streams: the slowest over the schedule, the p99 gap between
    text events beyond the provider's interval, the median time to first text."""
    walls = [o.wall for o in outcomes if o.wall is not None]
    gaps = [gap for exchange in exchanges for gap in text_gaps(exchange)]
    return PacedBurst(
        n=count,
        slowest_over_schedule=max(walls, default=float("inf")) / schedule.nominal_seconds,
        p99_added_gap_ms=1000 * (quantile(gaps, 0.99) - schedule.interval_ms / 1000)
        if gaps
        else float("inf"),
        ttft_p50_ms=1000 * quantile([o.ttft for o in outcomes if o.ttft is not None], 0.5),
        problems=problems,
    )


def floor_request(content: str) -> bytes:
    """A Vercel AI SDK `submit-message` request for `_library_server.py`."""
    body = orjson.dumps(
        {
            "trigger": "submit-message",
            "id": uuid.uuid4().hex,
            "messages": [
                {
                    "id": uuid.uuid4().hex,
                    "role": "user",
                    "parts": [{"type": "text", "text": content}],
                }
            ],
        }
    )
    return build_request("POST", "/chat", {"Content-Type": "application/json"}, body)


async def floor_burst(
    port: int, count: int, schedule: Schedule, pid: int | None = None
) -> tuple[PacedBurst, float | None]:
    """`count` runs at once on pydantic-ai's own server (`_library_server.py`), measured as
    `paced_burst` measures hearth's turns: each must stream the whole answer and end. With
    `pid`, also the CPU seconds that process used while the runs streamed (connections open)."""
    contents = [message_text(i, f"Paced run of {count}, number") for i in range(count)]
    requests = [floor_request(content) for content in contents]
    connections = await open_connections(port, count)
    before = cpu_seconds(pid) if pid is not None else None
    try:
        exchanges = await asyncio.gather(
            *(
                conn.exchange(req, wait=4 * schedule.nominal_seconds + 60.0)
                for conn, req in zip(connections, requests, strict=True)
            )
        )
    finally:
        for conn in connections:
            conn.close()
    used = _used(cpu_seconds(pid), before) if pid is not None else None
    outcomes = [read_turn(exchange) for exchange in exchanges]
    problems = [
        f"run {i}: {o.problem() if not o.ok else 'wrong text'}"
        for i, o in enumerate(outcomes)
        if not o.ok or o.text != schedule.text
    ]
    return paced_figures(count, exchanges, outcomes, schedule, problems), used


@contextlib.asynccontextmanager
async def library_server(
    stack: Stack, workdir: Path, workers: int
) -> AsyncIterator[tuple[int, subprocess.Popen[bytes]]]:
    """`_library_server.py` on `workers` uvicorn processes (with one, the process itself
    serves), against `stack`'s fake: its port and process."""
    port = free_port()
    env = {
        "HEARTH_FLOOR_PROVIDER_URL": f"http://{LOOPBACK}:{stack.fake_port}/v1",
        PROVIDER_KEY_ENV: PROVIDER_KEY,
    }
    command = [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(__file__).parent)]
    command += ["_library_server:app", "--host", LOOPBACK, "--port", str(port)]
    command += ["--workers", str(workers), "--log-level", "warning"]
    with (workdir / "library-server.log").open("wb") as log:
        server = start_process(command, log, env)
        try:
            await wait_answering(port, "/healthz", server)
            yield port, server
        finally:
            stop_process(server)


async def search_capacity(
    bursts: dict[int, PacedBurst], measure: Any, pacing: Sequence[int], limit: int
) -> int:
    """Measure each N of `pacing`, then upward in steps of `PACING_STEP` from the largest that
    met both targets to the first that does not: the largest N that meets both."""
    for count in pacing:
        await measure(count)
    capacity = max((n for n, burst in bursts.items() if burst.meets), default=0)
    candidate = capacity + PACING_STEP
    while candidate <= limit:
        burst = bursts.get(candidate) or await measure(candidate)
        if not burst.meets:
            break
        capacity, candidate = candidate, candidate + PACING_STEP
    return capacity


async def part_c(args: argparse.Namespace, workdir: Path, figures: dict[str, Any]) -> bool:
    """Turns at a real model's pace on `--workers` processes over PostgreSQL: the slowest turn
    over the schedule and the gaps a reader sees, at each of `--pacing`, then upward in steps
    of 50 from the largest N that met both targets to the first that does not: the capacity."""
    schedule = Schedule.parse(PACING_SCHEDULE)
    bursts: dict[int, PacedBurst] = {}
    async with (
        fresh_database("postgresql", args.pg_url, workdir, "pacing") as url,
        running_stack(
            url, workdir, PACING_SCHEDULE, ROOT, name="pacing", workers=args.workers
        ) as stack,
    ):
        control = await Connection.open(stack.port)
        try:
            account = await register(control)
            await paced_burst(stack, control, account, 4 * args.workers, schedule)  # warm-up

            async def measure(count: int) -> PacedBurst:
                burst = await paced_burst(stack, control, account, count, schedule)
                bursts[count] = burst
                print(
                    f"  (c) {count} turns: slowest {burst.slowest_over_schedule:.3f} x, p99 "
                    f"added gap {burst.p99_added_gap_ms:.1f} ms, {len(burst.problems)} problems",
                    file=sys.stderr,
                    flush=True,
                )
                await asyncio.sleep(2.0)
                return burst

            capacity = await search_capacity(bursts, measure, args.pacing, args.capacity_limit)
        finally:
            control.close()
        if stack.server.poll() is not None:
            raise RuntimeError("the server exited during (c)")
        async with library_server(stack, workdir, args.workers) as (port, _):
            await floor_burst(port, 4 * args.workers, schedule)  # warm-up

            async def measure_floor(count: int) -> PacedBurst:
                burst, _ = await floor_burst(port, count, schedule)
                floors[count] = burst
                print(
                    f"  (c) floor, {count} runs: slowest {burst.slowest_over_schedule:.3f} x, "
                    f"p99 added gap {burst.p99_added_gap_ms:.1f} ms, "
                    f"{len(burst.problems)} problems",
                    file=sys.stderr,
                    flush=True,
                )
                await asyncio.sleep(2.0)
                return burst

            floors: dict[int, PacedBurst] = {}
            floor_capacity = await search_capacity(
                floors, measure_floor, sorted(bursts), args.capacity_limit
            )

    print()
    print(
        f"(c) realistic pacing: `hearth serve --workers {args.workers}` on PostgreSQL, the "
        f"provider answering the first token after {schedule.first_ms:g} ms, then "
        f"{schedule.tokens} tokens {schedule.interval_ms:g} ms apart "
        f"({schedule.nominal_seconds:.2f} s a turn); N turns at once, each in its own chat"
    )
    print(
        "  beside each N, the floor: pydantic-ai serving the same runs by itself "
        "(`_library_server.py`, its own Vercel adapter, the same workers, client and fake)"
    )
    print(
        f"{'N':>6}{'slowest':>10}{'p99 gap':>10}{'TTFT50':>9}{'problems':>10}{'meets':>7}"
        f"   {'floor:':<7}{'slowest':>9}{'p99 gap':>10}{'TTFT50':>9}{'meets':>7}"
    )
    print(
        f"{'':>6}{'/sched':>10}{'+ms':>10}{'ms':>9}{'':>10}{'':>7}   {'':<7}{'/sched':>9}"
        f"{'+ms':>10}{'ms':>9}{'':>7}"
    )
    for count in sorted(bursts.keys() | floors.keys()):
        row = f"{count:>6}"
        if (burst := bursts.get(count)) is not None:
            row += (
                f"{burst.slowest_over_schedule:>10.3f}{burst.p99_added_gap_ms:>10.1f}"
                f"{burst.ttft_p50_ms:>9.1f}{len(burst.problems):>10}"
                f"{'yes' if burst.meets else 'no':>7}"
            )
        else:
            row += f"{'':>46}"
        if (floor := floors.get(count)) is not None:
            row += (
                f"   {'':<7}{floor.slowest_over_schedule:>9.3f}{floor.p99_added_gap_ms:>10.1f}"
                f"{floor.ttft_p50_ms:>9.1f}{'yes' if floor.meets else 'no':>7}"
            )
        print(row)
        for problem in [*(burst.problems if burst else []), *(floor.problems if floor else [])][:3]:
            print(f"        {problem}")
    target_n = PACING_TARGET_N if PACING_TARGET_N in bursts else max(args.pacing)
    target = bursts[target_n]
    passed = target.meets
    print(
        f"targets at N={target_n}: slowest <= {PACING_SLOWEST_TARGET:g} x the schedule, p99 "
        f"added gap <= {PACING_GAP_TARGET_MS:g} ms, nothing lost or crossed: "
        f"{'PASS' if passed else 'FAIL'}"
    )
    print(
        f"capacity on this machine ({os.cpu_count()} cores, {args.workers} workers): "
        f"{capacity} turns at once still meet both (steps of {PACING_STEP}); pydantic-ai "
        f"serving them by itself: {floor_capacity}"
    )
    figures["c"] = {
        "db": "postgresql",
        "workers": args.workers,
        "n": target_n,
        "slowest_over_schedule_n200": round(target.slowest_over_schedule, 4),
        "p99_added_gap_ms_n200": round(target.p99_added_gap_ms, 3),
        "capacity": capacity,
        "by_n": {
            str(n): {
                "slowest_over_schedule": round(b.slowest_over_schedule, 4),
                "p99_added_gap_ms": round(b.p99_added_gap_ms, 3),
                "ttft_p50_ms": round(b.ttft_p50_ms, 3),
                "problems": len(b.problems),
                "meets": b.meets,
            }
            for n, b in sorted(bursts.items())
        },
        "floor_slowest_over_schedule_n200": round(floors[target_n].slowest_over_schedule, 4)
        if target_n in floors
        else None,
        "floor_p99_added_gap_ms_n200": round(floors[target_n].p99_added_gap_ms, 3)
        if target_n in floors
        else None,
        "floor_capacity": floor_capacity,
        "floor_by_n": {
            str(n): {
                "slowest_over_schedule": round(b.slowest_over_schedule, 4),
                "p99_added_gap_ms": round(b.p99_added_gap_ms, 3),
                "ttft_p50_ms": round(b.ttft_p50_ms, 3),
                "problems": len(b.problems),
                "meets": b.meets,
            }
            for n, b in sorted(floors.items())
        },
        "passed": passed,
    }
    return passed


async def token_costs(
    args: argparse.Namespace, workdir: Path, tokens: int
) -> tuple[list[float], list[float], list[float], list[str]]:
    """CPU per turn of hearth's server, per run of pydantic-ai alone and per run of
    pydantic-ai's own server, for answers of `tokens` tokens: `--token-rounds` bursts of
    `--token-turns` at once, each followed by the same burst of library runs, then by the same
    burst served by the library."""
    spec = f"first_ms=20,tokens={tokens},interval_ms=2"
    schedule = Schedule.parse(spec)
    hearth_cpu: list[float] = []
    library_cpu: list[float] = []
    served_cpu: list[float] = []
    problems: list[str] = []
    count = args.token_turns
    async with (
        fresh_database(args.db, args.pg_url, workdir, f"tokens{tokens}") as url,
        running_stack(url, workdir, spec, ROOT, name=f"tokens{tokens}") as stack,
        library_server(stack, workdir, 1) as (served_port, served),
    ):
        await floor_burst(served_port, 3, schedule)  # warm-up
        control = await Connection.open(stack.port)
        try:
            account = await register(control)
            for index in range(3):  # warm-up
                chat = await create_chat(control, account)
                await control.exchange(turn_request(account, chat, f"Warm-up {index}"), wait=60)
                if not control.usable:
                    await control.reopen()
            for _ in range(args.token_rounds):
                chats = [await create_chat(control, account) for _ in range(count)]
                contents = [message_text(i, f"Token turn of {tokens}") for i in range(count)]
                requests = [
                    turn_request(account, c, t) for c, t in zip(chats, contents, strict=True)
                ]
                before = cpu_seconds(stack.server.pid)
                exchanges = await send_all(stack.port, requests, 120)
                used = _used(cpu_seconds(stack.server.pid), before)
                outcomes = [read_turn(exchange) for exchange in exchanges]
                problems += [o.problem() for o in outcomes if not o.ok]
                problems += [
                    "a turn's text is not the provider's"
                    for o in outcomes
                    if o.ok and o.text != schedule.text
                ]
                if used is not None:
                    hearth_cpu.append(used / count)
                await asyncio.sleep(0.5)
                library = await library_burst(stack, count)
                library_cpu.append(library.cpu_seconds / count)
                await asyncio.sleep(0.5)
                floor, floor_used = await floor_burst(served_port, count, schedule, served.pid)
                problems += [f"served by the library: {p}" for p in floor.problems]
                if floor_used is not None:
                    served_cpu.append(floor_used / count)
                await asyncio.sleep(0.5)
        finally:
            control.close()
    print(f"  (d) {tokens} tokens measured", file=sys.stderr, flush=True)
    return hearth_cpu, library_cpu, served_cpu, problems


async def part_d(args: argparse.Namespace, workdir: Path, figures: dict[str, Any]) -> bool:
    """hearth's server CPU per streamed text delta beyond pydantic-ai alone's: the slope between
    answers of `TOKEN_COUNTS` tokens, so what a turn costs once (set-up, rows) cancels out.
    Beside it, the same slope of pydantic-ai serving the runs itself: the floor."""
    low, high = TOKEN_COUNTS
    measured = {tokens: await token_costs(args, workdir, tokens) for tokens in TOKEN_COUNTS}
    hearth = {t: statistics.median(m[0]) for t, m in measured.items()}
    library = {t: statistics.median(m[1]) for t, m in measured.items()}
    served = {t: statistics.median(m[2]) if m[2] else math.nan for t, m in measured.items()}
    problems = [p for m in measured.values() for p in m[3]]

    def slope(values: dict[int, float]) -> float:
        return (values[high] - values[low]) / (high - low)

    hearth_slope, library_slope, served_slope = slope(hearth), slope(library), slope(served)
    extra_us = 1e6 * (hearth_slope - library_slope)
    served_extra_us = 1e6 * (served_slope - library_slope)
    passed = extra_us <= TOKEN_EXTRA_TARGET_US and not problems
    print()
    print(
        f"(d) CPU per streamed token on {args.db}: {args.token_rounds} bursts of "
        f"{args.token_turns} turns at once per answer length (the provider sending tokens 2 ms "
        f"apart), each beside the same burst of pydantic-ai runs alone and the same burst "
        f"served by pydantic-ai itself (`_library_server.py`); medians"
    )
    print(f"{'tokens':>8}{'hearth':>12}{'library':>12}{'served':>12}")
    print(f"{'':>8}{'ms/turn':>12}{'ms/run':>12}{'ms/run':>12}")
    for tokens in TOKEN_COUNTS:
        print(
            f"{tokens:>8}{1000 * hearth[tokens]:>12.2f}{1000 * library[tokens]:>12.2f}"
            f"{1000 * served[tokens]:>12.2f}"
        )
    print(
        f"per token: hearth {1e6 * hearth_slope:.2f} us, pydantic-ai alone "
        f"{1e6 * library_slope:.2f} us; hearth's extra {extra_us:.2f} us; target <= "
        f"{TOKEN_EXTRA_TARGET_US:g} us: {'PASS' if passed else 'FAIL'}"
    )
    print(
        f"the floor: pydantic-ai serving them itself {1e6 * served_slope:.2f} us per token, "
        f"{served_extra_us:.2f} us over the library alone (its encoding and writes)"
    )
    for problem in problems[:5]:
        print(f"  problem: {problem}")
    figures["d"] = {
        "db": args.db,
        "extra_us_per_token": round(extra_us, 3),
        "hearth_us_per_token": round(1e6 * hearth_slope, 3),
        "library_us_per_token": round(1e6 * library_slope, 3),
        "served_library_us_per_token": round(1e6 * served_slope, 3),
        "served_library_extra_us_per_token": round(served_extra_us, 3),
        "hearth_cpu_ms_per_turn": {str(t): round(1000 * v, 3) for t, v in hearth.items()},
        "library_cpu_ms_per_run": {str(t): round(1000 * v, 3) for t, v in library.items()},
        "served_library_cpu_ms_per_run": {str(t): round(1000 * v, 3) for t, v in served.items()},
        "problems": len(problems),
        "target_us": TOKEN_EXTRA_TARGET_US,
        "passed": passed,
    }
    return passed


async def orchestrate(args: argparse.Namespace) -> bool:
    schedule = Schedule.parse(args.schedule)
    workdir = Path(tempfile.mkdtemp(prefix="hearth-turn-bench-"))
    print(
        f"hearth turn overhead on {args.db}; fake OpenAI provider, schedule {args.schedule} "
        f"({schedule.nominal_seconds:.2f} s); Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}, load average {_load()}"
    )
    if {"a", "b"} & set(args.parts):
        print(f"hearth (parts a, b): {revision(args.checkout)}")
    if {"c", "d", "l", "o"} & set(args.parts):
        print(f"hearth (parts c, d, l, o): {revision(ROOT)}")
    verdicts: dict[str, bool] = {}
    figures: dict[str, Any] = {}
    try:
        if {"a", "b"} & set(args.parts):
            async with (
                fresh_database(args.db, args.pg_url, workdir, "turns") as url,
                running_stack(url, workdir, args.schedule, args.checkout) as stack,
            ):
                control = await Connection.open(stack.port)
                try:
                    account = await register(control)
                finally:
                    control.close()
                if "a" in args.parts:
                    verdicts["a"] = await part_a(stack, account, args, figures)
                if "b" in args.parts:
                    verdicts["b"] = await part_b(stack, account, args, schedule, figures, workdir)
                if stack.server.poll() is not None:
                    raise RuntimeError("the server exited during the run")
                errors, raised = log_problems(stack.log_path)
                if errors or raised:
                    print(f"\nthe server and the fake logged {errors} errors; exceptions raised:")
                    for line, count in raised.most_common(5):
                        print(f"  {count} x {line}")
        if "c" in args.parts:
            verdicts["c"] = await part_c(args, workdir, figures)
        if "d" in args.parts:
            verdicts["d"] = await part_d(args, workdir, figures)
        if "l" in args.parts:
            verdicts["l"] = await part_l(args, workdir, figures)
        if "o" in args.parts:
            verdicts["o"] = await part_o(args, workdir, figures)
    finally:
        if args.keep:
            print(f"kept {workdir} (databases, providers files, processes.log)", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        write_figures(figures, args.json)
    print()
    print(f"load average at the end: {_load()}")
    print(
        "summary: " + ", ".join(f"({p}) {'PASS' if ok else 'FAIL'}" for p, ok in verdicts.items())
    )
    return all(verdicts.values())


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def _run(main: Coroutine[Any, Any, bool]) -> bool:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="an existing database on the server where the benchmark's own one is created",
    )
    parser.add_argument(
        "--parts",
        default="a,b,c,d",
        help="which of a, b, c, d, l (long chats) and o (observability) to run",
    )
    parser.add_argument("--observe-rounds", type=int, default=6, help="bursts per server in (o)")
    parser.add_argument("--observe-turns", type=int, default=50, help="turns a burst in (o)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="(o): also run a server from this source tree, with both off, beside this one's",
    )
    parser.add_argument("--sequential", type=int, default=200, help="turns in (a)")
    parser.add_argument("--concurrency", default="50,100,200", help="turns at once in (b)")
    parser.add_argument(
        "--pacing", default="100,200,400", help="turns at once in (c), before the capacity search"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="`hearth serve --workers` in (c) (PostgreSQL)"
    )
    parser.add_argument(
        "--capacity-limit", type=int, default=1000, help="the largest N (c) tries for capacity"
    )
    parser.add_argument("--token-turns", type=int, default=20, help="turns a burst in (d)")
    parser.add_argument("--token-rounds", type=int, default=3, help="bursts per length in (d)")
    parser.add_argument("--sizes", default="200,1000,2000", help="chat lengths in (l)")
    parser.add_argument("--repeats", type=int, default=15, help="timed builds per size in (l)")
    add_json_option(parser)
    parser.add_argument("--schedule", default=DEFAULT_SCHEDULE, help="the fake's answer")
    parser.add_argument("--time-limit", type=float, default=1200.0, help="seconds for (a)")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="run the server and the fake of (a) and (b) from this source tree, e.g. to compare "
        "a change against this one (default: this repository)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (SQLite files, logs)"
    )
    args = parser.parse_args(argv)
    args.parts = sorted({part.strip() for part in args.parts.split(",") if part.strip()})
    try:
        args.concurrency = _int_list(args.concurrency)
        args.pacing = sorted(_int_list(args.pacing))
        args.sizes = sorted(_int_list(args.sizes))
        Schedule.parse(args.schedule)
    except ValueError as exc:
        parser.error(str(exc))
    limits = (
        (
            set(args.parts) <= {"a", "b", "c", "d", "l", "o"} and args.parts,
            "--parts takes a, b, c, d, l, o",
        ),
        (args.pacing and all(1 <= n <= 2000 for n in args.pacing), "--pacing values in [1, 2000]"),
        (1 <= args.workers <= 64, "--workers must be in [1, 64]"),
        (50 <= args.capacity_limit <= 5000, "--capacity-limit must be in [50, 5000]"),
        (1 <= args.token_turns <= 500, "--token-turns must be in [1, 500]"),
        (1 <= args.token_rounds <= 50, "--token-rounds must be in [1, 50]"),
        (1 <= args.observe_rounds <= 100, "--observe-rounds must be in [1, 100]"),
        (1 <= args.observe_turns <= 500, "--observe-turns must be in [1, 500]"),
        (1 <= args.sequential <= 10_000, "--sequential must be in [1, 10000]"),
        (all(1 <= n <= 1000 for n in args.concurrency), "--concurrency values in [1, 1000]"),
        (all(2 <= n <= 20_000 for n in args.sizes), "--sizes values in [2, 20000]"),
        (1 <= args.repeats <= 1000, "--repeats must be in [1, 1000]"),
        (0 < args.time_limit <= 7200, "--time-limit must be in (0, 7200]"),
    )
    for ok, message in limits:
        if not ok:
            parser.error(message)
    args.checkout = args.checkout.resolve()
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "app" / "cli.py").is_file():
            parser.error(f"--baseline {args.baseline} holds no app/cli.py")
    if not (args.checkout / "app" / "cli.py").is_file():
        parser.error(f"--checkout {args.checkout} holds no app/cli.py")
    if args.db == "postgresql" and make_url(args.pg_url).host not in (LOOPBACK, "localhost"):
        parser.error("--pg-url must point at 127.0.0.1")
    return args


def main() -> None:
    args = parse_args()
    sys.exit(0 if _run(orchestrate(args)) else 1)


if __name__ == "__main__":
    main()
