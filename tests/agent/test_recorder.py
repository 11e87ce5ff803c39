"""The recorder's abnormal ends, on both databases: what a stop or a failure leaves stored."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
)
from sqlalchemy import select

from app.agent.capabilities.recorder import Recorder
from app.models import ChatLlmTool, Message
from app.services import Services
from app.tools.deps import TurnDeps
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")


async def see(recorder: Recorder, ctx: Any, *events: Any) -> None:
    """Pass `events` through the recorder as a run's stream passes them."""

    async def stream() -> AsyncIterator[Any]:
        for event in events:
            yield event

    passed = [event async for event in recorder.wrap_run_event_stream(ctx, stream=stream())]
    assert passed == list(events)


async def recorder_for(user: Client, services: Services) -> Recorder:
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    return Recorder(services.sessions, chat_id, "demo/scripted", services.clock)


async def test_stop_during_a_tool_marks_it_cancelled_and_keeps_the_round(
    user: Client, services: Services
) -> None:
    recorder = await recorder_for(user, services)
    await recorder._open_round()
    await see(
        recorder,
        None,
        PartStartEvent(index=0, part=TextPart("Work")),
        PartDeltaEvent(index=0, delta=TextPartDelta("ing")),
    )
    call = ToolCallPart(tool_name="list_files", args={"path": "."}, tool_call_id="c1")
    ctx = SimpleNamespace(
        deps=TurnDeps(
            user_id=uuid.uuid4(), chat_id=recorder.chat_id, file_root=Path("/nonexistent")
        )
    )
    await see(recorder, ctx, FunctionToolCallEvent(part=call))
    assert ctx.deps.call_rows == {"c1": recorder.running_tools["c1"]}  # media are named by it
    await recorder.abort("cancelled", None)
    async with services.sessions() as db:
        message = await db.scalar(select(Message).where(Message.chat_id == recorder.chat_id))
        tool = await db.scalar(select(ChatLlmTool).where(ChatLlmTool.chat_id == recorder.chat_id))
    assert message is not None and tool is not None
    assert (message.status, message.content) == ("cancelled", "Working")
    assert tool.status == "cancelled"


async def test_failure_keeps_partial_text_and_error(user: Client, services: Services) -> None:
    recorder = await recorder_for(user, services)
    await recorder._open_round()
    await see(recorder, None, PartStartEvent(index=0, part=TextPart("Half an ")))
    await recorder.abort("incomplete", "connection lost")
    async with services.sessions() as db:
        message = await db.scalar(select(Message).where(Message.chat_id == recorder.chat_id))
    assert message is not None
    assert (message.status, message.content, message.error) == (
        "incomplete",
        "Half an ",
        "connection lost",
    )
