"""A turn's stream writes its chunks straight to the server, and only when that is safe.

Over real HTTP (uvicorn): the client gets every event, in order, while a middleware between the
response and the server sees the start and the end and no chunk between. In-process, with the
server's `send` recorded: a middleware that answers in the response's place, or holds its start
back, or an app without an outlet, gets every chunk through the stack, and the server gets a
well-formed response either way.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.agent.live import DONE_EVENT, TurnLog
from app.api.event_stream import EventStreamResponse
from app.core.http.outlet import OUTLET, HearthApp, Outlet, direct_send
from app.core.http.request_id import RequestIdMiddleware
from tests.support import http_client, live_server

EVENTS = [f'data: {{"type":"text-delta","delta":"{n}"}}\n\n' for n in range(5)]


class Seen:
    """A pure ASGI middleware that records every message sent through it."""

    def __init__(self, app: ASGIApp, messages: list[Message]) -> None:
        self.app = app
        self.messages = messages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def seen(message: Message) -> None:
            self.messages.append(message)
            await send(message)

        await self.app(scope, receive, seen if scope["type"] == "http" else send)


class AnswersInstead:
    """Answers 503 in the response's place once it starts, and drops what the app sends after."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def instead(message: Message) -> None:
            if message["type"] == "http.response.start":
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"busy", "more_body": False})

        await self.app(scope, receive, instead)


class HoldsTheStart:
    """Sends the start only with the first body message, as a compressing middleware does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: list[Message] = []

        async def holding(message: Message) -> None:
            if message["type"] == "http.response.start":
                held.append(message)
                return
            while held:
                await send(held.pop())
            await send(message)

        await self.app(scope, receive, holding)


def streaming_app(app: FastAPI, paced: bool) -> FastAPI:
    """`GET /s`: a turn log's five events and its `[DONE]`; with `paced`, each event appended
    after the last went out, so each is a chunk of its own."""

    @app.get("/s")
    async def stream() -> EventStreamResponse:
        log = TurnLog(uuid.uuid4(), "owner")
        reader = log.follow()

        async def feed() -> None:
            for event in [*EVENTS, DONE_EVENT]:
                log.append(event)
                if paced:
                    await asyncio.sleep(0.03)  # past the coalescing interval
            log.end()

        feeding = asyncio.create_task(feed())
        reader.on_cut(feeding.cancel)
        return EventStreamResponse(reader)

    return app


def expected_body() -> str:
    return "".join(f"id: {n}\n{e}" for n, e in enumerate([*EVENTS, DONE_EVENT], 1))


async def test_chunks_go_to_the_server_and_the_start_and_end_through_every_layer() -> None:
    messages: list[Message] = []
    app = streaming_app(HearthApp(), paced=True)
    app.add_middleware(Seen, messages=messages)
    app.add_middleware(RequestIdMiddleware)
    async with (
        live_server(app) as base,
        http_client(base_url=base) as client,
        client.stream("GET", "/s") as response,
    ):
        chunks = [chunk async for chunk in response.aiter_text()]
    assert response.status_code == 200
    assert response.headers["x-request-id"]  # the start went through every layer
    assert "".join(chunks) == expected_body()
    assert len(chunks) >= 3  # paced: the events went out as chunks of their own
    assert [m["type"] for m in messages] == ["http.response.start", "http.response.body"]
    assert messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def call(app: ASGIApp) -> list[Message]:
    """Run one `GET /s` through `app` in this process; what the server was sent."""
    sent: list[Message] = []
    gone = asyncio.Event()

    async def receive() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/s",
        "raw_path": b"/s",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1234),
    }
    await app(scope, receive, send)
    gone.set()
    return sent


def body_of(sent: list[Message]) -> str:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()


@pytest.mark.parametrize("paced", [True, False])
async def test_in_process_every_chunk_reaches_the_server_once(paced: bool) -> None:
    messages: list[Message] = []
    app = streaming_app(HearthApp(), paced=paced)
    app.add_middleware(Seen, messages=messages)
    sent = await call(app)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert body_of(sent) == expected_body()
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert len(messages) == 2  # the stack saw the start and the end only


async def test_a_layer_that_answers_instead_gets_the_chunks_and_the_server_only_its_answer() -> (
    None
):
    app = streaming_app(HearthApp(), paced=True)
    app.add_middleware(AnswersInstead)
    sent = await call(app)
    assert sent == [
        {"type": "http.response.start", "status": 503, "headers": []},
        {"type": "http.response.body", "body": b"busy", "more_body": False},
    ]


async def test_a_layer_that_holds_the_start_back_gets_every_chunk() -> None:
    messages: list[Message] = []
    app = streaming_app(HearthApp(), paced=True)
    app.add_middleware(Seen, messages=messages)
    app.add_middleware(HoldsTheStart)
    sent = await call(app)
    assert sent[0]["type"] == "http.response.start"
    assert body_of(sent) == expected_body()
    chunks = [m for m in messages if m["type"] == "http.response.body" and m.get("more_body")]
    assert body_of(chunks) == expected_body()  # every chunk went through the stack


async def test_without_an_outlet_every_chunk_goes_through_the_stack() -> None:
    messages: list[Message] = []
    app = streaming_app(FastAPI(), paced=True)
    app.add_middleware(Seen, messages=messages)
    sent = await call(app)
    assert body_of(sent) == expected_body()
    assert len(messages) == len(sent) >= 4


async def test_direct_send_only_for_a_response_that_started_as_sent_and_is_not_over() -> None:
    async def server(message: Message) -> None:
        return None

    outlet = Outlet(server)
    scope: Scope = {OUTLET: outlet}
    assert direct_send(scope, 200) is None  # nothing started yet
    await outlet.observe({"type": "http.response.start", "status": 200, "headers": []})
    assert direct_send(scope, 200) is server
    assert direct_send(scope, 201) is None  # another status went out: not this response
    assert direct_send({}, 200) is None
    await outlet.observe({"type": "http.response.body", "body": b"x", "more_body": True})
    assert direct_send(scope, 200) is server
    await outlet.observe({"type": "http.response.body", "body": b"", "more_body": False})
    assert direct_send(scope, 200) is None  # over
