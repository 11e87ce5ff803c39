"""What hearth's framework layer costs on its two hottest reads, against bare twins.

Measured: requests per second and p50/p99 latency of

* `GET /api/auth/me`, an authenticated read that is nothing but the session lookup, and
* `GET /api/chats/{id}` on a chat of 200 messages (a tool call on every 4th assistant message),

each next to a *bare twin* that does the same work with none of hearth's layers: no FastAPI
dependencies, no ORM session, no `select()` construction, no TokenCodec, no view functions.
`/bare/me` verifies the cookie signature with `hmac`, runs one plain SQL query (sessions joined
to users by token hash, with hearth's expiry conditions) through the same engine and driver,
and serialises the same dict with orjson. `/bare/chats/{id}` runs the same session query and
then reads the same rows as hearth's `chat_detail` (chat, messages, tool calls; uploads when a
message has attachments) with plain SQL, builds the same dicts and serialises them with orjson
and the same options. Both twins convert the raw driver values (UUIDs, timestamps, JSON text on
SQLite) into what hearth's column types produce, so the two answers are equal JSON; the script
checks that once before it measures.

Why it is shaped so:

* The twins are raw Starlette routes inserted into hearth's own app object, so both sides run in
  one process, under one uvicorn worker, through the same ASGI server, middleware, connection
  pool and database; the only difference is the route itself.
* The server runs in its own process and the load generator in this one (on a 2-core machine,
  a core each), over loopback. The client is a plain asyncio HTTP/1.1 keep-alive loop
  (see `_loadgen.py`), cheap enough per request that the server is the bottleneck.
* Routes are measured in rounds, each hearth route right beside its twin, the order flipped every
  round, so drift (thermal, page cache, other load) falls on both sides of a pair alike. The
  ratio is total hearth requests/s over total twin requests/s across all rounds.

The database is fresh for every run: a SQLite file in a temporary folder (`--db sqlite`, the
default) or a randomly named PostgreSQL database created from `--pg-url` and dropped at the end
(`--db postgresql`). The user signs up through the real register route; the chat and its
messages are written through the ORM.

Target: each hearth route reaches at least 0.7 of its twin's throughput. A third pair sets
`GET /api/auth/me` with an API key (`Authorization: Bearer`, made through `POST /api/keys`)
beside the same route with the session cookie: the key's lookup (a prefix index, a
constant-time hash comparison) must keep at least 0.9 of the cookie's throughput. The exit
status is 0 when every pair meets its target, 1 otherwise.

`--usage` measures something else: `GET /api/admin/usage?group_by=user` over a million
request-log rows of a thousand users spread over the last 30 days (`--requests`, `--users`),
through the running server with the shipped `providers.yaml` (so costs are priced), p50 of
`--usage-runs` requests against 150 ms. Beside it, the same sums read from the request rows
themselves through the covering index that suits them best: the cost of the report without the
per-day totals the request log keeps (`usage_daily`), which is why they exist.

    .venv/bin/python bench/api_overhead.py
    .venv/bin/python bench/api_overhead.py --db postgresql --seconds 5 --rounds 3
    .venv/bin/python bench/api_overhead.py --usage --db postgresql
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import importlib.util
import json
import os
import platform
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from _chats import link_in_order
from _loadgen import LOOPBACK, Sample, build_request, percentile, request_once, run_load
from _turns import free_port, fresh_database
from sqlalchemy import bindparam, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.core.db.engine import create_engine, session_factory
from app.core.db.migrate import upgrade
from app.main import create_app
from app.models import Chat, ChatLlmTool, LlmRequest, Message, User
from app.settings import Settings

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
SESSION_COOKIE = "hearth_session"
CHAT_MODEL = "demo/scripted"
PROVIDERS_YAML = """\
providers:
  - id: demo
    kind: demo
    models:
      - id: scripted
        context_window: 32000
        max_output_tokens: 1024
