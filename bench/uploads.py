"""A 1 GiB upload and its download through hearth, each against a bare twin in the same process.

Measured: the throughput (MiB/s) of

* `POST /api/uploads`, one multipart `file` part of `--size` bytes (1 GiB by default), which
  hearth parses as it streams in, hashes (SHA-256), writes to a temporary file, fsyncs and
  renames into place before it records the row and answers 201, and
* `GET /data/<id>/big.bin`, the same file served back (hearth's session lookup, ownership query
  and contained open, then Starlette's FileResponse),

each next to a *bare twin*: `POST /twin/upload`, a plain Starlette route that streams the
request body (`request.stream()`) into a file in 1 MiB writes, each write in a worker thread,
then fsyncs it; and `GET /twin/file`, Starlette's FileResponse of the very file hearth stored.
Both upload routes get the same bytes over the wire: the same multipart body, which the twin
writes out whole (framing included, a few hundred bytes more) without parsing it. Both make the
bytes durable before they answer, so the pair differs only in what hearth does on the way (its
multipart parser, hashing, its per-chunk thread hops, authentication), not in whether the disk
is waited for. The twin reports how long its fsync took, to show what part of a run is the disk.

Also measured: the server's resident memory. Before every run the script resets the server's
peak (`/proc/<pid>/clear_refs`, "5", which sets VmHWM to the current VmRSS) and reads VmRSS as
the baseline; during the run a thread polls VmRSS every 20 ms; afterwards VmHWM gives the exact
peak. Growth is the peak over the baseline. (Where the reset is not allowed, only the polled
peak is used, and the report says so.) The page cache is not part of RSS, so a file passing
through the kernel does not count; only what the process holds does.

Why it is shaped so:

* One server process (one uvicorn worker, uvloop and httptools when installed, on loopback)
  serves both sides: a small ASGI dispatcher sends `/twin/*` to the twins' own Starlette app
  and everything else to hearth's app, so the twins sit outside hearth's routes and middleware
  (BodyLimitMiddleware's 4 MiB ceiling included) while sharing its process, event loop, thread
  pool, ASGI server and disk. Its CPU time and memory are read from /proc.
* The load generator is this process, with blocking sockets: the upload body is one fixed 1 MiB
  random block sent again and again (`sendall` of the same buffer, so the client holds 1 MiB,
  not 1 GiB, and does no work per byte), the download is read into one reused 1 MiB buffer and
  dropped. The report shows the client's CPU share of each run, to show it is not the limit.
* Runs alternate: each round uploads on both sides, then downloads on both sides, the order
  flipped every round, so drift (page cache, writeback, other load) falls on both alike. Between
  runs the script deletes what the last upload stored (outside the timing) and waits for the
  disk to settle (`sync`). Every download reads the file of the first round's hearth upload,
  which is in the page cache by then: the download pair measures the servers, not the disk.
* Before the timed rounds, one small upload and download on each side warms both paths.
* Every answer is checked: hearth's 201 must report the size and SHA-256 of what was sent (the
  client computes it once, before timing), the twin's the size, and each download must deliver
  exactly the file's size.

The figure per direction is the median throughput over the rounds (the best is shown too); the
ratio is hearth's median over the twin's. Targets: each ratio at least 0.8, and hearth's peak
RSS growth at most 64 MiB in either direction. The exit status is 0 whatever the verdicts: it
is a measurement.

Everything lives in a temporary folder (a fresh SQLite database migrated to head, the data
folder, the server's log), removed at the end unless `--keep`. It needs three times `--size` of
free space (and at least 3 GiB).

    .venv/bin/python bench/uploads.py
    .venv/bin/python bench/uploads.py --size 256MiB --rounds 5 --dir ./var
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import os
import platform
import random
import re
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import orjson
from _loadgen import HEADER_END, LOOPBACK, build_request
from _turns import (
    ROOT,
    Account,
    Connection,
    cpu_seconds,
    free_port,
    register,
    revision,
    start_process,
    stop_process,
    wait_answering,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.main import create_app
from app.settings import Settings

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

FILENAME = "big.bin"
BLOCK_BYTES = MiB
"""The random block the upload body repeats; also the twin's write size and the read size."""
WRITE_BYTES = MiB
WARMUP_BYTES = 8 * MiB
UPLOAD_MARGIN = 64 * MiB
"""hearth's per-file limit is set this far above `--size`."""
SAMPLE_SECONDS = 0.02
SETTLE_SECONDS = 0.5
SOCKET_TIMEOUT = 600.0
MIN_FREE_BYTES = 3 * GiB

