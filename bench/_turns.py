"""Pieces the turn benchmarks share: a streaming HTTP/1.1 client and the processes around it.

`Connection` is one keep-alive socket to `127.0.0.1` that sends a prebuilt request and reads
the response as it arrives, `Content-Length` or chunked, splitting server-sent events as their
bytes come in and stamping each with the `perf_counter_ns()` of the read that completed it. It
does no other work per event (payloads are parsed after the stream ended), so the time it
reports for "the first text byte" is when those bytes reached this process, not when some
parser got round to them.

Also here: a fresh database per run (a SQLite file, or a randomly named PostgreSQL database
that is dropped afterwards), starting and stopping hearth and the fake provider as processes of
their own, reading a process's CPU time from `/proc`, and nearest-rank percentiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import asyncpg
import orjson
from _loadgen import HEADER_END, LOOPBACK, build_request
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
"""The repository: hearth and the fake providers run from here."""

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
SESSION_COOKIE = "hearth_session"
CSRF_COOKIE = "hearth_csrf"
CSRF_HEADER = "X-CSRF-Token"

# --------------------------------------------------------------------------------------------
# HTTP/1.1 with streamed bodies.
# --------------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request and its response as they crossed the wire, with arrival times."""

    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    sent_ns: int = 0
    """`perf_counter_ns()` just before the request was written."""
    events: list[tuple[int, bytes]] = field(default_factory=list)
    """(arrival ns, `data:` payload) of each server-sent event, in order."""
    body: bytes = b""
    """The whole body of a response that is not an event stream."""
    ended_ns: int = 0
    complete: bool = False
    """The body ended as HTTP says it should (last chunk, or `Content-Length` bytes)."""
    error: str | None = None

    def header_values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def json(self) -> Any:
        return orjson.loads(self.body)


def _parse_head(head: bytes) -> tuple[int, list[tuple[str, str]], int | None, bool]:
    """Status, headers, `Content-Length` (None if absent) and whether the body is chunked."""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: list[tuple[str, str]] = []
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        if ":" not in line:
            continue
        key, value = line.split(":", 1)
        key, value = key.strip(), value.strip()
        headers.append((key, value))
        lowered = key.lower()
        if lowered == "content-length":
            length = int(value)
        elif lowered == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if status in (204, 304) or status < 200:
        length = 0  # a response with no body, whatever its headers say
    return status, headers, length, chunked