"""

# --------------------------------------------------------------------------------------------
# The bare twins: plain SQL through the same engine, plain dicts, orjson.
# --------------------------------------------------------------------------------------------

_SESSION_SQL = text(
    "SELECT s.id, s.last_seen_at, u.id, u.email, u.display_name, u.is_admin, u.created_at"
    " FROM auth_sessions AS s JOIN users AS u ON u.id = s.user_id"
    " WHERE s.token_hash = :token_hash AND s.revoked_at IS NULL"
    " AND s.expires_at > :now AND s.last_seen_at > :idle_since"
)
_TOUCH_SQL = text("UPDATE auth_sessions SET last_seen_at = :now WHERE id = :id")
_CHAT_SQL = text(
    "SELECT id, title, model, created_at, updated_at, turn_owner, turn_lease_until FROM chats"
    " WHERE id = :chat_id AND user_id = :user_id"
)
_MESSAGES_SQL = text(
    "SELECT id, chat_id, role, content, reasoning, status, error, model, created_at,"
    " input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, metadata"
    " FROM messages WHERE chat_id = :chat_id ORDER BY id"
)
_TOOLS_SQL = text(
    "SELECT id, message_id, tool_call_id, name, arguments, status, result, preview_old,"
    " preview_new FROM chat_llm_tools WHERE chat_id = :chat_id ORDER BY id"
)
_UPLOADS_SQL = text(
    "SELECT id, filename, mime, size, sha256, stored_path, created_at FROM uploads"
    " WHERE user_id = :user_id AND id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_TOUCH_INTERVAL = timedelta(seconds=60)
_JSON_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def _json_default(value: Any) -> Any:
    if isinstance(value, uuid.UUID):  # asyncpg's own UUID class
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _json(content: Any, status_code: int = 200) -> Response:
    body = orjson.dumps(content, default=_json_default, option=_JSON_OPTIONS)
    return Response(body, status_code=status_code, media_type="application/json")


_EXPIRED = {"detail": "session expired or signed out; sign in again"}


def _unauthorised(request: Request) -> Response:
    """hearth's 401: no cookie at all, or one that names no live session."""
    if request.cookies.get(SESSION_COOKIE):
        return _json(_EXPIRED, 401)
    return _json({"detail": "not signed in"}, 401)


def _same(value: Any) -> Any:
    return value