RATIO_TARGET = 0.8
MEMORY_TARGET = 64 * MiB

TWIN_PREFIX = "/twin/"
TWIN_DIR = "twin"
SIDES = ("hearth", "twin")
SEED = 20240601

PROVIDERS_YAML = """\
providers:
  - id: demo
    kind: demo
    models:
      - id: scripted
        context_window: 32000
        max_output_tokens: 1024
"""
MCP_YAML = "servers: []\n"

# --------------------------------------------------------------------------------------------
# The server: hearth's app and the twins, in one process.
# --------------------------------------------------------------------------------------------


def _write_all(handle: io.FileIO, data: memoryview) -> None:
    """All of `data` to an unbuffered file (a raw write may take less than it is given)."""
    while data:
        written = handle.write(data)
        data = data[written or 0 :]


async def twin_upload(request: Request) -> Response:
    """The request body, as it streams in, to a new file in 1 MiB writes; then fsync."""
    data_dir: Path = request.app.state.data_dir
    path = data_dir / TWIN_DIR / f"{uuid.uuid4().hex}.bin"
    handle = await anyio.to_thread.run_sync(io.FileIO, path, "wb")
    buffer = bytearray(WRITE_BYTES)
    view = memoryview(buffer)
    filled = size = 0
    try:
        async for chunk in request.stream():
            data = memoryview(chunk)
            offset = 0
            while offset < len(data):
                take = min(len(data) - offset, WRITE_BYTES - filled)
                view[filled : filled + take] = data[offset : offset + take]
                filled += take
                offset += take
                if filled == WRITE_BYTES:
                    await anyio.to_thread.run_sync(_write_all, handle, view)
                    size += filled
                    filled = 0
        if filled:
            await anyio.to_thread.run_sync(_write_all, handle, view[:filled])
            size += filled
        started = time.perf_counter()
        await anyio.to_thread.run_sync(os.fsync, handle.fileno())
        fsync_seconds = time.perf_counter() - started
    except BaseException:
        await anyio.to_thread.run_sync(handle.close)
        path.unlink(missing_ok=True)
        raise
    await anyio.to_thread.run_sync(handle.close)
    relative = path.relative_to(data_dir).as_posix()
    return JSONResponse({"path": relative, "size": size, "fsync_seconds": fsync_seconds})


async def twin_file(request: Request) -> Response:
    """Starlette's FileResponse of `?path=` (relative to the data folder, kept inside it)."""
    data_dir: Path = request.app.state.data_dir
    relative = PurePosixPath(request.query_params.get("path", ""))
    if relative.is_absolute() or not relative.parts or ".." in relative.parts:
        return Response(status_code=404)
    return FileResponse(data_dir / relative, media_type="application/octet-stream")


def build_server_app(settings: Settings) -> ASGIApp:
    """hearth's app, with `/twin/*` sent to the twins' own Starlette app instead."""
    hearth = create_app(settings)
    twins = Starlette(
        routes=[
            Route(f"{TWIN_PREFIX}upload", twin_upload, methods=["POST"]),
            Route(f"{TWIN_PREFIX}file", twin_file, methods=["GET"]),
        ]
    )
    data_dir = Path(settings.data_dir).resolve()
    (data_dir / TWIN_DIR).mkdir(parents=True, exist_ok=True)
    twins.state.data_dir = data_dir

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(TWIN_PREFIX):
            await twins(scope, receive, send)
        else:
            await hearth(scope, receive, send)  # lifespan included

    return dispatch


def serve(port: int) -> None:
    """Run the server; its settings come from HEARTH_* variables set by the orchestrator."""
    import uvicorn

    uvicorn.run(
        build_server_app(Settings(_env_file=None)),
        host=LOOPBACK,
        port=port,
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )


