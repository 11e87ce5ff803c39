"""The machinery every fake provider shares: a real HTTP server, a script queue, a request log.

The fakes are real servers (Starlette on uvicorn, on a loopback port) rather than mocked
transports, so the code under test goes through its real HTTP clients, connection pools, SSE
decoders, timeouts and retries. A server runs either as a task in the test's own event loop
(`async with FakeX() as fake:`), so tests can read its log and await its events directly, or in
a process of its own for benchmarks (`serve_forever()`).

Each response is a `Plan`: a status, headers, a list of timed frames, and how it ends: normally,
by dropping the connection (`Cut`), or by waiting for the client to go away (`Hang`). The plan runs
next to a watcher on the ASGI `receive` channel, which is how a client disconnect is noticed while
the server is sleeping between tokens; the request is then recorded as cancelled, with a time.
uvicorn only drops a connection when the app raises after the response started, so a cut raises
`ConnectionDropped`, and a log filter keeps those planned drops out of the error log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import signal
import socket
import string
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, TypeAlias

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from tests.fakes.script import Cut, Fail, Hang, Reply, Scripted

__all__ = [
    "ConnectionDropped",
    "Ending",
    "FakeProviderServer",
    "Frame",
    "Plan",
    "RecordedRequest",
    "random_id",
]

_ALPHABET = string.ascii_letters + string.digits


def random_id(prefix: str, length: int = 24, alphabet: str = _ALPHABET) -> str:
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def dumps(value: object) -> bytes:
    return orjson.dumps(value)


def compact_json(value: object) -> str:
    """JSON text without spaces, as models write tool arguments."""
    return orjson.dumps(value).decode()


class ConnectionDropped(Exception):
    """Raised inside a response to make uvicorn close the connection mid-transfer."""


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, ConnectionDropped)


_drop_filter = _QuietDrops()
logging.getLogger("uvicorn.error").addFilter(_drop_filter)


class _InProcessServer(uvicorn.Server):
    """A uvicorn server that leaves the host process's signal handlers alone and says when it
    listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.listening.set()