def _sqlite_uuid(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(hex=value)


def _sqlite_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


def _sqlite_json(value: str | None) -> Any:
    # The stdlib parser, as SQLAlchemy's JSON type uses (hearth's engine sets no other).
    return None if value is None else json.loads(value)


def _sqlite_bind_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite_bind_uuid(value: uuid.UUID) -> str:
    return value.hex


class BareTwin:
    """`/bare/me` and `/bare/chats/{id}`: hearth's answers with none of hearth's layers."""

    def __init__(self, engine: AsyncEngine, secret_key: str, idle: timedelta) -> None:
        secret = secret_key.encode()
        self.engine = engine
        # The keys TokenCodec derives: one SHA-256 per purpose, HMAC-SHA256 signatures.
        self.sign_key = hashlib.sha256(b"hearth.session\x00" + secret).digest()
        self.csrf_key = hashlib.sha256(b"hearth.csrf\x00" + secret).digest()
        self.idle = idle
        if engine.dialect.name == "sqlite":
            self.to_uuid: Callable[[Any], Any] = _sqlite_uuid
            self.to_time: Callable[[Any], Any] = _sqlite_time
            self.to_json: Callable[[Any], Any] = _sqlite_json
            self.bind_time: Callable[[datetime], Any] = _sqlite_bind_time
            self.bind_uuid: Callable[[uuid.UUID], Any] = _sqlite_bind_uuid
        else:  # asyncpg already returns UUIDs, aware datetimes and decoded JSONB
            self.to_uuid = self.to_time = self.to_json = _same
            self.bind_time = self.bind_uuid = _same

    def routes(self) -> list[Route]:
        return [
            Route("/bare/me", self.me, methods=["GET"]),
            Route("/bare/chats/{chat_id}", self.chat, methods=["GET"]),
        ]

    def _token(self, request: Request) -> str | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        value, dot, signature = cookie.rpartition(".")
        if not dot:
            return None
        mac = hmac.new(self.sign_key, value.encode(), hashlib.sha256).digest()
        expected = urlsafe_b64encode(mac).rstrip(b"=")
        return value if hmac.compare_digest(expected, signature.encode()) else None

    async def _session(
        self, conn: AsyncConnection, token: str
    ) -> tuple[Any, dict[str, Any]] | None:
        """(user id as stored, user dict) of the live session behind `token`, or None."""
        now = datetime.now(UTC)
        row = (
            await conn.execute(
                _SESSION_SQL,
                {
                    "token_hash": hashlib.sha256(token.encode()).hexdigest(),
                    "now": self.bind_time(now),
                    "idle_since": self.bind_time(now - self.idle),
                },
            )
        ).first()
        if row is None:
            return None
        session_id, last_seen, user_id, email, display_name, is_admin, created_at = row
        if now - self.to_time(last_seen) >= _TOUCH_INTERVAL:
            await conn.execute(_TOUCH_SQL, {"now": self.bind_time(now), "id": session_id})
            await conn.commit()
        user = {
            "id": self.to_uuid(user_id),
            "email": email,
            "display_name": display_name,
            "is_admin": bool(is_admin),
            "created_at": self.to_time(created_at),
        }
        return user_id, user

    async def me(self, request: Request) -> Response:
        token = self._token(request)
        if token is None:
            return _unauthorised(request)
        async with self.engine.connect() as conn:
            found = await self._session(conn, token)
        if found is None:
            return _json(_EXPIRED, 401)
        mac = hmac.new(self.csrf_key, token.encode(), hashlib.sha256).digest()
        csrf = urlsafe_b64encode(mac).rstrip(b"=").decode()
        return _json({**found[1], "csrf_token": csrf})

    async def chat(self, request: Request) -> Response:
        try:
            chat_id = uuid.UUID(request.path_params["chat_id"])
        except ValueError:
            return _json({"detail": "chat id is not a UUID"}, 422)
        token = self._token(request)
        if token is None:
            return _unauthorised(request)
        key = self.bind_uuid(chat_id)
        async with self.engine.connect() as conn:
            found = await self._session(conn, token)
            if found is None:
                return _json(_EXPIRED, 401)
            user_id = found[0]
            chat = (await conn.execute(_CHAT_SQL, {"chat_id": key, "user_id": user_id})).first()
            if chat is None:
                return _json({"detail": "chat not found"}, 404)
            messages = (await conn.execute(_MESSAGES_SQL, {"chat_id": key})).all()
            tools = (await conn.execute(_TOOLS_SQL, {"chat_id": key})).all()
            metas = [self.to_json(row[13]) or {} for row in messages]
            wanted = {uuid.UUID(str(i)) for meta in metas for i in meta.get("attachments", ())}
            uploads: dict[str, dict[str, Any]] = {}
            if wanted:
                ids = [self.bind_uuid(i) for i in wanted]
                rows = await conn.execute(_UPLOADS_SQL, {"user_id": user_id, "ids": ids})
                uploads = {str(self.to_uuid(row[0])): self._upload(row) for row in rows}

        now = datetime.now(UTC)
        to_uuid, to_time, to_json = self.to_uuid, self.to_time, self.to_json
        calls: dict[int, list[dict[str, Any]]] = {}
        for tid, message_id, call_id, name, arguments, status, result, old, new in tools:
            calls.setdefault(message_id, []).append(
                {
                    "id": tid,
                    "tool_call_id": call_id,
                    "name": name,
                    "arguments": to_json(arguments),
                    "status": status,
                    "result": result,
                    "preview_old": old,
                    "preview_new": new,
                    "media": [],
                }
            )
        items = []
        for row, meta in zip(messages, metas, strict=True):
            mid, mchat, role, content, reasoning, status, error, model, created = row[:9]
            tokens_in, tokens_out, cache_read, cache_write = row[9:13]
            usage = None
            if tokens_in is not None or tokens_out is not None:
                usage = {
                    "input_tokens": tokens_in or 0,
                    "output_tokens": tokens_out or 0,
                    "cache_read_tokens": cache_read or 0,
                    "cache_write_tokens": cache_write or 0,
                }
            attached = [str(i) for i in meta.get("attachments", ())]
            items.append(
                {
                    "id": mid,
                    "chat_id": to_uuid(mchat),
                    "role": role,
                    "content": content,
                    "reasoning": reasoning,
                    "status": status,
                    "error": error,
                    "model": model,
                    "created_at": to_time(created),
                    "attachments": [uploads[i] for i in attached if i in uploads],
                    "tool_calls": calls.get(mid, []),
                    "usage": usage,
                    "citations": [],
                    "citation_status": None,
                }
            )
        cid, title, model, created_at, updated_at, owner, lease = chat
        lease_until = to_time(lease) if lease is not None else None
        return _json(
            {
                "id": to_uuid(cid),
                "title": title,
                "model": model,
                "created_at": to_time(created_at),
                "updated_at": to_time(updated_at),
                "running": owner is not None and lease_until is not None and lease_until >= now,
                "messages": items,
                "summaries": [],
            }
        )

    def _upload(self, row: Sequence[Any]) -> dict[str, Any]:
        upload_id, filename, mime, size, sha256, stored_path, created_at = row
        upload_id = self.to_uuid(upload_id)
        return {
            "id": upload_id,
            "filename": filename,
            "mime": mime,
            "size": size,
            "sha256": sha256,
            "path": stored_path,
            "url": f"/data/{upload_id}/{quote(filename, safe='')}",
            "created_at": self.to_time(created_at),
            "ingestion": None,
        }


def build_server_app(settings: Settings) -> Starlette:
    """hearth's app, with the bare twins placed first in its own router."""
    app = create_app(settings)
    services = app.state.services
    twin = BareTwin(
        services.engine, settings.signing_key, timedelta(days=settings.session_idle_days)
    )
    for index, route in enumerate(twin.routes()):
        app.router.routes.insert(index, route)
    return app


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    settings = Settings(
        _env_file=None,
        database_url=args.database_url,
        data_dir=Path(args.data_dir),
        secret_key=args.secret_key,
        providers_file=Path(args.providers_file),
    )
    uvicorn.run(
        build_server_app(settings),
        host=LOOPBACK,
        port=args.port,
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )


# --------------------------------------------------------------------------------------------
# Setting up: a fresh database, the server process, a user and a chat of 200 messages.
# --------------------------------------------------------------------------------------------


def start_server(
    database_url: str, workdir: Path, port: int, providers_yaml: str = PROVIDERS_YAML
) -> subprocess.Popen[bytes]:
    providers = workdir / "providers.yaml"
    providers.write_text(providers_yaml)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--serve",
        "--database-url",
        database_url,
        "--data-dir",
        str(workdir / "data"),
        "--secret-key",
        secrets.token_urlsafe(32),
        "--providers-file",
        str(providers),
        "--port",
        str(port),
    ]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def stop_server(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=15)