# --------------------------------------------------------------------------------------------
# The body: a fixed random block, repeated.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """A multipart body of one `file` part: `size` bytes of `block` repeated, with framing."""

    size: int
    block: bytes
    boundary: str
    head: bytes
    tail: bytes

    @classmethod
    def make(cls, size: int, block: bytes) -> Body:
        boundary = f"hearth-bench-{secrets.token_hex(12)}"
        head = (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{FILENAME}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        return cls(size, block, boundary, head, f"\r\n--{boundary}--\r\n".encode())

    @property
    def length(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def sha256(self) -> str:
        """The SHA-256 of the file's bytes (not the framing)."""
        digest = hashlib.sha256()
        whole, rest = divmod(self.size, len(self.block))
        for _ in range(whole):
            digest.update(self.block)
        digest.update(self.block[:rest])
        return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# HTTP/1.1 over blocking sockets: cheap per byte, one connection per request.
# --------------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    """The body when kept; empty when it was read and dropped (see `received`)."""
    received: int

    def json(self) -> Any:
        return orjson.loads(self.body)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((LOOPBACK, port), timeout=SOCKET_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_reply(sock: socket.socket, keep: bool) -> Reply:
    """One response with a Content-Length body, kept whole or counted and dropped."""
    buffer = bytearray(BLOCK_BYTES)
    view = memoryview(buffer)
    pending = b""
    while HEADER_END not in pending:
        count = sock.recv_into(buffer)
        if not count:
            raise ConnectionError("the server closed the connection before answering")
        pending += bytes(view[:count])
    head, _, first = pending.partition(HEADER_END)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if "content-length" in headers:
        length = int(headers["content-length"])
    elif status in (204, 304):
        length = 0
    else:
        raise ValueError(f"{status} answer without Content-Length")
    pieces = [first] if keep else []
    received = len(first)
    while received < length:
        count = sock.recv_into(buffer, min(len(buffer), length - received))
        if not count:
            raise ConnectionError(f"the body ended after {received:,} of {length:,} bytes")
        received += count
        if keep:
            pieces.append(bytes(view[:count]))
    return Reply(status, headers, b"".join(pieces), received)


def request(
    port: int, method: str, path: str, headers: dict[str, str], payload: bytes = b""
) -> Reply:
    """A small request and its whole answer."""
    with _connect(port) as sock:
        sock.sendall(build_request(method, path, headers, payload))
        return _read_reply(sock, keep=True)


def send_upload(port: int, path: str, headers: dict[str, str], body: Body) -> Reply:
    """POST `body`, sent block by block from the one buffer, and read the answer."""
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        f"Content-Type: {body.content_type}",
        f"Content-Length: {body.length}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    start = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body.head
    block = memoryview(body.block)
    whole, rest = divmod(body.size, len(block))
    with _connect(port) as sock:
        try:
            sock.sendall(start)
            for _ in range(whole):
                sock.sendall(block)
            sock.sendall(block[:rest])
            sock.sendall(body.tail)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early; its answer (read below) says why
        return _read_reply(sock, keep=True)


def fetch(port: int, path: str, headers: dict[str, str]) -> Reply:
    """GET `path`, its body read in 1 MiB pieces and dropped."""
    with _connect(port) as sock:
        sock.sendall(build_request("GET", path, headers))
        return _read_reply(sock, keep=False)


# --------------------------------------------------------------------------------------------
# The server's memory, from /proc.
# --------------------------------------------------------------------------------------------


def status_bytes(pid: int, name: str) -> int:
    """A `kB` field of /proc/<pid>/status (VmRSS, VmHWM), in bytes."""
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(name.encode() + b":"):
                return int(line.split()[1]) * KiB
    raise KeyError(f"no {name} in /proc/{pid}/status")


def reset_peak(pid: int) -> bool:
    """Set the process's VmHWM to its current VmRSS; False where that is not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


@dataclass
class Memory:
    baseline: int = 0
    polled_peak: int = 0
    hwm: int | None = None
    """VmHWM after the run, when the peak could be reset before it."""
    samples: int = 0

    @property
    def peak(self) -> int:
        return max(self.polled_peak, self.hwm or 0)

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


class MemoryWatch:
    """Polls a process's VmRSS every SAMPLE_SECONDS while the `with` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.memory = Memory()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._reset = False

    def __enter__(self) -> Memory:
        self._reset = reset_peak(self.pid)
        self.memory.baseline = self.memory.polled_peak = status_bytes(self.pid, "VmRSS")
        self._thread.start()
        return self.memory

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        if self._reset:
            self.memory.hwm = status_bytes(self.pid, "VmHWM")

    def _sample(self) -> None:
        self.memory.polled_peak = max(self.memory.polled_peak, status_bytes(self.pid, "VmRSS"))
        self.memory.samples += 1

    def _poll(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self._sample()


# --------------------------------------------------------------------------------------------
# Runs.
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    direction: str
    side: str
    round: int
    nbytes: int
    seconds: float
    client_cpu: float
    server_cpu: float
    memory: Memory
    fsync_seconds: float | None = None

    @property
    def mib_s(self) -> float:
        return self.nbytes / MiB / self.seconds


@dataclass
class Bench:
    port: int
    pid: int
    account: Account
    data_dir: Path
    body: Body
    sha256: str
    download_path: str = ""
    """hearth's `/data/...` URL of the file every download reads."""
    stored: str = ""
    """That file, relative to the data folder (what the twin is asked for)."""
    runs: list[Run] = field(default_factory=list)
    peak_reset: bool = True

    def settle(self) -> None:
        os.sync()
        time.sleep(SETTLE_SECONDS)

    def timed(
        self, direction: str, side: str, number: int, nbytes: int, action: Callable[[], Reply]
    ) -> tuple[Run, Reply]:
        self.settle()
        server_before = cpu_seconds(self.pid) or 0.0
        watch = MemoryWatch(self.pid)
        with watch as memory:
            client_before = time.thread_time()
            started = time.perf_counter()
            reply = action()
            seconds = time.perf_counter() - started
            client_cpu = time.thread_time() - client_before
        self.peak_reset &= memory.hwm is not None
        server_cpu = (cpu_seconds(self.pid) or 0.0) - server_before
        run = Run(direction, side, number, nbytes, seconds, client_cpu, server_cpu, memory)
        return run, reply

    # hearth

    def send_hearth(self, body: Body) -> Reply:
        reply = send_upload(self.port, "/api/uploads", self.account.headers(), body)
        if reply.status != 201:
            raise RuntimeError(f"POST /api/uploads answered {reply.status}: {reply.body[:300]!r}")
        upload = reply.json()[0]
        if upload["size"] != body.size or upload["filename"] != FILENAME:
            raise RuntimeError(f"hearth stored {upload['size']:,} bytes as {upload['filename']!r}")
        return reply

    def delete_hearth(self, upload: dict[str, Any]) -> None:
        reply = request(self.port, "DELETE", f"/api/uploads/{upload['id']}", self.account.headers())
        if reply.status != 204:
            raise RuntimeError(f"DELETE /api/uploads/{{id}} answered {reply.status}")

    def stored_path(self, upload: dict[str, Any]) -> str:
        """Where hearth keeps an upload, relative to the data folder."""
        return f"users/{self.account.user_id}/{upload['path']}"

    # the twin

    def send_twin(self, body: Body) -> Reply:
        reply = send_upload(self.port, f"{TWIN_PREFIX}upload", {}, body)
        if reply.status != 200:
            raise RuntimeError(f"POST /twin/upload answered {reply.status}: {reply.body[:300]!r}")
        if reply.json()["size"] != body.length:
            raise RuntimeError(f"the twin stored {reply.json()['size']:,} of {body.length:,} B")
        return reply

    def delete_twin(self, stored: dict[str, Any]) -> None:
        (self.data_dir / stored["path"]).unlink()

    # both

    def download(self, side: str, path: str, size: int) -> Reply:
        if side == "hearth":
            reply = fetch(self.port, path, self.account.headers())
        else:
            reply = fetch(self.port, f"{TWIN_PREFIX}file?path={quote(path)}", {})
        if reply.status != 200 or reply.received != size:
            raise RuntimeError(f"{side} download: {reply.status}, {reply.received:,} bytes")
        return reply

    def warm_up(self) -> None:
        """One small upload and download on each side, unmeasured."""
        small = Body.make(WARMUP_BYTES, self.body.block)
        upload = self.send_hearth(small).json()[0]
        self.download("hearth", upload["url"], small.size)
        self.download("twin", self.stored_path(upload), small.size)
        self.delete_hearth(upload)
        self.delete_twin(self.send_twin(small).json())

    def measure(self, rounds: int) -> None:
        body = self.body
        for number in range(rounds):
            order = SIDES if number % 2 == 0 else SIDES[::-1]
            for side in order:
                send = self.send_hearth if side == "hearth" else self.send_twin
                run, reply = self.timed("upload", side, number, body.size, partial(send, body))
                self.runs.append(run)
                if side == "twin":
                    stored = reply.json()
                    run.fsync_seconds = float(stored["fsync_seconds"])
                    self.delete_twin(stored)
                    continue
                upload = reply.json()[0]
                if upload["sha256"] != self.sha256:
                    raise RuntimeError("hearth's SHA-256 is not that of the bytes sent")
                if self.download_path:
                    self.delete_hearth(upload)
                else:  # the first one stays: every download reads it
                    self.download_path, self.stored = upload["url"], self.stored_path(upload)
            for side in order:
                path = self.download_path if side == "hearth" else self.stored
                fetch_it = partial(self.download, side, path, body.size)
                run, _ = self.timed("download", side, number, body.size, fetch_it)
                self.runs.append(run)
            print(f"  round {number + 1}/{rounds} done", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------------------------


def _mib(value: float) -> str:
    return f"{value / MiB:+.1f}"


def _filesystem(path: Path) -> str:
    """The mount holding `path` and its type, from /proc/mounts."""
    best = ("?", "?")
    longest = -1
    try:
        with open("/proc/mounts") as handle:
            for line in handle:
                mount, kind = line.split()[1:3]
                inside = path == Path(mount) or Path(mount) in path.parents
                if inside and len(mount) > longest:
                    best, longest = (mount, kind), len(mount)
    except OSError:
        pass
    return f"{best[1]} at {best[0]}"


def report(args: argparse.Namespace, bench: Bench, workdir: Path) -> None:
    size = bench.body.size
    print()
    print(
        f"hearth uploads: {size / MiB:,.0f} MiB up through POST /api/uploads and down through "
        f"GET /data, each against a bare twin"
    )
    print(
        f"server: one uvicorn worker ({_server_stack()}), {LOOPBACK}, SQLite, data on "
        f"{_filesystem(workdir)}"
    )
    print(f"code: {revision(ROOT)}")
    print(
        f"client: this process, blocking sockets, a connection per transfer; the same multipart "
        f"body to both sides (the twin stores it whole); {args.rounds} rounds, order flipped"
    )
    print(
        f"machine: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end"
    )
    if not bench.peak_reset:
        print("note: VmHWM could not be reset; peaks are from 20 ms polling of VmRSS only")
    print()
    print(
        f"{'run':<18}{'MiB/s by round':<24}{'median':>8}{'best':>8}{'server CPU':>12}"
        f"{'client CPU':>12}{'RSS base':>10}{'growth':>9}"
    )
    medians: dict[tuple[str, str], float] = {}
    bests: dict[tuple[str, str], float] = {}
    growth: dict[tuple[str, str], int] = {}
    for direction in ("upload", "download"):
        for side in SIDES:
            runs = [r for r in bench.runs if r.direction == direction and r.side == side]
            rates = [r.mib_s for r in runs]
            key = (direction, side)
            medians[key] = statistics.median(rates)
            bests[key] = max(rates)
            growth[key] = max(r.memory.growth for r in runs)
            server = sum(r.server_cpu for r in runs) / sum(r.seconds for r in runs)
            client = sum(r.client_cpu for r in runs) / sum(r.seconds for r in runs)
            base = max(r.memory.baseline for r in runs)
            by_round = " ".join(f"{rate:.0f}" for rate in rates)
            print(
                f"{direction + ' ' + side:<18}{by_round:<24}{medians[key]:>8.0f}{bests[key]:>8.0f}"
                f"{server:>11.0%} {client:>11.0%} {base / MiB:>8.0f}M {_mib(growth[key]):>8}M"
            )
    fsyncs = [r.fsync_seconds for r in bench.runs if r.fsync_seconds is not None]
    twin_up = [r.seconds for r in bench.runs if r.direction == "upload" and r.side == "twin"]
    print()
    print(
        f"(CPU: the server's or the client's CPU time over the runs' wall time, 100% = one core. "
        f"The twin's fsync took {statistics.median(fsyncs):.2f} s of its "
        f"{statistics.median(twin_up):.2f} s median upload.)"
    )
    print()
    for direction in ("upload", "download"):
        ratio = medians[(direction, "hearth")] / medians[(direction, "twin")]
        best = bests[(direction, "hearth")] / bests[(direction, "twin")]
        verdict = "PASS" if ratio >= RATIO_TARGET else "FAIL"
        print(
            f"{verdict} {direction:<8} hearth/twin throughput {ratio:.3f} (medians; best "
            f"against best {best:.3f}), target >= {RATIO_TARGET:.2f}"
        )
    worst = max(growth[("upload", "hearth")], growth[("download", "hearth")])
    verdict = "PASS" if worst <= MEMORY_TARGET else "FAIL"
    print(
        f"{verdict} memory   hearth's peak RSS growth: upload {_mib(growth[('upload', 'hearth')])}"
        f" MiB, download {_mib(growth[('download', 'hearth')])} MiB (twin: "
        f"{_mib(growth[('upload', 'twin')])}, {_mib(growth[('download', 'twin')])}), target <= "
        f"{MEMORY_TARGET / MiB:.0f} MiB"
    )


def _server_stack() -> str:
    import importlib.util

    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"{loop}, {http}"


# --------------------------------------------------------------------------------------------
# Orchestration.
# --------------------------------------------------------------------------------------------


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def _sign_up(port: int, server: Any) -> Account:
    await wait_answering(port, "/healthz", server)
    conn = await Connection.open(port)
    try:
        return await register(conn)
    finally:
        conn.close()


def run_bench(args: argparse.Namespace, workdir: Path) -> Bench:
    """Start the server on a fresh database, sign up, warm up and measure; the runs."""
    data_dir = workdir / "data"
    url = f"sqlite+aiosqlite:///{workdir / 'hearth.db'}"
    (workdir / "providers.yaml").write_text(PROVIDERS_YAML)
    (workdir / "mcp.yaml").write_text(MCP_YAML)
    body = Body.make(args.size, random.Random(SEED).randbytes(BLOCK_BYTES))
    print("  hashing the body once", file=sys.stderr, flush=True)
    sha256 = body.sha256()
    asyncio.run(_migrate(url))
    port = free_port()
    env = {
        "HEARTH_DATABASE_URL": url,
        "HEARTH_DATA_DIR": str(data_dir),
        "HEARTH_SECRET_KEY": secrets.token_urlsafe(32),
        "HEARTH_PROVIDERS_FILE": str(workdir / "providers.yaml"),
        "HEARTH_MCP_FILE": str(workdir / "mcp.yaml"),
        "HEARTH_MAX_UPLOAD_BYTES": str(args.size + UPLOAD_MARGIN),
    }
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", "--port", str(port)]
    log_path = workdir / "server.log"
    with open(log_path, "wb") as log:
        server = start_process(command, log, env=env)
        try:
            account = asyncio.run(_sign_up(port, server))
            bench = Bench(port, server.pid, account, data_dir.resolve(), body, sha256)
            print("  warming up", file=sys.stderr, flush=True)
            bench.warm_up()
            bench.measure(args.rounds)
            if server.poll() is not None:
                raise RuntimeError("the server exited during the run")
        except BaseException:
            stop_process(server)
            tail = log_path.read_text(errors="replace")[-3000:]
            if tail.strip():
                print(f"server log (last lines):\n{tail}", file=sys.stderr)
            raise
        stop_process(server)
    return bench


def orchestrate(args: argparse.Namespace) -> None:
    parent = Path(args.dir).resolve()
    parent.mkdir(parents=True, exist_ok=True)
    needed = max(MIN_FREE_BYTES, 3 * args.size)
    free = shutil.disk_usage(parent).free
    if free < needed:
        sys.exit(
            f"error: {parent} has {free / GiB:.1f} GiB free; this run needs {needed / GiB:.1f} GiB"
        )
    workdir = Path(tempfile.mkdtemp(prefix="hearth-bench-uploads-", dir=parent))
    print(f"working in {workdir}", file=sys.stderr, flush=True)
    try:
        bench = run_bench(args, workdir)
        report(args, bench, workdir)
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


_SIZE = re.compile(r"^\s*(\d+)\s*(|b|k|kib|m|mib|g|gib)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": KiB, "kib": KiB, "m": MiB, "mib": MiB, "g": GiB, "gib": GiB}


def parse_size(text: str) -> int:
    """Bytes from `1073741824`, `512MiB`, `1GiB`, `1G` (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1GiB, 256MiB)")
    size = int(match[1]) * _UNITS[match[2].lower()]
    if not WARMUP_BYTES <= size <= 64 * GiB:
        raise argparse.ArgumentTypeError("the size must be between 8 MiB and 64 GiB")
    return size


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--size", type=parse_size, default=GiB, help="bytes per file (1GiB)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side and direction")
    parser.add_argument(
        "--dir", default=tempfile.gettempdir(), help="where the temporary folder goes"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    hidden = argparse.SUPPRESS
    parser.add_argument("--serve", action="store_true", help=hidden)
    parser.add_argument("--port", type=int, help=hidden)
    args = parser.parse_args(argv)
    if not args.serve and not 1 <= args.rounds <= 50:
        parser.error("--rounds must be in [1, 50]")
    return args


def main() -> None:
    args = parse_args()
    if args.serve:
        serve(args.port)
        return
    orchestrate(args)


if __name__ == "__main__":
    main()
