"""The offline demo model: a scripted stand-in, so a fresh install shows a whole turn.

It is a pydantic-ai `FunctionModel`, so it goes through exactly the same agent loop, recorder and
stream as a real provider: a short streamed text and a `list_files` call in the first round, and
a streamed answer that uses the tool's result in the second. Its text says plainly that it is
not a language model. It needs no key and no network, and it is deterministic.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.profiles import ModelProfile

WORD_DELAY_SECONDS = 0.01

GREETING = (
    "Hello! I am hearth's demo model: a scripted stand-in, not a language model. "
    "To show you a tool call, I will list the files in your workspace."
)


def _last_request(messages: list[ModelMessage]) -> ModelRequest | None:
    return next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def _answer(messages: list[ModelMessage], listing: str) -> str:
    question = ""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            prompt = next((p for p in message.parts if isinstance(p, UserPromptPart)), None)
            if prompt is not None and isinstance(prompt.content, str):
                question = prompt.content.strip().splitlines()[0][:80] if prompt.content else ""
                break
    first = listing.splitlines()[0] if listing else "nothing came back"
    heard = f'You wrote "{question}". ' if question else ""
    return (
        f"{heard}The tool answered: {first} "
        "This reply is scripted; configure a provider in config/providers.yaml "
        "to talk to a real model."
    )


async def _stream(
    messages: list[ModelMessage], _info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    request = _last_request(messages)
    returned = [p for p in (request.parts if request else []) if isinstance(p, ToolReturnPart)]
    if returned:
        text = _answer(messages, str(returned[-1].content))
        for word in _words(text):
            await asyncio.sleep(WORD_DELAY_SECONDS)
            yield word
        return
    for word in _words(GREETING):
        await asyncio.sleep(WORD_DELAY_SECONDS)
        yield word
    call_id = f"demo_call_{len(messages)}"
    yield {0: DeltaToolCall(name="list_files", json_args='{"path": "."}', tool_call_id=call_id)}


def demo_model(model_id: str, profile: ModelProfile | None = None) -> FunctionModel:
    return FunctionModel(stream_function=_stream, model_name=model_id, profile=profile)