class Connection:
    """A keep-alive HTTP/1.1 connection to 127.0.0.1 that reads responses as they stream."""

    def __init__(
        self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.port = port
        self.reader = reader
        self.writer = writer
        self.usable = True

    @classmethod
    async def open(cls, port: int, wait: float = 10.0) -> Connection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(LOOPBACK, port, limit=1 << 22), wait
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(port, reader, writer)

    async def reopen(self) -> None:
        """A new socket in place of this one (the server may close an idle keep-alive)."""
        self.close()
        fresh = await Connection.open(self.port)
        self.reader, self.writer, self.usable = fresh.reader, fresh.writer, True

    def close(self) -> None:
        self.usable = False
        self.writer.close()

    async def _body(self, length: int | None, chunked: bool) -> AsyncIterator[bytes]:
        reader = self.reader
        if chunked:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailer fields
                    return
                data = await reader.readexactly(size + 2)
                yield data[:-2]
        elif length is not None:
            if length:
                yield await reader.readexactly(length)
        else:  # delimited by the end of the connection
            self.usable = False
            while chunk := await reader.read(1 << 16):
                yield chunk

    async def exchange(
        self, request: bytes, *, wait: float, answered: asyncio.Event | None = None
    ) -> Exchange:
        """Send `request` and read its whole response, within `wait` seconds.

        A `text/event-stream` body is split into events as it arrives; any other body is kept
        whole. A failure (time-out, dropped connection) is recorded on the result, not raised,
        and leaves the connection unusable. `answered`, when given, is set as the response's
        head arrives (or as the exchange fails without one).
        """
        if not self.usable:
            raise RuntimeError("the connection is closed")
        result = Exchange()
        clock = time.perf_counter_ns
        events = result.events
        try:
            async with asyncio.timeout(wait):
                result.sent_ns = clock()
                self.writer.write(request)
                head = await self.reader.readuntil(HEADER_END)
                result.status, result.headers, length, chunked = _parse_head(head)
                if answered is not None:
                    answered.set()
                streaming = any(
                    key.lower() == "content-type" and value.startswith("text/event-stream")
                    for key, value in result.headers
                )
                pending = b""
                pieces: list[bytes] = []
                async for piece in self._body(length, chunked):
                    if not streaming:
                        pieces.append(piece)
                        continue
                    arrived = clock()
                    pending += piece
                    while (end := pending.find(b"\n\n")) >= 0:
                        event, pending = pending[:end], pending[end + 2 :]
                        for line in event.split(b"\n"):
                            if line.startswith(b"data:"):
                                events.append((arrived, line[5:].lstrip()))
                result.body = b"".join(pieces)
                result.complete = True
        except TimeoutError:
            result.error = f"no complete response within {wait:g} s"
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            result.error = f"{type(e).__name__}: {e}"
        result.ended_ns = clock()
        if answered is not None:
            answered.set()
        if not result.complete:
            self.close()
        return result

    async def call(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        payload: Any = None,
        wait: float = 30.0,
    ) -> Exchange:
        """A JSON request (`payload`, when given, as the body) and its whole response.

        A connection the server closed while it was idle is replaced, and the request sent once
        more on the new one when the old one got no answer at all.
        """
        body = b"" if payload is None else orjson.dumps(payload)
        all_headers = dict(headers or {})
        if payload is not None:
            all_headers["Content-Type"] = "application/json"
        request = build_request(method, path, all_headers, body)
        if not self.usable:
            await self.reopen()
        reply = await self.exchange(request, wait=wait)
        if reply.status == 0 and not self.usable:
            await self.reopen()
            reply = await self.exchange(request, wait=wait)
        return reply


# --------------------------------------------------------------------------------------------
# Signing up.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    """A signed-in user: its id and the headers its requests carry."""

    user_id: str
    session: str
    csrf: str

    def headers(self) -> dict[str, str]:
        return {
            "Cookie": f"{SESSION_COOKIE}={self.session}; {CSRF_COOKIE}={self.csrf}",
            CSRF_HEADER: self.csrf,
        }


def _cookies(exchange: Exchange) -> dict[str, str]:
    found = {}
    for header in exchange.header_values("set-cookie"):
        name, _, rest = header.partition("=")
        found[name.strip()] = rest.split(";", 1)[0].strip('"')
    return found


async def register(conn: Connection) -> Account:
    """Sign up through hearth's own route."""
    reply = await conn.call(
        "POST",
        "/api/auth/register",
        payload={"email": f"bench-{secrets.token_hex(4)}@example.com", "password": "correct horse"},
    )
    if reply.status != 201:
        raise RuntimeError(f"register answered {reply.status}: {reply.body[:200]!r}")
    cookies = _cookies(reply)
    if SESSION_COOKIE not in cookies or CSRF_COOKIE not in cookies:
        raise RuntimeError("register set no session or CSRF cookie")
    return Account(str(reply.json()["id"]), cookies[SESSION_COOKIE], cookies[CSRF_COOKIE])


# --------------------------------------------------------------------------------------------
# Processes.
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def start_process(
    command: Sequence[str],
    log: IO[bytes],
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
) -> subprocess.Popen[bytes]:
    """`command` (`python -m ...` finds its packages in `cwd` first), its output to `log`."""
    return subprocess.Popen(
        list(command),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGINT (a graceful stop), then SIGKILL if it has not exited within 15 s."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


async def wait_answering(
    port: int, path: str, process: subprocess.Popen[bytes], within: float = 60.0
) -> None:
    """Until GET `path` answers 200, the process exits, or `within` seconds pass."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with status {process.returncode}")
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            conn = await Connection.open(port, wait=2)
            try:
                if (await conn.call("GET", path, wait=5)).status == 200:
                    return
            finally:
                conn.close()
        await asyncio.sleep(0.1)
    raise RuntimeError(f"nothing answered GET {path} on port {port} within {within:.0f} s")


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds the process has used so far (None where /proc is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def revision(tree: Path) -> str:
    """The git commit `tree` is at, and whether its `app/` has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--", "app"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"{tree} (not a git checkout)"
    return f"{tree} at {head}" + (" with uncommitted changes in app/" if changed else "")


# --------------------------------------------------------------------------------------------
# Databases.
# --------------------------------------------------------------------------------------------


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def fresh_database(
    backend: str, pg_url: str, workdir: Path, label: str
) -> AsyncIterator[str]:
    """A new, empty database; yields its SQLAlchemy URL and drops it (PostgreSQL) after."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{workdir / f'{label}.db'}"
        return
    name = f"hearth_bench_{label}_{os.getpid()}_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(_asyncpg_dsn(pg_url), timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(_asyncpg_dsn(pg_url), timeout=10)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


# --------------------------------------------------------------------------------------------
# Figures.
# --------------------------------------------------------------------------------------------


def quantile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def median_interval(values: Sequence[float], level: float = 0.9) -> tuple[float, float]:
    """A distribution-free interval for the median of what `values` sample: the order
    statistics x(k) and x(n+1-k) for the largest k that still covers it with probability
    `level` (each value falls either side of the median with even odds, so the count below it
    is binomial). NaN both when `values` are too few for that level."""
    ordered = sorted(values)
    n = len(ordered)
    chosen = 0
    for k in range(1, n // 2 + 1):
        if sum(math.comb(n, i) for i in range(k, n - k + 1)) / 2**n < level:
            break
        chosen = k
    if not chosen:
        return math.nan, math.nan
    return ordered[chosen - 1], ordered[n - chosen]