async def wait_ready(port: int, server: subprocess.Popen[bytes], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        with contextlib.suppress(OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            if (await request_once(port, "GET", "/healthz", wait=5)).status == 200:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not answer within {within:.0f} s")


async def register(port: int) -> tuple[str, uuid.UUID, str]:
    """Sign up through hearth's own route; the session cookie, the user's id and CSRF token."""
    body = orjson.dumps(
        {"email": f"bench-{secrets.token_hex(4)}@example.com", "password": "correct horse"}
    )
    reply = await request_once(
        port, "POST", "/api/auth/register", {"Content-Type": "application/json"}, body
    )
    if reply.status != 201:
        raise RuntimeError(f"register answered {reply.status}: {reply.body[:200]!r}")
    for header in reply.header_values("set-cookie"):
        name, _, rest = header.partition("=")
        if name.strip() == SESSION_COOKIE:
            answer = orjson.loads(reply.body)
            cookie = rest.split(";", 1)[0].strip('"')
            return cookie, uuid.UUID(answer["id"]), answer["csrf_token"]
    raise RuntimeError("register set no session cookie")


async def make_key(port: int, cookie: str, csrf: str) -> str:
    """An API key of the signed-in user, made through hearth's own route."""
    reply = await request_once(
        port,
        "POST",
        "/api/keys",
        {
            "Content-Type": "application/json",
            "Cookie": f"{SESSION_COOKIE}={cookie}; hearth_csrf={csrf}",
            "X-CSRF-Token": csrf,
        },
        orjson.dumps({"name": "bench"}),
    )
    if reply.status != 201:
        raise RuntimeError(f"making a key answered {reply.status}: {reply.body[:200]!r}")
    key: str = orjson.loads(reply.body)["key"]
    return key


_WORD_TEXT = (
    "the a of to and in is it that for on with as this be are you can not or by from at an"
    " we if will use function model request server database query session token cookie chat"
    " message response latency throughput cache index migration schema column row table"
    " python async await event loop worker process thread memory disk network retry timeout"
    " error value result argument config provider stream upload file image document search"
    " naïve café déjà-vu résumé über 東京 🙂"
)
_WORDS = tuple(_WORD_TEXT.split())


def _prose(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + "."


async def seed_chat(engine: AsyncEngine, user_id: uuid.UUID, count: int) -> uuid.UUID:
    """A chat of `count` messages, user and assistant in turn, a tool call every 4th answer."""
    rng = random.Random(20240601)
    start = datetime.now(UTC) - timedelta(minutes=count + 5)
    async with session_factory(engine)() as db:
        chat = Chat(
            user_id=user_id,
            title="Benchmark: tuning a slow query",
            model=CHAT_MODEL,
            created_at=start,
            updated_at=start + timedelta(minutes=count),
        )
        db.add(chat)
        await db.flush()
        messages = []
        for index in range(count):
            at = start + timedelta(minutes=index, seconds=rng.random())
            if index % 2 == 0:
                messages.append(
                    Message(
                        chat_id=chat.id,
                        role="user",
                        content=_prose(rng, 80, 400),
                        created_at=at,
                        meta={},
                    )
                )
                continue
            messages.append(
                Message(
                    chat_id=chat.id,
                    role="assistant",
                    content=_prose(rng, 250, 900),
                    reasoning=_prose(rng, 120, 300) if index % 3 == 0 else None,
                    model=CHAT_MODEL,
                    input_tokens=rng.randint(500, 20_000),
                    output_tokens=rng.randint(50, 800),
                    cache_read_tokens=rng.randint(0, 15_000),
                    cache_write_tokens=rng.randint(0, 2_000),
                    created_at=at,
                    meta={},
                )
            )
        db.add_all(messages)
        await db.flush()
        link_in_order(chat, messages)
        answers = [message for message in messages if message.role == "assistant"]
        db.add_all(
            ChatLlmTool(
                chat_id=chat.id,
                message_id=message.id,
                tool_call_id=f"call_{rng.getrandbits(64):016x}",
                name=rng.choice(("web_search", "read_file", "run_python")),
                arguments={"query": _prose(rng, 20, 80), "max_results": 5, "lang": "en"},
                status="done",
                result=_prose(rng, 150, 600),
                result_type="text",
                created_at=message.created_at,
                updated_at=message.created_at,
            )
            for number, message in enumerate(answers, start=1)
            if number % 4 == 0
        )
        await db.commit()
        return chat.id


# --------------------------------------------------------------------------------------------
# Measuring and reporting.
# --------------------------------------------------------------------------------------------


@dataclass
class Pair:
    name: str
    hearth: str
    bare: str
    hearth_label: str
    bare_label: str
    hearth_headers: dict[str, str] | None = None
    """The hearth side's credentials; None: the session cookie (both sides by default)."""
    bare_headers: dict[str, str] | None = None
    target: float | None = None
    """This pair's own lowest ratio; None: `--target`."""
    same_answer: bool = True
    """Whether the two answers must be equal JSON (the key pair's `csrf_token` differs)."""

    def sides(self, cookie: str) -> tuple[tuple[str, str, dict[str, str]], ...]:
        session = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
        return (
            (self.hearth_label, self.hearth, self.hearth_headers or session),
            (self.bare_label, self.bare, self.bare_headers or session),
        )


@dataclass
class Totals:
    sample: Sample = field(default_factory=Sample)
    rounds: list[float] = field(default_factory=list)


async def verify(port: int, pairs: list[Pair], cookie: str) -> list[str]:
    """One request to each route; a line per pair saying whether the two answers agree."""
    lines = []
    for pair in pairs:
        (_, hearth, ours_headers), (_, bare, bare_headers) = pair.sides(cookie)
        ours = await request_once(port, "GET", hearth, ours_headers)
        twin = await request_once(port, "GET", bare, bare_headers)
        if ours.status != 200 or twin.status != 200:
            lines.append(
                f"WARNING {pair.name}: {hearth} answered {ours.status}, "
                f"{bare} answered {twin.status}"
            )
        elif pair.same_answer and orjson.loads(ours.body) != orjson.loads(twin.body):
            lines.append(
                f"WARNING {pair.name}: the two answers differ as JSON "
                f"({len(ours.body)} and {len(twin.body)} bytes); the comparison is not fair"
            )
        else:
            same = "byte-identical" if ours.body == twin.body else "equal JSON"
            if not pair.same_answer:
                same = "the same user"
            lines.append(f"check {pair.name}: both 200, {same}, {len(ours.body):,} bytes")
    return lines


async def measure(
    port: int, pairs: list[Pair], cookie: str, args: argparse.Namespace
) -> dict[str, Totals]:
    """Totals per route label, each pair's two sides measured right beside each other."""
    requests = {
        label: build_request("GET", path, headers)
        for pair in pairs
        for label, path, headers in pair.sides(cookie)
    }
    totals = {label: Totals() for label in requests}

    async def once(label: str, seconds: float) -> Sample:
        return await run_load(
            port,
            requests[label],
            connections=args.connections,
            seconds=seconds,
            max_requests=args.max_requests,
        )

    for label in requests:
        await once(label, args.warmup)
    for number in range(args.rounds):
        for pair in pairs:
            labels = [label for label, _, _ in pair.sides(cookie)]
            for label in labels if number % 2 == 0 else labels[::-1]:
                sample = await once(label, args.seconds)
                totals[label].sample.merge(sample)
                totals[label].rounds.append(sample.rate)
        print(f"  round {number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return totals


def report(
    args: argparse.Namespace, pairs: list[Pair], totals: dict[str, Totals], checks: list[str]
) -> bool:
    """Print the figures; True when every pair meets the target without errors."""
    print()
    print(
        f"hearth API overhead on {args.db}: chat of {args.messages} messages, one uvicorn "
        f"worker ({_server_stack()}), {LOOPBACK}"
    )
    print(
        f"client: separate process, {args.connections} keep-alive connections, "
        f"{args.rounds} rounds x {args.seconds:g} s per route after {args.warmup:g} s warm-up; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    for line in checks:
        print(line)
    print()
    print(
        f"{'route':<28}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'requests':>10}{'errors':>7}"
        f"{'client CPU':>12}"
    )
    for pair in pairs:
        for label in (pair.hearth_label, pair.bare_label):
            sample = totals[label].sample
            ordered = sorted(sample.latencies_ns)
            p50, p99 = percentile(ordered, 0.50) / 1e6, percentile(ordered, 0.99) / 1e6
            client = sample.client_cpu / sample.elapsed if sample.elapsed else 0.0
            print(
                f"{label:<28}{sample.rate:>9.1f}{p50:>9.2f}{p99:>9.2f}{sample.requests:>10,}"
                f"{sample.errors:>7}{client:>11.0%}"
            )
    print()
    print(f"{'pair':<6}{'hearth/bare req/s':>18}   {'per round':<20}{'target':>8}  result")
    passed = True
    for pair in pairs:
        ours, bare = totals[pair.hearth_label], totals[pair.bare_label]
        ratio = ours.sample.rate / bare.sample.rate if bare.sample.rate else 0.0
        lowest = args.target if pair.target is None else pair.target
        rounds = " ".join(
            f"{a / b:.2f}" if b else "-" for a, b in zip(ours.rounds, bare.rounds, strict=True)
        )
        errors = ours.sample.errors + bare.sample.errors
        ok = ratio >= lowest and errors == 0
        passed &= ok
        verdict = "PASS" if ok else ("FAIL (errors)" if errors else "FAIL")
        target = f">= {lowest:.2f}"
        print(f"{pair.name:<6}{ratio:>18.3f}   {rounds:<20}{target:>8}  {verdict}")
    return passed


def _server_stack() -> str:
    """What uvicorn's `auto` settings pick in this environment."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"{loop}, {http}"


async def orchestrate(args: argparse.Namespace) -> bool:
    workdir = Path(tempfile.mkdtemp(prefix="hearth-bench-"))
    try:
        async with fresh_database(args.db, args.pg_url, workdir, "api") as url:
            engine = create_engine(url)
            try:
                await upgrade(engine)
            finally:
                await engine.dispose()
            port = free_port()
            server = start_server(url, workdir, port)
            try:
                await wait_ready(port, server)
                cookie, user_id, csrf = await register(port)
                key = await make_key(port, cookie, csrf)
                engine = create_engine(url)
                try:
                    chat_id = await seed_chat(engine, user_id, args.messages)
                finally:
                    await engine.dispose()
                pairs = [
                    Pair("me", "/api/auth/me", "/bare/me", "GET /api/auth/me", "GET /bare/me"),
                    Pair(
                        "chat",
                        f"/api/chats/{chat_id}",
                        f"/bare/chats/{chat_id}",
                        "GET /api/chats/{id}",
                        "GET /bare/chats/{id}",
                    ),
                    Pair(
                        "key",
                        "/api/auth/me",
                        "/api/auth/me",
                        "GET /api/auth/me (key)",
                        "GET /api/auth/me (cookie)",
                        hearth_headers={"Authorization": f"Bearer {key}"},
                        target=0.9,
                        same_answer=False,
                    ),
                ]
                checks = await verify(port, pairs, cookie)
                for line in checks:
                    if line.startswith("WARNING"):
                        print(line, file=sys.stderr, flush=True)
                totals = await measure(port, pairs, cookie, args)
                if server.poll() is not None:
                    raise RuntimeError("the server exited during the run")
            finally:
                stop_server(server)
            return report(args, pairs, totals, checks)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# `--usage`: the admin usage report over a million request-log rows.
# --------------------------------------------------------------------------------------------

SHIPPED_PROVIDERS = Path(__file__).resolve().parent.parent / "config" / "providers.yaml"
USAGE_MODELS = (
    "anthropic/claude-sonnet-4-5",
    "openai/gpt-4.1",
    "openai/gpt-4.1-mini",
    "moonshot/k3",  # no pricing
)
_TOTALS_SQL = """
INSERT INTO usage_daily (user_id, day, model, requests, input_tokens, output_tokens,
                         cache_read_tokens, cache_write_tokens)
SELECT user_id, {day}, model, count(*), sum(input_tokens), sum(output_tokens),
       sum(cache_read_tokens), sum(cache_write_tokens)
FROM llm_requests GROUP BY user_id, {day}, model
"""
_DIRECT_SQL = """
SELECT user_id, model, count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),
       sum(cache_write_tokens)
FROM llm_requests WHERE started_at >= :first AND started_at < :after GROUP BY user_id, model
"""


async def seed_usage(
    engine: AsyncEngine, users: int, rows: int, days: int, now: datetime
) -> list[uuid.UUID]:
    """`users` users and `rows` request-log rows over the last `days` days, with the totals
    the request log keeps beside them (built in one statement, as the migration builds them)."""
    rng = random.Random(7)
    ids = [uuid.uuid4() for _ in range(users)]
    async with engine.begin() as connection:
        await connection.execute(
            User.__table__.insert(),
            [
                {
                    "id": user_id,
                    "email": f"user-{n}@example.com",
                    "password_hash": "-",
                    "display_name": f"User {n}",
                    "is_admin": False,
                    "disabled": False,
                    "created_at": now,
                }
                for n, user_id in enumerate(ids)
            ],
        )
    batch = 20_000
    for start in range(0, rows, batch):
        values = []
        for _ in range(min(batch, rows - start)):
            cached = rng.randint(0, 20_000)
            values.append(
                {
                    "user_id": rng.choice(ids),
                    "model": rng.choice(USAGE_MODELS),
                    "provider": "bench",
                    "purpose": "round",
                    "started_at": now - timedelta(seconds=rng.randint(0, days * 86_400 - 1)),
                    "duration_ms": rng.randint(200, 9_000),
                    "input_tokens": cached + rng.randint(100, 20_000),
                    "output_tokens": rng.randint(10, 2_000),
                    "cache_read_tokens": cached,
                    "cache_write_tokens": 0,
                }
            )
        async with engine.begin() as connection:
            await connection.execute(LlmRequest.__table__.insert(), values)
        print(f"  {start + len(values):,} request rows", file=sys.stderr, flush=True)
    postgres = engine.dialect.name == "postgresql"
    day = "CAST(started_at AT TIME ZONE 'UTC' AS DATE)" if postgres else "date(started_at)"
    async with engine.begin() as connection:
        await connection.execute(text(_TOTALS_SQL.format(day=day)))
        if postgres:
            await connection.execute(text("ANALYZE"))
    return ids


async def _timed(call: Callable[[], Coroutine[Any, Any, Any]], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)


async def usage_figures(args: argparse.Namespace) -> bool:
    workdir = Path(tempfile.mkdtemp(prefix="hearth-bench-"))
    now = datetime.now(UTC)
    try:
        async with fresh_database(args.db, args.pg_url, workdir, "usage") as url:
            engine = create_engine(url)
            try:
                await upgrade(engine)
                started = time.perf_counter()
                await seed_usage(engine, args.users, args.requests, 30, now)
                seeded = time.perf_counter() - started
                async with engine.connect() as connection:
                    totals = await connection.scalar(text("SELECT count(*) FROM usage_daily"))
            finally:
                await engine.dispose()
            port = free_port()
            server = start_server(url, workdir, port, SHIPPED_PROVIDERS.read_text())
            try:
                await wait_ready(port, server)
                cookie, admin_id, _ = await register(port)
                engine = create_engine(url)
                try:
                    async with engine.begin() as connection:
                        await connection.execute(
                            text("UPDATE users SET is_admin = :yes WHERE id = :id"),
                            {
                                "yes": True,
                                "id": admin_id if args.db == "postgresql" else admin_id.hex,
                            },
                        )
                finally:
                    await engine.dispose()
                headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
                path = "/api/admin/usage?group_by=user"
                first = await request_once(port, "GET", path, headers, wait=60)
                if first.status != 200:
                    raise RuntimeError(f"{path} answered {first.status}: {first.body[:200]!r}")
                report_rows = orjson.loads(first.body)
                route = await _timed(
                    lambda: request_once(port, "GET", path, headers, wait=60), args.usage_runs
                )
            finally:
                stop_server(server)
            # The same figures summed from the request rows themselves, through the index that
            # serves that query best: what the report would cost without the totals.
            engine = create_engine(url)
            try:
                async with engine.begin() as connection:
                    await connection.execute(
                        text(
                            "CREATE INDEX bench_direct ON llm_requests (user_id, model, "
                            "started_at, input_tokens, output_tokens, cache_read_tokens, "
                            "cache_write_tokens)"
                        )
                    )
                    await connection.execute(text("ANALYZE"))
                bounds = {"first": now - timedelta(days=30), "after": now + timedelta(days=1)}
                if args.db == "sqlite":
                    bounds = {k: v.replace(tzinfo=None).isoformat(" ") for k, v in bounds.items()}

                async def direct() -> None:
                    async with engine.connect() as connection:
                        (await connection.execute(text(_DIRECT_SQL), bounds)).all()

                floor = await _timed(direct, max(5, args.usage_runs // 4))
            finally:
                await engine.dispose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    p50 = percentile(route, 0.5)
    print()
    print(
        f"admin usage on {args.db}: {args.requests:,} request-log rows, {args.users:,} users, "
        f"{len(USAGE_MODELS)} models over 30 days -> {totals:,} rows of totals "
        f"(seeded in {seeded:.0f} s); Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print(
        f"GET {path}: {len(report_rows['items']):,} users in the answer, {args.usage_runs} "
        f"requests: p50 {p50:.1f} ms, p90 {percentile(route, 0.9):.1f} ms, "
        f"max {route[-1]:.1f} ms (target p50 <= {args.usage_target:.0f} ms)"
    )
    print(
        f"the same sums from the request rows (covering index, no HTTP): "
        f"p50 {percentile(floor, 0.5):.1f} ms"
    )
    ok = p50 <= args.usage_target
    print("PASS" if ok else "FAIL")
    return ok


def _run(main: Coroutine[Any, Any, bool]) -> bool:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="an existing database on the server where the benchmark's own one is created",
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per route and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds per route, once")
    parser.add_argument("--connections", type=int, default=8, help="requests in flight")
    parser.add_argument(
        "--max-requests", type=int, default=1_000_000, help="cap per route and round"
    )
    parser.add_argument("--messages", type=int, default=200, help="messages in the chat")
    parser.add_argument("--target", type=float, default=0.7, help="lowest hearth/bare ratio")
    parser.add_argument(
        "--usage", action="store_true", help="measure the admin usage report instead"
    )
    parser.add_argument("--requests", type=int, default=1_000_000, help="--usage: request rows")
    parser.add_argument("--users", type=int, default=1_000, help="--usage: users")
    parser.add_argument("--usage-runs", type=int, default=40, help="--usage: requests timed")
    parser.add_argument("--usage-target", type=float, default=150.0, help="--usage: p50 ms")
    hidden = argparse.SUPPRESS
    parser.add_argument("--serve", action="store_true", help=hidden)
    parser.add_argument("--database-url", help=hidden)
    parser.add_argument("--data-dir", help=hidden)
    parser.add_argument("--secret-key", help=hidden)
    parser.add_argument("--providers-file", help=hidden)
    parser.add_argument("--port", type=int, help=hidden)
    args = parser.parse_args(argv)
    if not args.serve:
        limits = (
            (0 < args.seconds <= 600, "--seconds must be in (0, 600]"),
            (1 <= args.rounds <= 100, "--rounds must be in [1, 100]"),
            (0 < args.warmup <= 600, "--warmup must be in (0, 600]"),
            (1 <= args.connections <= 256, "--connections must be in [1, 256]"),
            (1 <= args.max_requests <= 100_000_000, "--max-requests must be in [1, 1e8]"),
            (1 <= args.messages <= 10_000, "--messages must be in [1, 10000]"),
        )
        for ok, message in limits:
            if not ok:
                parser.error(message)
        if args.db == "postgresql" and make_url(args.pg_url).host not in (LOOPBACK, "localhost"):
            parser.error("--pg-url must point at 127.0.0.1")
    return args


def main() -> None:
    args = parse_args()
    if args.serve:
        serve(args)
        return
    sys.exit(0 if _run(usage_figures(args) if args.usage else orchestrate(args)) else 1)


if __name__ == "__main__":
    main()
