"""Does hearth stay responsive while it handles hostile input?

Each input below came out of a security review: once, each froze the process, burnt CPU on the
event loop, or answered 500. For every one, a prober (bench/_prober.py, a process of its own so
that nothing this script does can pass for the server's slowness) sends `GET /healthz` every
`--interval-ms` (10 ms) on one keep-alive connection, from the moment the input is sent until
its processing has ended: its response came back and whatever background work it caused is
done (an upload's ingestion left `pending`, a turn's stream ended and no message of its chat is
still `streaming`). Each probe is timed from when it was due, so a stall counts once for every
probe it held up. Per input the script prints the outcome (status codes, ingestion status and
error, or how the turn ended and what its rows say), the number of probes, /healthz p50, p99
and max, and PASS when p99 <= 100 ms and every probe was answered. Before the first input, an
upload of each kind is ingested and a turn with a tool call runs, unmeasured, so that no input
pays for what the server sets up on first use.

1. Uploads of `<!---->` x 26 + `<!--` (186 bytes, once 7 s of SVG sniffing) and x 1170, then
   `GET /data/{id}/{name}` of each.
2. `heading.md`: `# a`, 60,000 spaces, `b` (a heading pattern that backtracks quadratically),
   until its ingestion ends.
3. A 16 KB PDF of 100 pages that all share one content stream (some 3 MB of text to extract),
   built here with fpdf2 and pypdf, until its ingestion ends.
4. 80 registrations at once from one client, with distinct emails.
5. 40 wrong sign-ins at once for one (existing) email.
6. Requests that answered 500: list cursors that decode to the wrong shapes, a lone surrogate
   (`\\ud800` as a JSON escape) in register, login, chat create, rename and a message, NUL in a
   title, a message, a rename and a login email, and a non-ASCII `X-CSRF-Token` with a valid
   cookie. A 5xx is reported as it is.
7. Turns whose model (the fake OpenAI-compatible provider of tests/fakes, in this process,
   scripted per turn) calls `read_file` on a 300-character name, on `a.txt/b` where `a.txt` is
   a file, on a text file with a NUL byte just after its first 8 KiB, `list_files` on a file,
   and `write_file` with 4 MiB of content (approved, so the write and the next round run too).

hearth runs as `hearth serve` does (`python -m app.cli serve`, one worker, schema upgraded at
start) from this tree, on a fresh database: a SQLite file in a temporary folder, and a randomly
named PostgreSQL database created from `--pg-url` and dropped at the end (`--db` picks one or
both). Every input is cut off after `--cutoff` seconds (60) and reported as such; its
background work is then given as long again to end, unmeasured, so the next input starts on a
quiet server. A server that exited is started again on the same database. The order puts the
requests that spend the per-address sign-up and sign-in allowances (6, then 4, then 5) last.

A FAIL is a figure: the exit status is 0 whatever the verdicts, and non-zero only when the
benchmark itself could not run.

    .venv/bin/python bench/adversarial.py
    .venv/bin/python bench/adversarial.py --db sqlite --json figures.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import platform
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from _figures import add_json_option, write_figures
from _loadgen import LOOPBACK, build_request
from _turns import (
    CSRF_COOKIE,
    CSRF_HEADER,
    DEFAULT_PG_URL,
    ROOT,
    SESSION_COOKIE,
    Account,
    Connection,
    Exchange,
    _cookies,
    free_port,
    fresh_database,
    quantile,
    revision,
    start_process,
    stop_process,
    wait_answering,
)
from sqlalchemy.engine import make_url

from tests.fakes.providers import FakeOpenAI, Reply, ToolCall

TARGET_P99_MS = 100.0
PROVIDER_MODEL = "gpt-4.1"
CHAT_MODEL = f"fake/{PROVIDER_MODEL}"
PROVIDER_KEY_ENV = "HEARTH_BENCH_PROVIDER_KEY"
PASSWORD = "correct horse battery"
POLL_SECONDS = 0.05
OUTCOME_WIDTH = 190
WRITE_BYTES = 4 * 1024 * 1024


class Unexpected(RuntimeError):
    """The server answered something the input cannot go on from (reported, not raised)."""


# --------------------------------------------------------------------------------------------
# The prober process.
# --------------------------------------------------------------------------------------------


@dataclass
class Probes:
    latencies_ms: list[float]
    unanswered: int
    connects: int


class Prober:
    """bench/_prober.py in a process of its own, one start/stop window per input."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def launch(cls, port: int, interval_ms: float) -> Prober:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).with_name("_prober.py")),
            str(port),
            str(interval_ms),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            limit=1 << 26,
        )
        return cls(process)

    async def _say(self, line: str, wait: float) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()
        answer = await asyncio.wait_for(self.process.stdout.readline(), wait)
        if not answer:
            raise RuntimeError(f"the prober exited (status {self.process.returncode})")
        return answer

    async def begin(self) -> None:
        if (await self._say("start", 10)).strip() != b"ok":
            raise RuntimeError("the prober did not start")

    async def end(self) -> Probes:
        figures = orjson.loads(await self._say("stop", 60))
        return Probes(figures["latencies_ms"], figures["unanswered"], figures["connects"])

    async def close(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(OSError):
                assert self.process.stdin is not None
                self.process.stdin.write(b"quit\n")
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


# --------------------------------------------------------------------------------------------
# The server, the fake provider and the bench's own accounts.
# --------------------------------------------------------------------------------------------


@dataclass
class Bench:
    """What every input can use: the server, the fake, the accounts and earlier results."""

    args: argparse.Namespace
    workdir: Path
    env: dict[str, str]
    log_path: Path
    port: int
    fake: FakeOpenAI
    server: subprocess.Popen[bytes] | None = None
    account: Account | None = None
    victim_email: str = ""
    chats: dict[str, str] = field(default_factory=dict)
    uploads: dict[str, tuple[str, str]] = field(default_factory=dict)
    restarts: int = 0

    @property
    def user(self) -> Account:
        assert self.account is not None
        return self.account

    @property
    def file_root(self) -> Path:
        return Path(self.env["HEARTH_DATA_DIR"]) / "users" / self.user.user_id

    async def start_server(self) -> None:
        command = [sys.executable, "-m", "app.cli", "serve", "--host", LOOPBACK]
        command += ["--port", str(self.port), "--workers", "1"]
        with self.log_path.open("ab") as log:
            self.server = start_process(command, log, self.env, cwd=ROOT)
        try:
            await wait_answering(self.port, "/healthz", self.server)
        except RuntimeError as exc:
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{exc}; its log ends:\n" + "\n".join(tail)) from exc

    def stop_server(self) -> None:
        if self.server is not None:
            stop_process(self.server)

    async def connect(self) -> Connection:
        return await Connection.open(self.port)


def providers_yaml(base_url: str) -> str:
    return f"""\
providers:
  - id: fake
    kind: openai
    base_url: {base_url}
    api_key_env: {PROVIDER_KEY_ENV}
    models:
      - id: {PROVIDER_MODEL}
        context_window: 1000000
        max_output_tokens: 1024
"""


async def sign_up(conn: Connection, email: str) -> Account:
    reply = await conn.call(
        "POST", "/api/auth/register", payload={"email": email, "password": PASSWORD}
    )
    if reply.status != 201:
        raise RuntimeError(f"register answered {reply.status}: {reply.body[:200]!r}")
    cookies = _cookies(reply)
    return Account(str(reply.json()["id"]), cookies[SESSION_COOKIE], cookies[CSRF_COOKIE])


async def create_chat(conn: Connection, account: Account, title: str) -> str:
    reply = await conn.call(
        "POST", "/api/chats", account.headers(), {"model": CHAT_MODEL, "title": title}
    )
    if reply.status != 201:
        raise Unexpected(f"creating a chat answered {reply.status}: {reply.body[:200]!r}")
    return str(reply.json()["id"])


async def prepare(bench: Bench) -> None:
    """The bench's account, a second one to sign in to wrongly, chats and files to work on."""
    conn = await bench.connect()
    try:
        bench.account = await sign_up(conn, f"bench-{secrets.token_hex(4)}@example.com")
        bench.victim_email = f"victim-{secrets.token_hex(4)}@example.com"
        await sign_up(conn, bench.victim_email)
        for label in ("rename", "surrogate message", "nul message"):
            bench.chats[label] = await create_chat(conn, bench.user, f"bench {label}")
        # Warm-up, so that no input pays for what the server sets up on first use.
        await warm_up(bench, conn)
    finally:
        conn.close()
    root = bench.file_root
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("a plain text file\n")
    line = b"0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
    text = (line * (8192 // len(line) + 1))[:8192]
    (root / "nul-after-8k.txt").write_bytes(text + b"\x00" + line * 4)


async def warm_up(bench: Bench, conn: Connection) -> None:
    """A text and a PDF upload ingested, and a turn with a tool call, none of them measured."""
    for filename, data in (
        ("warm.md", b"# Warm-up\n\nA short document.\n"),
        ("warm.pdf", shared_stream_pdf(pages=2, lines=10)),
    ):
        boundary, body = multipart(filename, data)
        headers = bench.user.headers() | {
            "Content-Type": f"multipart/form-data; boundary={boundary}"
        }
        reply = await conn.exchange(build_request("POST", "/api/uploads", headers, body), wait=60)
        if reply.status != 201:
            raise RuntimeError(f"the warm-up upload answered {detail(reply)}")
        if not conn.usable:
            await conn.reopen()
        async with asyncio.timeout(60):
            await poll(
                conn,
                f"/api/uploads/{reply.json()[0]['id']}",
                bench.user.headers(),
                lambda u: (u.get("ingestion") or {}).get("status") != "pending",
            )
    outcome = await asyncio.wait_for(
        tool_turn([ToolCall("list_files", {"path": "."}, id="call_warm")])(bench, {}), 60
    )
    if "finish" not in outcome:
        raise RuntimeError(f"the warm-up turn ended: {outcome}")


# --------------------------------------------------------------------------------------------
# Small pieces the inputs share.
# --------------------------------------------------------------------------------------------


def clip(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def detail(reply: Exchange) -> str:
    """`status` and, for an error, what the server said."""
    if reply.status == 0:
        return f"no answer ({reply.error})"
    if reply.status < 400:
        return str(reply.status)
    try:
        said = reply.json().get("detail")
        said = said if isinstance(said, str) else orjson.dumps(said).decode()
    except (orjson.JSONDecodeError, AttributeError):
        said = reply.body.decode(errors="replace")
    return f"{reply.status} {clip(said or '', 70)!r}"


def raw_json(method: str, path: str, headers: dict[str, str], text: str) -> bytes:
    """A request whose JSON body is `text` as written (escapes such as `\\ud800` kept)."""
    headers = headers | {"Content-Type": "application/json"}
    return build_request(method, path, headers, text.encode("ascii"))


async def poll(
    conn: Connection, path: str, headers: dict[str, str], done: Callable[[Any], bool]
) -> Any:
    """GET `path` until `done(json)`; the caller bounds the time."""
    while True:
        reply = await conn.call("GET", path, headers, wait=30)
        if reply.status != 200:
            raise Unexpected(f"GET {path} answered {detail(reply)}")
        body = reply.json()
        if done(body):
            return body
        await asyncio.sleep(POLL_SECONDS)


def stream_end(reply: Exchange) -> str:
    """How a turn's stream ended: its last parts and whether `[DONE]` came."""
    if reply.status != 200:
        return detail(reply)
    kinds: list[str] = []
    for _, payload in reply.events:
        if payload == b"[DONE]":
            kinds.append("[DONE]")
            continue
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            part = orjson.loads(payload)
            kind = part.get("type", "?")
            if kind == "error":
                kind = f"error {clip(str(part.get('errorText', '')), 60)!r}"
            if kind in ("finish", "abort", "tool-approval-request") or kind.startswith("error"):
                kinds.append(kind)
    ending = ", ".join(dict.fromkeys(kinds)) or "no end part"
    if not reply.complete:
        ending += f", cut ({reply.error})"
    return ending


# --------------------------------------------------------------------------------------------
# 1-3. Uploads.
# --------------------------------------------------------------------------------------------


def multipart(filename: str, data: bytes) -> tuple[str, bytes]:
    boundary = f"hearth-bench-{secrets.token_hex(8)}"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return boundary, head + data + f"\r\n--{boundary}--\r\n".encode()


def ingestion_of(upload: dict[str, Any]) -> str:
    ingestion = upload.get("ingestion")
    if ingestion is None:
        return "no ingestion"
    error = ingestion.get("error")
    return f"ingestion {ingestion['status']}" + (f" ({clip(error, 60)!r})" if error else "")


def upload_input(filename: str, data: bytes, key: str) -> Callable[[Bench, dict[str, Any]], Any]:
    async def run(bench: Bench, state: dict[str, Any]) -> str:
        conn = await bench.connect()
        try:
            boundary, body = multipart(filename, data)
            headers = bench.user.headers() | {
                "Content-Type": f"multipart/form-data; boundary={boundary}"
            }
            reply = await conn.exchange(
                build_request("POST", "/api/uploads", headers, body), wait=bench.args.cutoff
            )
            if reply.status != 201:
                return f"upload {detail(reply)}"
            upload = reply.json()[0]
            bench.uploads[key] = (str(upload["id"]), str(upload["filename"]))
            state["upload_id"] = upload["id"]
            said = f"201 {upload['mime']}, {upload['size']} bytes"
            if upload.get("ingestion") is None:
                return f"{said}, no ingestion"
            if not conn.usable:
                await conn.reopen()
            final = await poll(
                conn,
                f"/api/uploads/{upload['id']}",
                bench.user.headers(),
                lambda u: (u.get("ingestion") or {}).get("status") != "pending",
            )
            return f"{said}, {ingestion_of(final)}"
        finally:
            conn.close()

    return run


async def settle_upload(bench: Bench, state: dict[str, Any]) -> str:
    """After a cut-off: how long the ingestion went on (unmeasured)."""
    if "upload_id" not in state:
        return "no upload id yet"
    conn = await bench.connect()
    started = time.monotonic()
    try:
        async with asyncio.timeout(bench.args.cutoff):
            final = await poll(
                conn,
                f"/api/uploads/{state['upload_id']}",
                bench.user.headers(),
                lambda u: (u.get("ingestion") or {}).get("status") != "pending",
            )
        return f"{ingestion_of(final)} {time.monotonic() - started:.1f} s later"
    except TimeoutError:
        return f"still pending {bench.args.cutoff:g} s later"
    finally:
        conn.close()


def fetch_input(key: str) -> Callable[[Bench, dict[str, Any]], Any]:
    async def run(bench: Bench, state: dict[str, Any]) -> str:
        if key not in bench.uploads:
            return "skipped: the upload was not stored"
        upload_id, filename = bench.uploads[key]
        conn = await bench.connect()
        try:
            reply = await conn.call(
                "GET",
                f"/data/{upload_id}/{quote(filename)}",
                bench.user.headers(),
                wait=bench.args.cutoff,
            )
        finally:
            conn.close()
        if reply.status != 200:
            return detail(reply)
        kind = ", ".join(reply.header_values("content-type")) or "no type"
        return f"200 {kind}, {len(reply.body)} bytes"

    return run


def shared_stream_pdf(pages: int = 100, lines: int = 120) -> bytes:
    """A PDF whose `pages` pages all point at one content stream of `lines` lines of text."""
    from fpdf import FPDF
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject

    rng = random.Random(7)
    words = [
        "ledger",
        "amount",
        "query",
        "plan",
        "index",
        "vacuum",
        "replica",
        "lease",
        "turn",
        "chunk",
        "token",
        "cursor",
    ]
    cycle = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(8)]
    pdf = FPDF(format="A4")
    pdf.set_compression(True)
    pdf.add_page()
    pdf.set_font("helvetica", size=3)
    for index in range(lines):
        pdf.cell(0, 0.7, cycle[index % len(cycle)], new_x="LMARGIN", new_y="NEXT")
    source = PdfReader(io.BytesIO(bytes(pdf.output())))
    writer = PdfWriter()
    first = writer.add_page(source.pages[0])
    contents = first.raw_get("/Contents")
    resources = first.raw_get("/Resources")
    for _ in range(pages - 1):
        page = writer.add_blank_page(width=first.mediabox.width, height=first.mediabox.height)
        page[NameObject("/Contents")] = contents
        page[NameObject("/Resources")] = resources
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# 4-5. Sign-ups and sign-ins at once.
# --------------------------------------------------------------------------------------------


async def at_once(bench: Bench, requests: list[bytes]) -> str:
    connections = await asyncio.gather(*(bench.connect() for _ in requests))
    try:
        replies = await asyncio.gather(
            *(
                conn.exchange(request, wait=bench.args.cutoff)
                for conn, request in zip(connections, requests, strict=True)
            )
        )
    finally:
        for conn in connections:
            conn.close()
    counts = Counter(str(r.status) if r.status else "no answer" for r in replies)
    return ", ".join(f"{status} x{n}" for status, n in sorted(counts.items()))


async def registrations(bench: Bench, state: dict[str, Any]) -> str:
    tag = secrets.token_hex(3)
    requests = [
        build_request(
            "POST",
            "/api/auth/register",
            {"Content-Type": "application/json"},
            orjson.dumps({"email": f"many-{tag}-{i}@example.com", "password": PASSWORD}),
        )
        for i in range(80)
    ]
    return await at_once(bench, requests)


async def wrong_logins(bench: Bench, state: dict[str, Any]) -> str:
    body = orjson.dumps({"email": bench.victim_email, "password": "wrong password"})
    request = build_request("POST", "/api/auth/login", {"Content-Type": "application/json"}, body)
    return await at_once(bench, [request] * 40)


# --------------------------------------------------------------------------------------------
# 6. Requests that answered 500.
# --------------------------------------------------------------------------------------------


def cursor(value: Any) -> str:
    from base64 import urlsafe_b64encode

    return urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


def single(build: Callable[[Bench], bytes]) -> Callable[[Bench, dict[str, Any]], Any]:
    """One request; a streamed answer (a turn that started) is read to its end."""

    async def run(bench: Bench, state: dict[str, Any]) -> str:
        conn = await bench.connect()
        try:
            reply = await conn.exchange(build(bench), wait=bench.args.cutoff)
        finally:
            conn.close()
        if reply.status == 200 and reply.events:
            return f"200 stream: {stream_end(reply)}"
        return detail(reply)

    return run


def get_chats(value: Any) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        path = f"/api/chats?cursor={cursor(value)}"
        return build_request("GET", path, bench.user.headers())

    return build


def register_with(field_name: str, value: str) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        fields = {"email": f"odd-{secrets.token_hex(4)}@example.com", "password": PASSWORD}
        fields["display_name"] = "bench"
        fields[field_name] = value
        text = ", ".join(f'"{name}": "{text}"' for name, text in fields.items())
        return raw_json("POST", "/api/auth/register", {}, "{" + text + "}")

    return build


def login_with(email: str, password: str) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        text = f'{{"email": "{email}", "password": "{password}"}}'
        return raw_json("POST", "/api/auth/login", {}, text)

    return build


def create_with(title: str) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        text = f'{{"title": "{title}", "model": "{CHAT_MODEL}"}}'
        return raw_json("POST", "/api/chats", bench.user.headers(), text)

    return build


def rename_to(title: str) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        path = f"/api/chats/{bench.chats['rename']}"
        return raw_json("PATCH", path, bench.user.headers(), f'{{"title": "{title}"}}')

    return build


def message_of(chat: str, content: str) -> Callable[[Bench], bytes]:
    def build(bench: Bench) -> bytes:
        path = f"/api/chats/{bench.chats[chat]}/messages"
        return raw_json("POST", path, bench.user.headers(), f'{{"content": "{content}"}}')

    return build


def non_ascii_csrf(bench: Bench) -> bytes:
    account = bench.user
    head = (
        "POST /api/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n"
        f"Cookie: {SESSION_COOKIE}={account.session}; {CSRF_COOKIE}={account.csrf}\r\n"
        "Content-Type: application/json\r\n"
    ).encode("latin-1")
    body = orjson.dumps({"model": CHAT_MODEL})
    token = f"{CSRF_HEADER}: ".encode() + "é".encode() + account.csrf[1:].encode() + b"\r\n"
    return head + token + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


# --------------------------------------------------------------------------------------------
# 7. Tool calls.
# --------------------------------------------------------------------------------------------


def tool_turn(
    calls: list[ToolCall], *, chunk_chars: int = 8, approve: bool = False
) -> Callable[[Bench, dict[str, Any]], Any]:
    """A turn in a new chat whose model makes `calls`, then answers in words."""

    async def run(bench: Bench, state: dict[str, Any]) -> str:
        fake = bench.fake
        while fake.pending:  # whatever an earlier, cut-off turn left unused
            fake.next_scripted()
        fake.script(
            Reply(tool_calls=calls, chunk_chars=chunk_chars),
            Reply(text="Done with the files."),
        )
        conn = await bench.connect()
        try:
            chat_id = await create_chat(conn, bench.user, "bench tools")
            state["chat_id"] = chat_id
            body = orjson.dumps({"content": "Please look at my files."})
            headers = bench.user.headers() | {"Content-Type": "application/json"}
            path = f"/api/chats/{chat_id}/messages"
            reply = await conn.exchange(
                build_request("POST", path, headers, body), wait=bench.args.cutoff
            )
            ended = [stream_end(reply)]
            if approve and any(b"tool-approval-request" in payload for _, payload in reply.events):
                if not conn.usable:
                    await conn.reopen()
                decisions = [{"tool_call_id": call.id, "approved": True} for call in calls]
                answer = orjson.dumps({"decisions": decisions})
                approvals = f"/api/chats/{chat_id}/approvals"
                reply = await conn.exchange(
                    build_request("POST", approvals, headers, answer), wait=bench.args.cutoff
                )
                ended.append(f"approved: {stream_end(reply)}")
            if not conn.usable:
                await conn.reopen()
            chat = await poll(conn, f"/api/chats/{chat_id}", bench.user.headers(), idle)
        finally:
            conn.close()
        return "; ".join([*ended, rows_of(chat)])

    return run


def idle(chat: dict[str, Any]) -> bool:
    return all(m.get("status") != "streaming" for m in chat.get("messages", []))


def rows_of(chat: dict[str, Any]) -> str:
    """The statuses of a turn's assistant messages and tool calls, and what a failure said."""
    rounds: list[str] = []
    tools: list[str] = []
    for message in chat.get("messages", []):
        if message.get("role") != "assistant":
            continue
        status = str(message.get("status"))
        if message.get("error"):
            status += f" {clip(str(message['error']), 40)!r}"
        rounds.append(status)
        for call in message.get("tool_calls") or []:
            said = ""
            if call.get("status") != "done":
                said = f" {clip(str(call.get('result')), 50)!r}"
            tools.append(f"{call.get('name')} {call.get('status')}{said}")
    return f"rounds {', '.join(rounds) or 'none'}; tools {', '.join(tools) or 'none'}"


async def settle_turn(bench: Bench, state: dict[str, Any]) -> str:
    """After a cut-off: stop the turn, and say how its rows ended (unmeasured)."""
    if "chat_id" not in state:
        return "no chat yet"
    conn = await bench.connect()
    try:
        chat_path = f"/api/chats/{state['chat_id']}"
        await conn.call("POST", f"{chat_path}/stop", bench.user.headers(), wait=30)
        async with asyncio.timeout(bench.args.cutoff):
            chat = await poll(conn, chat_path, bench.user.headers(), idle)
        return f"stopped: {rows_of(chat)}"
    except TimeoutError:
        return f"still streaming {bench.args.cutoff:g} s after a stop"
    finally:
        conn.close()


def big_text(size: int) -> str:
    line = "A line of text that the model asks to be written to a file, numbered: "
    parts: list[str] = []
    total = 0
    number = 0
    while total < size:
        piece = f"{line}{number:08d}\n"
        parts.append(piece)
        total += len(piece)
        number += 1
    return "".join(parts)[:size]


# --------------------------------------------------------------------------------------------
# The inputs, in the order they run.
# --------------------------------------------------------------------------------------------

Run = Callable[[Bench, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Input:
    name: str
    run: Run
    settle: Run | None = None


def inputs() -> list[Input]:
    small = b"<!---->" * 26 + b"<!--"
    large = b"<!---->" * 1170 + b"<!--"
    heading = ("# a" + " " * 60000 + "b").encode()
    surrogate, nul = "\\ud800", "\\u0000"
    when = "2026-01-01T00:00:00+00:00"
    some_id = "00000000-0000-4000-8000-000000000000"
    return [
        Input(f"svg comments {len(small)} B: upload", upload_input("c.svg", small, "small")),
        Input(f"svg comments {len(small)} B: GET /data", fetch_input("small")),
        Input(f"svg comments {len(large)} B: upload", upload_input("c.svg", large, "large")),
        Input(f"svg comments {len(large)} B: GET /data", fetch_input("large")),
        Input(
            "heading.md, 60k spaces: ingestion",
            upload_input("heading.md", heading, "heading"),
            settle_upload,
        ),
        Input(
            "PDF 100 pages, 1 stream: ingestion",
            upload_input("shared.pdf", shared_stream_pdf(), "pdf"),
            settle_upload,
        ),
        Input(
            "read_file, 300-char name",
            tool_turn([ToolCall("read_file", {"path": "n" * 300}, id="call_long_name")]),
            settle_turn,
        ),
        Input(
            "read_file a.txt/b (a.txt a file)",
            tool_turn([ToolCall("read_file", {"path": "a.txt/b"}, id="call_under_file")]),
            settle_turn,
        ),
        Input(
            "read_file, NUL after 8 KiB",
            tool_turn([ToolCall("read_file", {"path": "nul-after-8k.txt"}, id="call_nul")]),
            settle_turn,
        ),
        Input(
            "list_files on a file",
            tool_turn([ToolCall("list_files", {"path": "a.txt"}, id="call_list_file")]),
            settle_turn,
        ),
        Input(
            "write_file 4 MiB, approved",
            tool_turn(
                [
                    ToolCall(
                        "write_file",
                        {"path": "big.txt", "content": big_text(WRITE_BYTES)},
                        id="call_big_write",
                    )
                ],
                chunk_chars=1 << 16,
                approve=True,
            ),
            settle_turn,
        ),
        Input("cursor [time, 5]", single(get_chats([when, 5]))),
        Input("cursor [time, [id]]", single(get_chats([when, [some_id]]))),
        Input("cursor year 1 at +14:00", single(get_chats(["0001-01-01T00:00:00+14:00", some_id]))),
        Input("surrogate: register name", single(register_with("display_name", surrogate))),
        Input("surrogate: register password", single(register_with("password", surrogate))),
        Input("surrogate: login email", single(login_with(f"{surrogate}@example.com", "x" * 9))),
        Input("surrogate: login password", single(login_with("a@example.com", surrogate))),
        Input("surrogate: chat create title", single(create_with(surrogate))),
        Input("surrogate: rename", single(rename_to(surrogate))),
        Input("surrogate: message", single(message_of("surrogate message", surrogate))),
        Input("NUL: chat create title", single(create_with(f"a{nul}b"))),
        Input("NUL: message", single(message_of("nul message", f"a{nul}b"))),
        Input("NUL: rename", single(rename_to(f"a{nul}b"))),
        Input("NUL: login email", single(login_with(f"a{nul}b@example.com", "x" * 9))),
        Input("non-ASCII X-CSRF-Token", single(non_ascii_csrf)),
        Input("80 registrations at once", registrations),
        Input("40 wrong logins, one email", wrong_logins),
    ]


# --------------------------------------------------------------------------------------------
# Measuring.
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    db: str
    name: str
    outcome: str
    seconds: float
    probes: int
    unanswered: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    cut_off: bool
    passed: bool


async def measure(bench: Bench, prober: Prober, item: Input) -> Row:
    state: dict[str, Any] = {}
    cut_off = False
    await prober.begin()
    started = time.perf_counter()
    try:
        outcome = await asyncio.wait_for(item.run(bench, state), bench.args.cutoff)
    except TimeoutError:
        if time.perf_counter() - started < bench.args.cutoff * 0.99:
            outcome = "not followed to its end: a connection or a request timed out"
        else:
            cut_off = True
            outcome = f"CUT OFF after {bench.args.cutoff:g} s"
    except (Unexpected, OSError) as exc:
        outcome = f"not followed to its end: {clip(str(exc), 100)}"
    seconds = time.perf_counter() - started
    probes = await prober.end()
    if cut_off and item.settle is not None:
        try:
            outcome += "; " + await item.settle(bench, state)
        except (Unexpected, OSError) as exc:
            outcome += f"; could not follow it further: {clip(str(exc), 80)}"
    if bench.server is not None and bench.server.poll() is not None:
        outcome += f"; the server EXITED (status {bench.server.returncode}), started again"
        bench.restarts += 1
        await bench.start_server()
    latencies = probes.latencies_ms
    p99 = quantile(latencies, 0.99)
    return Row(
        db=bench.args.current_db,
        name=item.name,
        outcome=outcome,
        seconds=seconds,
        probes=len(latencies),
        unanswered=probes.unanswered,
        p50_ms=quantile(latencies, 0.5),
        p99_ms=p99,
        max_ms=max(latencies, default=float("nan")),
        cut_off=cut_off,
        passed=bool(latencies) and not probes.unanswered and p99 <= TARGET_P99_MS,
    )


def print_header() -> None:
    print(
        f"  {'input':<36}{'s':>6}{'probes':>8}{'p50 ms':>8}{'p99 ms':>9}{'max ms':>9}  "
        f"{'verdict':<8}outcome"
    )


def print_row(row: Row) -> None:
    unanswered = f" ({row.unanswered} unanswered)" if row.unanswered else ""
    print(
        f"  {row.name:<36}{row.seconds:>6.1f}{row.probes:>8}{row.p50_ms:>8.1f}"
        f"{row.p99_ms:>9.1f}{row.max_ms:>9.1f}  {'PASS' if row.passed else 'FAIL':<8}"
        f"{clip(row.outcome, OUTCOME_WIDTH)}{unanswered}",
        flush=True,
    )


@contextlib.asynccontextmanager
async def running(args: argparse.Namespace, db: str, workdir: Path) -> AsyncIterator[Bench]:
    """A fresh database, the fake provider, hearth on it, and the bench's accounts."""
    async with (
        fresh_database(db, args.pg_url, workdir, f"adversarial_{db}") as url,
        FakeOpenAI(
            always=Reply(text="Done."), reject_invalid=False, require_auth=False, max_records=20
        ) as fake,
    ):
        folder = workdir / db
        folder.mkdir()
        (folder / "providers.yaml").write_text(providers_yaml(fake.base_url))
        (folder / "mcp.yaml").write_text("servers: []\n")
        env = {
            "HEARTH_DATABASE_URL": url,
            "HEARTH_DATA_DIR": str(folder / "data"),
            "HEARTH_SECRET_KEY": secrets.token_urlsafe(32),
            "HEARTH_PROVIDERS_FILE": str(folder / "providers.yaml"),
            "HEARTH_MCP_FILE": str(folder / "mcp.yaml"),
            "HEARTH_AUTO_MIGRATE": "1",
            PROVIDER_KEY_ENV: "bench-key",
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        bench = Bench(args, workdir, env, folder / "hearth.log", free_port(), fake)
        try:
            await bench.start_server()
            await prepare(bench)
            yield bench
        finally:
            bench.stop_server()


def log_problems(log_path: Path) -> tuple[Counter[str], Counter[str]]:
    """The routes the server logged unhandled errors on, and the exceptions they ended in."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return Counter(), Counter()
    routes = Counter(
        re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "{id}", found[1])
        for line in lines
        if (found := re.search(r"unhandled error on (.+)", line))
    )
    raised = Counter(
        line[:140]
        for line in lines
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Timeout)\w*: ", line)
        and "RequestValidationError" not in line
    )
    return routes, raised


async def run_db(args: argparse.Namespace, db: str, workdir: Path, items: list[Input]) -> list[Row]:
    args.current_db = db
    rows: list[Row] = []
    print(f"\n{db}:", flush=True)
    async with running(args, db, workdir) as bench:
        prober = await Prober.launch(bench.port, args.interval_ms)
        try:
            print_header()
            for item in items:
                row = await measure(bench, prober, item)
                rows.append(row)
                print_row(row)
        finally:
            await prober.close()
        log_path = bench.log_path
    routes, raised = log_problems(log_path)
    if routes or raised:
        listed = ", ".join(f"{route} x{n}" for route, n in routes.most_common())
        print(f"  the server logged unhandled errors on: {listed or 'no route'}")
        for line, count in raised.most_common(8):
            print(f"    {count} x {line}")
    return rows


async def orchestrate(args: argparse.Namespace) -> list[Row]:
    print(
        f"hearth under adversarial input: /healthz every {args.interval_ms:g} ms, target p99 <= "
        f"{TARGET_P99_MS:g} ms, inputs cut off after {args.cutoff:g} s; Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load average {_load()}"
    )
    print(f"hearth: {revision(ROOT)}")
    items = inputs()
    if args.only:
        items = [i for i in items if any(word in i.name for word in args.only)]
    workdir = Path(tempfile.mkdtemp(prefix="hearth-adversarial-"))
    rows: list[Row] = []
    try:
        for db in ("sqlite", "postgresql") if args.db == "both" else (args.db,):
            rows += await run_db(args, db, workdir, items)
    finally:
        if args.keep:
            print(f"kept {workdir} (databases, data dirs, hearth.log)", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows


def summary(rows: list[Row]) -> str:
    parts = []
    for db in dict.fromkeys(r.db for r in rows):
        mine = [r for r in rows if r.db == db]
        passed = sum(r.passed for r in mine)
        cut = sum(r.cut_off for r in mine)
        server_errors = sum(bool(re.search(r"(^|[ ,:(])5\d\d( |$|,)", r.outcome)) for r in mine)
        parts.append(f"{db} {passed}/{len(mine)} PASS, {cut} cut off, {server_errors} with a 5xx")
    return "summary: " + "; ".join(parts)


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="an existing database on the server where the benchmark's own one is created",
    )
    parser.add_argument(
        "--cutoff", type=float, default=60.0, help="seconds before an input is cut off"
    )
    parser.add_argument("--interval-ms", type=float, default=10.0, help="between /healthz probes")
    parser.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="run only the inputs whose name contains TEXT (may be repeated)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (databases, server logs)"
    )
    add_json_option(parser)
    args = parser.parse_args(argv)
    if not 1 <= args.cutoff <= 600:
        parser.error("--cutoff must be in [1, 600]")
    if not 1 <= args.interval_ms <= 1000:
        parser.error("--interval-ms must be in [1, 1000]")
    if args.db != "sqlite" and make_url(args.pg_url).host not in (LOOPBACK, "localhost"):
        parser.error("--pg-url must point at 127.0.0.1")
    return args


def main() -> None:
    args = parse_args()
    try:
        rows = asyncio.run(orchestrate(args))
    except Exception:
        traceback.print_exc()
        print("the benchmark itself failed; the figures above are incomplete", file=sys.stderr)
        sys.exit(2)
    line = summary(rows)
    print(f"\nload average at the end: {_load()}")
    print(line)
    write_figures(
        {
            "target_p99_ms": TARGET_P99_MS,
            "interval_ms": args.interval_ms,
            "cutoff_seconds": args.cutoff,
            "revision": revision(ROOT),
            "rows": [asdict(row) for row in rows],
            "summary": line,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
