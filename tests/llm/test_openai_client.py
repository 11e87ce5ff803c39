"""`HearthAsyncOpenAI` against the stock SDK client: the same bytes out, the same chunks in.

Each test sends the same thing through both clients to one fake provider and compares what
the fake received or what the client handed back, so a change in the SDK that the shortcuts
would miss shows up here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletionChunk
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from app.llm.wire.openai_client import HearthAsyncOpenAI
from tests.fakes.providers import FakeOpenAI, RecordedRequest, Reply, ToolCall, Usage
from tests.support import TLS

VARYING_HEADERS = {"x-stainless-retry-count", "x-stainless-read-timeout", "content-length"}


@pytest.fixture
async def http_clients() -> AsyncIterator[list[httpx2.AsyncClient]]:
    clients: list[httpx2.AsyncClient] = []
    yield clients
    for client in clients:
        await client.aclose()


def pair(fake: FakeOpenAI, http_clients: list[httpx2.AsyncClient]) -> list[openai.AsyncOpenAI]:
    """The stock client and hearth's, alike in everything else."""
    made = []
    for cls in (openai.AsyncOpenAI, HearthAsyncOpenAI):
        http = httpx2.AsyncClient(verify=TLS)
        http_clients.append(http)
        made.append(cls(base_url=fake.base_url, api_key="k", max_retries=0, http_client=http))
    return made


def sent(record: RecordedRequest) -> tuple[Any, dict[str, str], str]:
    headers = {k: v for k, v in record.headers.items() if k.lower() not in VARYING_HEADERS}
    return record.body, headers, record.path


def dump(chunk: ChatCompletionChunk) -> dict[str, Any]:
    """A chunk's fields, less those the fake makes up per response."""
    return chunk.model_dump(exclude={"id", "created", "system_fingerprint"})


@pytest.mark.parametrize("stream", [True, False])
async def test_a_direct_call_sends_what_the_stock_sdk_sends(
    stream: bool, http_clients: list[httpx2.AsyncClient]
) -> None:
    call: dict[str, Any] = {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "list_files", "arguments": '{"path": "."}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "list_files",
                    "description": "List files.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": "auto",
        "max_completion_tokens": 64,
        "temperature": None,  # an explicit null is sent; `omit` is not
        "top_p": openai.omit,
        "seed": openai.NOT_GIVEN,
        "extra_headers": {"x-trace": "1"},
        "extra_query": {"q": "v"},
        "extra_body": {"user": "u-1"},
        "timeout": 30.0,
    }
    if stream:
        call |= {"stream": True, "stream_options": {"include_usage": True}}
    async with FakeOpenAI() as fake:
        for client in pair(fake, http_clients):
            fake.script(Reply(text="Done."))
            result = await client.chat.completions.create(**call)
            if stream:
                assert isinstance(result, openai.AsyncStream)
                texts = [c.choices[0].delta.content async for c in result if c.choices]
                assert "".join(t or "" for t in texts) == "Done."
            else:
                assert result.choices[0].message.content == "Done."  # type: ignore[union-attr]
        stock, hearth = fake.model_requests
    assert sent(hearth) == sent(stock)
    assert "top_p" not in hearth.body and "seed" not in hearth.body
    assert hearth.body["temperature"] is None
    assert hearth.body["user"] == "u-1"
    assert hearth.query == stock.query == "q=v"
    assert hearth.validation_error is None


async def test_a_pydantic_ai_run_sends_what_the_stock_sdk_sends(
    http_clients: list[httpx2.AsyncClient],
) -> None:
    """Two rounds (a tool call, then text), as the turns make them, body for body."""

    def list_files(path: str) -> str:
        """List files."""
        return f"{path}: a.txt"

    async with FakeOpenAI() as fake:
        outputs = []
        for client in pair(fake, http_clients):
            call = ToolCall("list_files", {"path": "."}, id="call_1")
            fake.script(Reply(tool_calls=[call]), Reply("One."))
            model = OpenAIChatModel("gpt-4.1", provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, tools=[list_files], instructions="Be brief.")
            async with agent.run_stream("Which files?") as run:
                outputs.append(await run.get_output())
        requests = fake.model_requests
    assert outputs == ["One.", "One."]
    assert len(requests) == 4
    for stock, hearth in zip(requests[:2], requests[2:], strict=True):
        assert sent(hearth) == sent(stock)


async def test_streamed_chunks_equal_the_stock_sdks(
    http_clients: list[httpx2.AsyncClient],
) -> None:
    reply = Reply(
        reasoning="Thinking it over.",
        text="Two files.",
        tool_calls=[ToolCall("list_files", {"path": "."})],
        usage=Usage(input_tokens=50, output_tokens=9, cache_read_tokens=40),
        chunk_chars=3,
    )
    received: list[list[ChatCompletionChunk]] = []
    async with FakeOpenAI("moonshot") as fake:
        for client in pair(fake, http_clients):
            fake.script(reply)
            stream = await client.chat.completions.create(
                model="kimi",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            received.append([chunk async for chunk in stream])
    stock, hearth = received
    assert len(hearth) == len(stock) > 10
    for ours, theirs in zip(hearth, stock, strict=True):
        assert type(ours) is type(theirs) is ChatCompletionChunk
        assert dump(ours) == dump(theirs)
        assert ours.model_fields_set == theirs.model_fields_set
        for mine, stocks in zip(ours.choices, theirs.choices, strict=True):
            assert mine.delta.model_extra == stocks.delta.model_extra
            assert mine.model_extra == stocks.model_extra
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content", "")
        for c in hearth
        if c.choices
    )
    assert reasoning == "Thinking it over."


@pytest.mark.parametrize(
    "chunk",
    [
        # what lenient servers have sent: a string timestamp, a choice without an index
        {"id": "x", "object": "chat.completion.chunk", "created": "now", "model": "m",
         "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]},
        {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"delta": {"content": "b"}, "finish_reason": "eos"}]},
    ],
)  # fmt: skip
def test_a_chunk_the_schema_rejects_is_built_as_the_sdk_builds_it(
    chunk: dict[str, Any],
) -> None:
    with pytest.raises(ValueError):
        ChatCompletionChunk.model_validate(chunk)
    response = httpx2.Response(200)
    built = [
        cls(base_url="http://127.0.0.1:9/v1", api_key="k")._process_response_data(
            data=json.loads(json.dumps(chunk)), cast_to=ChatCompletionChunk, response=response
        )
        for cls in (openai.AsyncOpenAI, HearthAsyncOpenAI)
    ]
    stock, hearth = built
    assert type(hearth) is type(stock) is ChatCompletionChunk
    assert hearth.model_dump(warnings=False) == stock.model_dump(warnings=False)
    assert hearth.choices[0].delta.content == chunk["choices"][0]["delta"]["content"]