@dataclass
class RecordedRequest:
    """One request as the fake received it, and what became of its response.

    `headers` has lower-case names; `body` is the parsed JSON (`None` if there was none).
    `received_at` and `cancelled_at` are `time.time()` values; `received_monotonic` is
    `time.monotonic()` for measuring durations. `reply` is the scripted item that answered it
    (`unscripted` when the queue was empty), `validation_error` what the SDK request types said
    against the body. `completed` means the whole response went out; `cancelled` that the client
    went away before that; `dropped` that the server cut the connection on purpose. `finished` is
    set once any of those happened; `hanging` once a `Hang` has sent all it sends and waits.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any
    received_at: float
    received_monotonic: float
    reply: Scripted | None = None
    unscripted: bool = False
    validation_error: str | None = None
    status: int | None = None
    completed: bool = False
    dropped: bool = False
    cancelled: bool = False
    cancelled_at: float | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    hanging: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @property
    def streaming(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


Ending: TypeAlias = Literal["complete", "drop", "hang"]


@dataclass
class Frame:
    """Bytes to send, after waiting `delay` seconds (and for `hold` to be set, if given)."""

    data: bytes
    delay: float = 0.0
    hold: asyncio.Event | None = None


@dataclass
class Plan:
    """A whole response: status line, headers, timed frames and how the transfer ends.

    `eager_headers` sends the status and headers before the first delay (a stream opens at once);
    otherwise they go out with the first frame (a JSON body after the generation time).
    """

    status: int
    headers: dict[str, str]
    frames: list[Frame]
    ending: Ending = "complete"
    eager_headers: bool = False


class _PlanResponse:
    """Runs a `Plan` against the ASGI channel while watching for the client to disconnect."""

    def __init__(self, plan: Plan, record: RecordedRequest, closing: asyncio.Event) -> None:
        self.plan = plan
        self.record = record
        self.closing = closing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = self.record
        record.status = self.plan.status
        runner = asyncio.ensure_future(self._run(send))
        watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({runner, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                runner.result()  # re-raises ConnectionDropped for a cut
                record.completed = True
            else:
                record.cancelled = True
                record.cancelled_at = time.time()
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionDropped):
                    await runner
        except ConnectionDropped:
            record.dropped = True
            raise
        finally:
            watcher.cancel()
            if not runner.done():
                runner.cancel()
            record.finished.set()

    async def _run(self, send: Send) -> None:
        plan = self.plan
        started = False

        async def start() -> None:
            nonlocal started
            if not started:
                started = True
                await send(
                    {
                        "type": "http.response.start",
                        "status": plan.status,
                        "headers": [(k.encode(), v.encode()) for k, v in plan.headers.items()],
                    }
                )

        if plan.eager_headers:
            await start()
        for frame in plan.frames:
            if frame.delay > 0:
                await asyncio.sleep(frame.delay)
            if frame.hold is not None:
                await frame.hold.wait()
            await start()
            await send({"type": "http.response.body", "body": frame.data, "more_body": True})
        if plan.ending == "drop":
            raise ConnectionDropped
        if plan.ending == "hang":
            self.record.hanging.set()
            await self.closing.wait()  # only the server shutting down ends a hang
            raise ConnectionDropped
        await start()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_for_disconnect(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


Handler = Callable[[Request, RecordedRequest], Awaitable[Plan]]


class FakeProviderServer:
    """A scripted fake of one provider's HTTP API. Subclasses add routes and wire formats.

    `script(...)` queues what the next requests get, one item per model request. When the queue
    is empty the model endpoint answers `always` if set (benchmarks and subprocess mode) and a 500
    naming the unscripted request otherwise. Every request, scripted or not, is in `requests`.
    Request bodies are checked against the provider SDK's request types; a body they reject gets
    the provider's 400 unless `reject_invalid=False` (the error is recorded either way).
    """

    kind: str
    """`anthropic`, `openai` or `moonshot`: names the fake in messages and logs."""
    default_models: Sequence[str]

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] | None = None,
        always: Scripted | None = None,
        reject_invalid: bool = True,
        require_auth: bool = True,
        max_records: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.models = list(models if models is not None else self.default_models)
        self.always = always
        self.reject_invalid = reject_invalid
        self.require_auth = require_auth
        self.max_records = max_records
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Scripted] = deque()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._arrived = asyncio.Event()
        anything = Route(
            "/{path:path}",
            self.endpoint(self.unknown_path),
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        )
        self.app = Starlette(routes=[*self.routes(), anything])

    # --- scripting -------------------------------------------------------------------------

    def script(self, *items: Scripted) -> Self:
        """Queue the answers to the next model requests, in order."""
        self._queue.extend(items)
        return self

    @property
    def pending(self) -> int:
        """How many scripted answers have not been used yet."""
        return len(self._queue)

    def next_scripted(self) -> Scripted | None:
        if self._queue:
            return self._queue.popleft()
        return self.always

    # --- the request log -------------------------------------------------------------------

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The requests to the model endpoint, leaving out model listings and token counts."""
        return [r for r in self.requests if r.method == "POST" and r.path == self.model_path]

    model_path: ClassVar[str]

    async def wait_for_request(self, index: int = 0, within: float = 5.0) -> RecordedRequest:
        """Wait until request number `index` (counting from 0) has arrived, and return it."""
        async with asyncio.timeout(within):
            while len(self.requests) <= index:
                self._arrived.clear()
                await self._arrived.wait()
        return self.requests[index]

    async def wait_finished(self, index: int = -1, within: float = 5.0) -> RecordedRequest:
        """Wait until the response to request `index` is complete, cut, or cancelled.

        `index=-1` means the latest request, waiting for a first one if none has arrived.
        """
        async with asyncio.timeout(within):
            await self.wait_for_request(max(index, 0), within)
            record = self.requests[index]
            await record.finished.wait()
        return record

    async def wait_cancelled(self, index: int = -1, within: float = 1.0) -> RecordedRequest:
        """Wait until the client of request `index` has gone away; fail if it doesn't in time."""
        try:
            record = await self.wait_finished(index, within)
        except TimeoutError:
            raise AssertionError(
                f"request {index} was not cancelled by its client within {within}s"
            ) from None
        if not record.cancelled:
            raise AssertionError(f"request {index} finished without being cancelled: {record}")
        return record

    async def record_request(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        body: Any = None
        if raw:
            with contextlib.suppress(orjson.JSONDecodeError):
                body = orjson.loads(raw)
        headers: dict[str, str] = {}
        for key, value in request.headers.items():
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        record = RecordedRequest(
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers=headers,
            raw_body=raw,
            body=body,
            received_at=time.time(),
            received_monotonic=time.monotonic(),
        )
        self.requests.append(record)
        self._arrived.set()
        if self.max_records is not None and len(self.requests) > self.max_records:
            del self.requests[: len(self.requests) - self.max_records]
        return record

    def endpoint(self, handler: Handler) -> Callable[[Request], Awaitable[_PlanResponse]]:
        """A Starlette endpoint that records the request and runs the plan `handler` makes."""

        async def run(request: Request) -> _PlanResponse:
            record = await self.record_request(request)
            plan = await handler(request, record)
            return _PlanResponse(plan, record, self._closing)

        return run

    # --- provider specifics ----------------------------------------------------------------

    def routes(self) -> list[Route]:
        raise NotImplementedError

    async def unknown_path(self, request: Request, record: RecordedRequest) -> Plan:
        """A path the fake does not serve: recorded, and answered with the provider's 404."""
        return self.error_plan(Fail(404, f"fake {self.kind} server: no route {record.path}"))

    request_id_header: ClassVar[str]
    request_id_prefix: ClassVar[str]
    opening_events: ClassVar[int]
    """How many stream events open a stream before any content (what a `Hang` sends)."""

    def error_body(self, fail: Fail) -> dict[str, Any]:
        """The provider's JSON error object for `fail`."""
        raise NotImplementedError

    def stream_error_event(self, fail: Fail) -> bytes:
        """The in-stream error event for `fail`."""
        raise NotImplementedError

    def stream_events(self, reply: Reply, record: RecordedRequest) -> list[tuple[bytes, bool]]:
        """The SSE events of a streamed reply, each with whether it is a paced content delta."""
        raise NotImplementedError

    def response_json(self, reply: Reply, record: RecordedRequest) -> dict[str, Any]:
        """The non-streaming response body for `reply`."""
        raise NotImplementedError

    def unscripted_message(self, record: RecordedRequest) -> str:
        return (
            f"fake {self.kind} server: the test did not script this request "
            f"({record.method} {record.path}); queue an answer with fake.script(Reply(...)) first"
        )

    @staticmethod
    def estimate_input_tokens(record: RecordedRequest) -> int:
        return max(1, len(record.raw_body) // 4)

    # --- answers ---------------------------------------------------------------------------

    def answer_model_request(self, record: RecordedRequest) -> Plan:
        """Answer a validated model request with the next scripted item."""
        scripted = self.next_scripted()
        if scripted is None:
            record.unscripted = True
            return self.error_plan(Fail(500, self.unscripted_message(record)), should_retry=False)
        record.reply = scripted
        streaming = record.streaming
        if isinstance(scripted, Fail):
            if scripted.in_stream and streaming:
                opening = self.stream_events(Reply(), record)[: self.opening_events]
                frames = [Frame(data) for data, _ in opening]
                return self.stream_plan([*frames, Frame(self.stream_error_event(scripted))])
            return self.error_plan(scripted)
        reply = scripted if isinstance(scripted, Reply) else scripted.reply
        if not streaming:
            body = dumps(self.response_json(reply, record))
            if isinstance(scripted, Hang):
                return Plan(200, self.json_headers(), [], ending="hang")
            if isinstance(scripted, Cut):
                headers = self.json_headers() | {"content-length": str(len(body))}
                return Plan(200, headers, [Frame(body[: len(body) // 2])], ending="drop")
            paced = sum(1 for _, is_paced in self.stream_events(reply, record) if is_paced)
            delay = reply.first_token_delay + reply.token_interval * max(0, paced - 1)
            return Plan(200, self.json_headers(), [Frame(body, delay, reply.hold)])
        frames = paced_frames(self.stream_events(reply, record), reply)
        if isinstance(scripted, Cut):
            return self.stream_plan(frames[: scripted.after_events], ending="drop")
        if isinstance(scripted, Hang):
            count = self.opening_events if scripted.after_events is None else scripted.after_events
            return self.stream_plan(frames[:count], ending="hang")
        return self.stream_plan(frames)

    def new_request_id(self) -> str:
        return random_id(self.request_id_prefix)

    def stream_plan(self, frames: list[Frame], ending: Ending = "complete") -> Plan:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            self.request_id_header: self.new_request_id(),
        }
        return Plan(200, headers, frames, ending=ending, eager_headers=True)

    def json_headers(self) -> dict[str, str]:
        return {"content-type": "application/json", self.request_id_header: self.new_request_id()}

    def json_plan(self, payload: object, status: int = 200) -> Plan:
        return Plan(status, self.json_headers(), [Frame(dumps(payload))])

    def error_plan(self, fail: Fail, *, should_retry: bool | None = None) -> Plan:
        headers = self.json_headers() | retry_headers(fail.retry_after)
        if should_retry is not None:
            headers["x-should-retry"] = "true" if should_retry else "false"
        return Plan(fail.status, headers, [Frame(dumps(self.error_body(fail)))])

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What to give the provider SDK as `base_url`: here the root, `http://127.0.0.1:PORT`."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("the fake server is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=30,
        )
        self._closing = asyncio.Event()
        self._server = server = _InProcessServer(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait({self._task, listening}, return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            listening.cancel()
            self._task.result()
            raise RuntimeError("the fake server stopped while starting")

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._closing.set()
        self._server.should_exit = True
        try:
            await self._task
        finally:
            self._server = None
            self._task = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def serve_forever(self, announce: Callable[[str], None] = print) -> None:
        """Serve until SIGINT or SIGTERM; `announce` gets a `listening on URL` line once ready."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        announce(f"fake {self.kind} listening on {self.base_url}")
        try:
            await stop.wait()
        finally:
            await self.stop()


def sse(data: object, event: str | None = None) -> bytes:
    """One server-sent event: `event: NAME` (if any) and `data: JSON`, then a blank line."""
    payload = data if isinstance(data, bytes) else dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def paced_frames(events: list[tuple[bytes, bool]], reply: Reply) -> list[Frame]:
    """Frames for `events`, where the paced ones (content deltas) wait as the reply says."""
    frames: list[Frame] = []
    seen_first = False
    for data, paced in events:
        delay, hold = 0.0, None
        if paced:
            delay = reply.token_interval if seen_first else reply.first_token_delay
            hold = None if seen_first else reply.hold
            seen_first = True
        frames.append(Frame(data, delay, hold))
    return frames


def retry_headers(retry_after: float | None) -> dict[str, str]:
    """`retry-after` in whole seconds, plus `retry-after-ms` when the wait is fractional."""
    if retry_after is None:
        return {}
    headers = {"retry-after": str(math.ceil(retry_after))}
    if retry_after != math.ceil(retry_after):
        headers["retry-after-ms"] = str(round(retry_after * 1000))
    return headers


def split_text(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def count_deltas(reply: Reply) -> int:
    """How many content deltas a reply streams: reasoning, text and tool arguments."""
    parts = split_text(reply.reasoning, reply.chunk_chars) + split_text(
        reply.text, reply.chunk_chars
    )
    for call in reply.tool_calls:
        parts += split_text(compact_json(call.arguments), reply.chunk_chars)
    return len(parts)
