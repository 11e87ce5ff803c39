"""The fakes proven against the real clients: the official SDKs and pydantic-ai itself.

Nothing here needs a database or the app; each test starts its own fake on a loopback port.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.moonshotai import MoonshotAIProvider
from pydantic_ai.providers.openai import OpenAIProvider

from tests.fakes.providers import (
    Cut,
    Fail,
    FakeAnthropic,
    FakeOpenAI,
    FakeProviderServer,
    Hang,
    InvalidRequestBody,
    RecordedRequest,
    Reply,
    ToolCall,
    Usage,
    parse_schedule,
    schedule,
    validate_anthropic_request,
    validate_openai_request,
)
from tests.support import TLS
from tests.support import http_client as loopback_client

# The fakes' own proofs run in the full suite; the quick subset relies on them.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["anthropic", "openai", "moonshot"]


def make_fake(kind: str, **kwargs: Any) -> FakeProviderServer:
    if kind == "anthropic":
        return FakeAnthropic(**kwargs)
    return FakeOpenAI("moonshot" if kind == "moonshot" else "openai", **kwargs)


_open_http_clients: list[httpx2.AsyncClient] = []


@pytest.fixture(autouse=True)
async def close_http_clients() -> AsyncIterator[None]:
    """Close every client a test made, so no pooled socket is left for the garbage collector."""
    yield
    while _open_http_clients:
        await _open_http_clients.pop().aclose()


def http_client() -> httpx2.AsyncClient:
    client = httpx2.AsyncClient(verify=TLS)
    _open_http_clients.append(client)
    return client


def anthropic_client(fake: FakeProviderServer, retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=fake.base_url, api_key="test", max_retries=retries, http_client=http_client()
    )


def openai_client(fake: FakeProviderServer, retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=fake.base_url, api_key="test", max_retries=retries, http_client=http_client()
    )


def validate(kind: str, record: RecordedRequest) -> None:
    if kind == "anthropic":
        validate_anthropic_request(record.body, beta=FakeAnthropic.uses_beta(record))
    else:
        validate_openai_request(record.body, moonshot=kind == "moonshot")


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, str]]:
    """(event name, data) pairs of a raw SSE body."""
    event: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, line.removeprefix("data: ")
            event = None


ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "hello"}],
}
OPENAI_BODY: dict[str, Any] = {
    "model": "gpt-4.1",
    "messages": [{"role": "user", "content": "hello"}],
}


# --- the wire, read raw and through the official SDKs -----------------------------------------


async def test_anthropic_raw_sse_matches_sdk_event_types() -> None:
    events_adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    reply = Reply(
        reasoning="Let me look.",
        text="Here you go.",
        tool_calls=[ToolCall("list_files", {"path": "."})],
        chunk_chars=4,
    )
    async with FakeAnthropic() as fake:
        fake.script(reply)
        headers = {"x-api-key": "test", "anthropic-version": "2023-06-01"}
        async with (
            loopback_client() as http,
            http.stream(
                "POST",
                f"{fake.base_url}/v1/messages",
                json=ANTHROPIC_BODY | {"stream": True},
                headers=headers,
            ) as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["request-id"].startswith("req_")
            seen: list[tuple[str | None, dict[str, Any]]] = []
            async for event, data in sse_events(response):
                seen.append((event, json.loads(data)))
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    for name, data in seen:
        assert data["type"] == name
        if name != "ping":
            events_adapter.validate_python(data)
    deltas = [d["delta"] for n, d in seen if n == "content_block_delta"]
    delta_types = {d["type"] for d in deltas}
    assert delta_types == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    assert "".join(d.get("text", "") for d in deltas) == "Here you go."
    assert len([d for d in deltas if d["type"] == "text_delta"]) == 3
    arguments = "".join(d.get("partial_json", "") for d in deltas)
    assert json.loads(arguments) == {"path": "."}
    starts = [d["content_block"] for n, d in seen if n == "content_block_start"]
    assert [s["type"] for s in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["id"].startswith("toolu_") and starts[2]["input"] == {}
    final = seen[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"


async def test_anthropic_sdk_stream_with_cache_usage() -> None:
    usage = Usage(1000, 42, cache_read_tokens=600, cache_write_tokens=300)
    async with FakeAnthropic() as fake:
        fake.script(Reply(text="Cached hello.", usage=usage))
        client = anthropic_client(fake)
        async with client.messages.stream(**ANTHROPIC_BODY) as stream:
            texts = [text async for text in stream.text_stream]
            message = await stream.get_final_message()
    assert "".join(texts) == "Cached hello."
    assert len(texts) > 1
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 100
    assert message.usage.cache_read_input_tokens == 600
    assert message.usage.cache_creation_input_tokens == 300
    assert message.usage.output_tokens == 42
    record = fake.requests[0]
    assert record.body["stream"] is True
    assert record.headers["anthropic-version"]
    assert record.headers["authorization"] == "Bearer test"  # the SDK sends the key as a bearer
    assert record.validation_error is None and record.completed


async def test_anthropic_sdk_non_streaming() -> None:
    async with FakeAnthropic() as fake:
        fake.script(Reply(text="Plain.", tool_calls=[ToolCall("f", {"x": 1}, id="toolu_fixed")]))
        message = await anthropic_client(fake).messages.create(**ANTHROPIC_BODY)
    assert message.content[0].type == "text" and message.content[0].text == "Plain."
    tool_use = message.content[1]
    assert tool_use.type == "tool_use" and tool_use.id == "toolu_fixed"
    assert tool_use.input == {"x": 1}
    assert message.stop_reason == "tool_use"
    assert fake.requests[0].body.get("stream") is None


@pytest.mark.parametrize("flavour", ["openai", "moonshot"])
async def test_openai_sdk_stream(flavour: str) -> None:
    usage = Usage(input_tokens=500, output_tokens=30, cache_read_tokens=400, reasoning_tokens=7)
    reply = Reply(
        reasoning="Thinking it over.",
        text="Two files.",
        tool_calls=[ToolCall("list_files", {"path": "."}), ToolCall("read_file", {"path": "a"})],
        usage=usage,
        chunk_chars=5,
    )
    async with FakeOpenAI(flavour) as fake:  # type: ignore[arg-type]
        assert fake.base_url.endswith("/v1")
        fake.script(reply)
        stream = await openai_client(fake).chat.completions.create(
            **OPENAI_BODY, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Two files."
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content", "")
        for c in chunks
        if c.choices
    )
    assert reasoning == "Thinking it over."
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += delta.id or ""
            if delta.function:
                entry["name"] += delta.function.name or ""
                entry["arguments"] += delta.function.arguments or ""
    assert [c["name"] for c in calls.values()] == ["list_files", "read_file"]
    assert json.loads(calls[1]["arguments"]) == {"path": "a"}
    if flavour == "moonshot":
        ids = [c["id"] for c in calls.values()]
        assert ids == ["functions.list_files:0", "functions.read_file:1"]
    else:
        assert all(c["id"].startswith("call_") for c in calls.values())
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishing) == 1 and finishing[0].choices[0].finish_reason == "tool_calls"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.prompt_tokens == 500
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 400
    assert last.usage.total_tokens == 530
    if flavour == "moonshot":
        choice_usage = (finishing[0].choices[0].model_extra or {})["usage"]
        assert choice_usage["cached_tokens"] == 400
    assert all(c.usage is None for c in chunks[:-1])


async def test_openai_stream_without_include_usage_has_no_usage_chunk() -> None:
    async with FakeOpenAI() as fake:
        fake.script(Reply(text="hi"))
        stream = await openai_client(fake).chat.completions.create(**OPENAI_BODY, stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(c.choices for c in chunks)
    assert all("usage" not in c.model_fields_set for c in chunks)


async def test_moonshot_stream_continues_tool_call_numbering() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.list_files:0",
                    "type": "function",
                    "function": {"name": "list_files", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.list_files:0", "content": "[]"},
    ]
    async with FakeOpenAI("moonshot") as fake:
        fake.script(Reply(tool_calls=[ToolCall("read_file", {"path": "a"})]))
        completion = await openai_client(fake).chat.completions.create(
            model="kimi-k3",
            messages=history,  # type: ignore[arg-type]
        )
    calls = completion.choices[0].message.tool_calls or []
    assert [c.id for c in calls] == ["functions.read_file:1"]


async def test_openai_models_endpoint_needs_no_key() -> None:
    async with FakeOpenAI(models=["local-model"]) as fake:
        async with loopback_client() as http:
            response = await http.get(f"{fake.base_url}/models")
        models = await openai_client(fake).models.list()
    assert response.status_code == 200
    assert response.json()["data"][0] == {
        "id": "local-model",
        "object": "model",
        "created": 1_735_689_600,
        "owned_by": "openai",
    }
    assert [m.id for m in models.data] == ["local-model"]
    assert [r.path for r in fake.requests] == ["/v1/models", "/v1/models"]
    assert fake.model_requests == []


async def test_anthropic_models_and_count_tokens() -> None:
    async with FakeAnthropic() as fake:
        client = anthropic_client(fake)
        page = await client.models.list()
        count = await client.messages.count_tokens(
            model="claude-sonnet-5-5", messages=[{"role": "user", "content": "hello"}]
        )
    assert [m.id for m in page.data] == ["claude-sonnet-5-5", "claude-haiku-5-5"]
    assert count.input_tokens > 0


# --- pydantic-ai, two rounds with a tool call ----------------------------------------------------


def pydantic_ai_model(kind: str, fake: FakeProviderServer) -> Model:
    """The model hearth would build for `kind`, talking to `fake`."""
    url = fake.base_url
    if kind == "anthropic":
        provider = AnthropicProvider(base_url=url, api_key="test", http_client=http_client())
        return AnthropicModel("claude-sonnet-5-5", provider=provider)
    if kind == "moonshot":
        moonshot = MoonshotAIProvider(base_url=url, api_key="test", http_client=http_client())
        return OpenAIChatModel("kimi-k3", provider=moonshot)
    openai_provider = OpenAIProvider(base_url=url, api_key="test", http_client=http_client())
    return OpenAIChatModel("gpt-4.1", provider=openai_provider)


def agent_with_tool(model: Model) -> Agent[None, str]:
    agent = Agent(model, instructions="Answer briefly.")

    @agent.tool_plain
    def list_files(path: str) -> str:
        """List the files under a path."""
        return f"{path}/a.txt {path}/b.txt"

    return agent


def tool_result_of(kind: str, body: dict[str, Any]) -> tuple[str, str]:
    """The tool call id and the result text the second request sends back."""
    last = body["messages"][-1]
    if kind == "anthropic":
        assert last["role"] == "user"
        (block,) = last["content"]
        assert block["type"] == "tool_result"
        content = block["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        return block["tool_use_id"], text
    assert last["role"] == "tool"
    return last["tool_call_id"], last["content"]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
@pytest.mark.parametrize("kind", KINDS)
async def test_pydantic_ai_tool_round_trip(kind: str, streamed: bool) -> None:
    reasoning = "I should list them." if kind != "openai" else ""
    async with make_fake(kind) as fake:
        fake.script(
            Reply(
                reasoning=reasoning,
                tool_calls=[ToolCall("list_files", {"path": "docs"})],
                usage=Usage(100, 5, cache_write_tokens=80),
            ),
            Reply(
                text="There are two files: a.txt and b.txt.",
                usage=Usage(120, 9, cache_read_tokens=80),
            ),
        )
        agent = agent_with_tool(pydantic_ai_model(kind, fake))
        if streamed:
            async with agent.run_stream("What files are in docs?") as result:
                output = await result.get_output()
            usage = result.usage
        else:
            run = await agent.run("What files are in docs?")
            output, usage = run.output, run.usage
    assert output == "There are two files: a.txt and b.txt."
    assert len(fake.requests) == 2
    assert fake.pending == 0
    for record in fake.requests:
        validate(kind, record)
        assert record.validation_error is None
        assert record.completed and not record.cancelled
    first, second = (r.body for r in fake.requests)
    call_id, result_text = tool_result_of(kind, second)
    assert result_text == "docs/a.txt docs/b.txt"
    expected_prefix = {"anthropic": "toolu_", "openai": "call_", "moonshot": "functions."}[kind]
    assert call_id.startswith(expected_prefix)
    assistant = second["messages"][-2]
    if kind == "moonshot":
        assert call_id == "functions.list_files:0"
        assert assistant["reasoning_content"] == "I should list them."
    if kind == "anthropic":
        thinking = assistant["content"][0]
        assert thinking["type"] == "thinking"
        assert thinking["thinking"] == "I should list them." and thinking["signature"]
    assert usage.requests == 2
    assert (usage.input_tokens, usage.output_tokens) == (220, 14)
    assert usage.cache_read_tokens == 80
    assert usage.cache_write_tokens == (0 if kind == "moonshot" else 80)
    assert first["model"] == second["model"]


# --- failures, cuts and hangs ---------------------------------------------------------------------


async def test_anthropic_fail_status_and_retry_after() -> None:
    async with FakeAnthropic() as fake:
        fake.script(
            Fail(429, "Number of requests has exceeded your rate limit", retry_after=7),
            Fail(529, "Overloaded"),
        )
        client = anthropic_client(fake)
        with pytest.raises(anthropic.RateLimitError) as rate_limited:
            await client.messages.create(**ANTHROPIC_BODY)
        with pytest.raises(anthropic.OverloadedError) as overloaded:
            await client.messages.create(**ANTHROPIC_BODY, stream=True)
    assert rate_limited.value.status_code == 429
    assert rate_limited.value.response.headers["retry-after"] == "7"
    body = rate_limited.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"] == {
        "type": "rate_limit_error",
        "message": "Number of requests has exceeded your rate limit",
    }
    assert overloaded.value.status_code == 529
    assert isinstance(overloaded.value.body, dict)
    assert overloaded.value.body["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("flavour", ["openai", "moonshot"])
async def test_openai_fail_status_and_retry_after(flavour: str) -> None:
    async with FakeOpenAI(flavour) as fake:  # type: ignore[arg-type]
        fake.script(Fail(429, "Rate limit reached", retry_after=3), Fail(503, "Overloaded"))
        client = openai_client(fake)
        with pytest.raises(openai.RateLimitError) as rate_limited:
            await client.chat.completions.create(**OPENAI_BODY)
        with pytest.raises(openai.InternalServerError) as unavailable:
            await client.chat.completions.create(**OPENAI_BODY, stream=True)
    assert rate_limited.value.status_code == 429
    assert rate_limited.value.response.headers["retry-after"] == "3"
    expected_type = "rate_limit_reached_error" if flavour == "moonshot" else "requests"
    assert rate_limited.value.type == expected_type
    assert rate_limited.value.message.endswith("Rate limit reached")
    assert unavailable.value.status_code == 503


@pytest.mark.parametrize("kind", KINDS)
async def test_sdk_retry_honours_retry_after(kind: str) -> None:
    async with make_fake(kind) as fake:
        fake.script(Fail(429, "slow down", retry_after=0.2), Reply(text="ok"))
        started = time.monotonic()
        if kind == "anthropic":
            message = await anthropic_client(fake, retries=1).messages.create(**ANTHROPIC_BODY)
            text = message.content[0].text  # type: ignore[union-attr]
        else:
            completion = await openai_client(fake, retries=1).chat.completions.create(**OPENAI_BODY)
            text = completion.choices[0].message.content
        elapsed = time.monotonic() - started
    assert text == "ok"
    assert len(fake.requests) == 2
    assert fake.requests[0].status == 429
    assert 0.2 <= elapsed < 1.0  # retry-after-ms, not the whole-second retry-after
    gap = fake.requests[1].received_monotonic - fake.requests[0].received_monotonic
    assert gap >= 0.2


async def test_anthropic_error_event_in_stream() -> None:
    async with FakeAnthropic() as fake:
        fake.script(Fail(529, "Overloaded", in_stream=True))
        stream = await anthropic_client(fake).messages.create(**ANTHROPIC_BODY, stream=True)
        with pytest.raises(anthropic.APIStatusError) as failed:
            async for _ in stream:
                pass
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}


async def test_openai_error_in_stream() -> None:
    async with FakeOpenAI() as fake:
        fake.script(Fail(500, "The server had an error", in_stream=True))
        stream = await openai_client(fake).chat.completions.create(**OPENAI_BODY, stream=True)
        with pytest.raises(openai.APIError) as failed:
            async for _ in stream:
                pass
    assert failed.value.message == "The server had an error"


@pytest.mark.parametrize("kind", KINDS)
async def test_cut_stream_is_an_error_for_the_client(kind: str) -> None:
    async with make_fake(kind) as fake:
        fake.script(Cut(after_events=3))
        received: list[object] = []
        with pytest.raises((httpx2.HTTPError, anthropic.APIError, openai.APIError)):
            if kind == "anthropic":
                stream = await anthropic_client(fake).messages.create(**ANTHROPIC_BODY, stream=True)
            else:
                stream = await openai_client(fake).chat.completions.create(  # type: ignore[assignment]
                    **OPENAI_BODY, stream=True
                )
            async for event in stream:
                received.append(event)
        record = await fake.wait_finished()
    assert len(received) == (2 if kind == "anthropic" else 3)  # the SDK hides the ping
    assert record.dropped and not record.completed


async def test_cut_and_hang_without_streaming() -> None:
    async with FakeAnthropic() as fake:
        fake.script(Cut(after_events=0), Hang())
        client = anthropic.AsyncAnthropic(
            base_url=fake.base_url,
            api_key="test",
            max_retries=0,
            timeout=0.3,
            http_client=http_client(),
        )
        with pytest.raises(anthropic.APIConnectionError):
            await client.messages.create(**ANTHROPIC_BODY)
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(**ANTHROPIC_BODY)
        hung = await fake.wait_cancelled(1, within=1.0)
    assert fake.requests[0].dropped
    assert hung.cancelled and hung.status == 200


async def test_cut_stream_fails_a_pydantic_ai_run() -> None:
    async with FakeAnthropic() as fake:
        fake.script(Cut(after_events=4))
        agent = agent_with_tool(pydantic_ai_model("anthropic", fake))
        with pytest.raises(Exception) as failed:  # any error will do, silence won't
            async with agent.run_stream("hi") as result:
                await result.get_output()
    assert failed.value is not None
    assert fake.requests[0].dropped


@pytest.mark.parametrize("kind", KINDS)
async def test_hang_records_client_cancellation(kind: str) -> None:
    async with make_fake(kind) as fake:
        fake.script(Hang())
        opened = asyncio.Event()

        async def consume() -> None:
            if kind == "anthropic":
                stream = await anthropic_client(fake).messages.create(**ANTHROPIC_BODY, stream=True)
            else:
                stream = await openai_client(fake).chat.completions.create(  # type: ignore[assignment]
                    **OPENAI_BODY, stream=True
                )
            async for _ in stream:
                opened.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(opened.wait(), 5)
        await asyncio.wait_for(fake.requests[0].hanging.wait(), 5)  # all sent, and waiting
        assert not fake.requests[0].cancelled and not fake.requests[0].finished.is_set()
        cancelled_at = time.time()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = await fake.wait_cancelled(within=1.0)
    assert record.cancelled and not record.completed
    assert record.cancelled_at is not None
    assert 0 <= record.cancelled_at - cancelled_at < 1.0


async def test_hang_cancellation_through_pydantic_ai() -> None:
    async with FakeOpenAI("moonshot") as fake:
        fake.script(Hang())
        agent = agent_with_tool(pydantic_ai_model("moonshot", fake))

        async def run() -> None:
            async with agent.run_stream("hi") as result:
                await result.get_output()

        task = asyncio.create_task(run())
        record = await fake.wait_for_request(0)
        await asyncio.wait_for(record.hanging.wait(), 5)  # the stream is open, and hangs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = await fake.wait_cancelled(within=1.0)
    assert record.cancelled


async def test_slow_reply_cancelled_midway_is_recorded() -> None:
    async with FakeAnthropic() as fake:
        fake.script(Reply(text="x" * 50, chunk_chars=1, token_interval=0.05))
        three_seen = asyncio.Event()

        async def consume() -> None:
            seen = 0
            async with anthropic_client(fake).messages.stream(**ANTHROPIC_BODY) as stream:
                async for _ in stream.text_stream:
                    seen += 1
                    if seen == 3:
                        three_seen.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(three_seen.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        record = await fake.wait_cancelled()
    assert record.cancelled and not record.completed


async def test_a_held_reply_waits_for_its_hold() -> None:
    async with FakeOpenAI() as fake:
        hold = asyncio.Event()
        fake.script(Reply(text="held back", hold=hold), Reply(text="also held", hold=hold))
        client = openai_client(fake)
        stream = await client.chat.completions.create(**OPENAI_BODY, stream=True)
        chunks = aiter(stream)
        opening = await anext(chunks)  # the role chunk goes out at once; the text is held
        assert [choice.delta.content for choice in opening.choices] in ([None], [""])
        asking = asyncio.create_task(client.chat.completions.create(**OPENAI_BODY))
        await fake.wait_for_request(1)
        assert not fake.requests[0].finished.is_set() and not fake.requests[1].finished.is_set()
        hold.set()
        text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        answer = await asking
    assert text == "held back"
    assert answer.choices[0].message.content == "also held"


async def test_server_shutdown_ends_a_hang() -> None:
    fake = FakeOpenAI()
    await fake.start()
    fake.script(Hang())
    client = openai_client(fake)
    stream = await client.chat.completions.create(**OPENAI_BODY, stream=True)
    started = time.monotonic()
    await fake.stop()
    assert time.monotonic() - started < 3
    with pytest.raises((httpx2.HTTPError, openai.APIError)):
        async for _ in stream:
            pass


# --- scripting, auth and request checks ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_unscripted_request_gets_a_clear_500(kind: str) -> None:
    async with make_fake(kind) as fake:
        error: type[Exception] = (
            anthropic.InternalServerError if kind == "anthropic" else openai.InternalServerError
        )
        with pytest.raises(error) as failed:
            if kind == "anthropic":
                # retries allowed: x-should-retry: false must stop them
                await anthropic_client(fake, retries=2).messages.create(**ANTHROPIC_BODY)
            else:
                await openai_client(fake, retries=2).chat.completions.create(**OPENAI_BODY)
    assert "did not script this request" in str(failed.value)
    assert len(fake.requests) == 1
    assert fake.requests[0].unscripted


@pytest.mark.parametrize("kind", KINDS)
async def test_unknown_paths_are_recorded_and_get_the_provider_404(kind: str) -> None:
    async with make_fake(kind) as fake, loopback_client() as http:
        response = await http.post(f"{fake.base_url}/nowhere", json={})
    assert response.status_code == 404
    assert "no route" in response.json()["error"]["message"]
    assert fake.requests[0].path.endswith("/nowhere")


async def test_anthropic_requires_version_and_key_headers() -> None:
    async with FakeAnthropic() as fake, loopback_client() as http:
        url = f"{fake.base_url}/v1/messages"
        no_version = await http.post(url, json=ANTHROPIC_BODY, headers={"x-api-key": "k"})
        no_key = await http.post(url, json=ANTHROPIC_BODY, headers={"anthropic-version": "v"})
    assert no_version.status_code == 400
    assert no_version.json()["error"]["type"] == "invalid_request_error"
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    assert fake.requests[0].headers["x-api-key"] == "k"


@pytest.mark.parametrize("kind", KINDS)
async def test_invalid_body_is_rejected_like_the_provider_does(kind: str) -> None:
    async with make_fake(kind) as fake:
        if kind == "anthropic":
            body = copy.deepcopy(ANTHROPIC_BODY)
            body["messages"][0]["content"] = [{"type": "text", "text": "hi", "colour": "red"}]
            with pytest.raises(anthropic.BadRequestError) as failed:
                await anthropic_client(fake).messages.create(**body)
        else:
            body = copy.deepcopy(OPENAI_BODY)
            body["messages"][0]["colour"] = "red"
            with pytest.raises(openai.BadRequestError) as failed:
                await openai_client(fake).chat.completions.create(**body)
    assert "colour" in str(failed.value)
    assert "Extra inputs are not permitted" in str(failed.value)
    assert fake.requests[0].validation_error is not None
    assert fake.pending == 0


async def test_invalid_body_is_recorded_but_answered_when_not_rejecting() -> None:
    async with FakeOpenAI(reject_invalid=False) as fake:
        fake.script(Reply(text="fine"))
        completion = await openai_client(fake).chat.completions.create(
            **OPENAI_BODY, extra_body={"colour": "red"}
        )
    assert completion.choices[0].message.content == "fine"
    assert "colour" in (fake.requests[0].validation_error or "")


async def test_schedule_timing() -> None:
    reply = schedule(first_ms=150, tokens=5, interval_ms=30)
    async with FakeOpenAI() as fake:
        fake.script(reply)
        started = time.monotonic()
        stream = await openai_client(fake).chat.completions.create(**OPENAI_BODY, stream=True)
        stamps: list[float] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                stamps.append(time.monotonic() - started)
    assert len(stamps) == 5
    assert stamps[0] >= 0.15
    assert stamps[-1] - stamps[0] >= 4 * 0.03 * 0.9
    assert stamps[-1] < 2.0


def test_parse_schedule() -> None:
    reply = parse_schedule("first_ms=200,tokens=50,interval_ms=20")
    assert reply.first_token_delay == pytest.approx(0.2)
    assert reply.token_interval == pytest.approx(0.02)
    assert reply.text == "tok " * 50 and reply.chunk_chars == 4
    assert reply.usage is not None and reply.usage.output_tokens == 50
    with pytest.raises(ValueError, match="unknown schedule keys"):
        parse_schedule("first_ms=1,speed=3")


def test_usage_rejects_more_cached_than_input() -> None:
    with pytest.raises(ValueError, match="cannot exceed"):
        Usage(input_tokens=10, output_tokens=1, cache_read_tokens=11)


@pytest.mark.slow  # a fake provider process of its own
def test_subprocess_repeats_the_schedule_forever() -> None:
    """`python -m tests.fakes.providers` answers every request, for every kind, as scheduled."""
    processes = {
        kind: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fakes.providers",
                "--kind",
                kind,
                "--port",
                "0",
                "--schedule",
                "first_ms=20,tokens=3,interval_ms=5,token=hey ",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ | {"PYTHONPATH": str(ROOT)},
        )
        for kind in KINDS
    }
    try:
        for kind, process in processes.items():
            assert process.stdout is not None
            line = process.stdout.readline()
            assert f"fake {kind} listening on http://127.0.0.1:" in line, line
            base_url = line.rsplit(" ", 1)[-1].strip()  # the OpenAI fakes' ends in /v1
            with httpx.Client() as http:
                for _ in range(3):
                    if kind == "anthropic":
                        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
                        url = f"{base_url}/v1/messages"
                        response = http.post(url, json=ANTHROPIC_BODY, headers=headers)
                        text = response.json()["content"][0]["text"]
                    else:
                        url = f"{base_url}/chat/completions"
                        headers = {"authorization": "Bearer k"}
                        response = http.post(url, json=OPENAI_BODY, headers=headers)
                        text = response.json()["choices"][0]["message"]["content"]
                    assert text == "hey hey hey "
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            assert process.wait(timeout=10) == 0
            assert process.stdout is not None
            process.stdout.close()


# --- request validation ---------------------------------------------------------------------------

ANTHROPIC_FULL: dict[str, Any] = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 1024,
    "stream": True,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "find the weather tool"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "search_tools", "input": {"q": "w"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "tool_reference", "tool_name": "get_weather"}],
                }
            ],
        },
    ],
    "tools": [
        {
            "name": "search_tools",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "defer_loading": True,
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        },
    ],
}

OPENAI_FULL: dict[str, Any] = {
    "model": "gpt-4.1",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "f", "description": "", "parameters": {"type": "object"}},
        }
    ],
}


def test_anthropic_validator_accepts_caching_deferred_tools_and_tool_references() -> None:
    validate_anthropic_request(copy.deepcopy(ANTHROPIC_FULL))
    validate_anthropic_request(copy.deepcopy(ANTHROPIC_FULL), beta=True)
    custom = copy.deepcopy(ANTHROPIC_FULL)
    custom["tools"][0]["type"] = "custom"
    validate_anthropic_request(custom)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (lambda b: b, "colour"),
        (lambda b: b["system"][0], "system.0.colour"),
        (lambda b: b["system"][0]["cache_control"], "system.0.cache_control.colour"),
        (lambda b: b["messages"][1]["content"][1], "messages.1.content.1.colour"),
        (
            lambda b: b["messages"][2]["content"][0]["content"][0],
            "messages.2.content.0.content.0.colour",
        ),
        (lambda b: b["tools"][1]["cache_control"], "tools.1.cache_control.colour"),
    ],
)
def test_anthropic_validator_rejects_unknown_keys_at_any_depth(where: Any, expected: str) -> None:
    body = copy.deepcopy(ANTHROPIC_FULL)
    where(body)["colour"] = "red"
    with pytest.raises(InvalidRequestBody) as rejected:
        validate_anthropic_request(body)
    assert str(rejected.value).startswith(f"{expected}: Extra inputs are not permitted")


def test_anthropic_validator_takes_the_sampling_params_the_sdk_types_dropped() -> None:
    body = copy.deepcopy(ANTHROPIC_FULL)
    body |= {"temperature": 0.2, "top_p": 1, "top_k": 40}
    validate_anthropic_request(body)
    body["top_k"] = "40"
    with pytest.raises(InvalidRequestBody, match="top_k"):
        validate_anthropic_request(body)


def test_anthropic_validator_leaves_json_schemas_and_tool_input_open() -> None:
    body = copy.deepcopy(ANTHROPIC_FULL)
    body["tools"][0]["input_schema"]["x-anything"] = {"nested": True}
    body["messages"][1]["content"][1]["input"] = {"deep": {"colour": "red"}}
    validate_anthropic_request(body)


def test_anthropic_validator_rejects_wrong_types_and_missing_keys() -> None:
    body = copy.deepcopy(ANTHROPIC_FULL)
    body["messages"][0]["content"][0]["type"] = "txt"
    with pytest.raises(InvalidRequestBody, match=r"messages\.0\.content\.0: Input tag 'txt'"):
        validate_anthropic_request(body)
    body = copy.deepcopy(ANTHROPIC_FULL)
    del body["max_tokens"]
    with pytest.raises(InvalidRequestBody, match="max_tokens: Field required"):
        validate_anthropic_request(body)
    body = copy.deepcopy(ANTHROPIC_FULL)
    body["max_tokens"] = "1024"
    with pytest.raises(InvalidRequestBody, match="max_tokens"):
        validate_anthropic_request(body)


@pytest.mark.parametrize("moonshot", [False, True])
def test_openai_validator_rejects_unknown_nested_keys(moonshot: bool) -> None:
    validate_openai_request(copy.deepcopy(OPENAI_FULL), moonshot=moonshot)
    body = copy.deepcopy(OPENAI_FULL)
    body["messages"][1]["content"][1]["image_url"]["colour"] = "red"
    with pytest.raises(InvalidRequestBody) as rejected:
        validate_openai_request(body, moonshot=moonshot)
    assert str(rejected.value).startswith("messages.1.content.1.image_url.colour: Extra inputs")
    body = copy.deepcopy(OPENAI_FULL)
    body["messages"][2]["tool_calls"][0]["function"]["colour"] = "red"
    with pytest.raises(InvalidRequestBody, match=r"messages\.2\.tool_calls\.0\.function\.colour"):
        validate_openai_request(body, moonshot=moonshot)
    body = copy.deepcopy(OPENAI_FULL)
    body["stream_options"]["colour"] = "red"
    with pytest.raises(InvalidRequestBody, match=r"stream_options\.colour"):
        validate_openai_request(body, moonshot=moonshot)


def moonshot_extended() -> dict[str, Any]:
    body = copy.deepcopy(OPENAI_FULL)
    body["model"] = "kimi-k3"
    tools_message = {
        "role": "system",
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
    }
    body["messages"].insert(2, tools_message)
    body["messages"][3]["reasoning_content"] = "I need f."
    video = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}
    body["messages"][1]["content"].append(video)
    return body


def test_moonshot_extensions_accepted_only_for_moonshot() -> None:
    validate_openai_request(moonshot_extended(), moonshot=True)
    with pytest.raises(InvalidRequestBody) as rejected:
        validate_openai_request(moonshot_extended())
    message = str(rejected.value)
    assert "messages.2.tools: Extra inputs are not permitted" in message
    for only_one in (
        lambda b: b["messages"].pop(2),  # keep reasoning_content and video
        lambda b: b["messages"][1]["content"].pop(),  # keep the tools message
    ):
        body = moonshot_extended()
        only_one(body)
        with pytest.raises(InvalidRequestBody):
            validate_openai_request(body)
        validate_openai_request(body, moonshot=True)


def test_moonshot_tools_message_rules() -> None:
    with_content = moonshot_extended()
    with_content["messages"][2]["content"] = "tools follow"
    with pytest.raises(InvalidRequestBody, match=r"messages\.2"):
        validate_openai_request(with_content, moonshot=True)
    null_content = moonshot_extended()
    null_content["messages"][2]["content"] = None
    with pytest.raises(InvalidRequestBody):
        validate_openai_request(null_content, moonshot=True)
    empty = moonshot_extended()
    empty["messages"][2]["tools"] = []
    with pytest.raises(InvalidRequestBody, match="at least 1 item"):
        validate_openai_request(empty, moonshot=True)
    wrong_role = moonshot_extended()
    wrong_role["messages"][2]["role"] = "user"
    with pytest.raises(InvalidRequestBody):
        validate_openai_request(wrong_role, moonshot=True)
    elsewhere = moonshot_extended()
    elsewhere["messages"][1]["reasoning_content"] = "only on assistant messages"
    with pytest.raises(InvalidRequestBody, match=r"messages\.1\.reasoning_content"):
        validate_openai_request(elsewhere, moonshot=True)
    other_key = moonshot_extended()
    other_key["thinking"] = {"type": "disabled"}
    with pytest.raises(InvalidRequestBody, match="thinking"):
        validate_openai_request(other_key, moonshot=True)


async def test_moonshot_fake_accepts_extensions_openai_fake_rejects_them() -> None:
    body = moonshot_extended()
    body.pop("stream")
    body.pop("stream_options")
    async with FakeOpenAI("moonshot") as moonshot, FakeOpenAI() as plain:
        moonshot.script(Reply(text="ok"))
        completion = await openai_client(moonshot).chat.completions.create(**body)
        with pytest.raises(openai.BadRequestError):
            await openai_client(plain).chat.completions.create(**body)
    assert completion.choices[0].message.content == "ok"
