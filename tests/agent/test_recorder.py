"""The recorder's abnormal ends, on both databases: what a stop or a failure leaves stored."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

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


async def recorder_for(user: Client, services: Services) -> Recorder:
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    return Recorder(services.sessions, chat_id, "demo/scripted", services.clock)


async def test_stop_during_a_tool_marks_it_cancelled_and_keeps_the_round(
    user: Client, services: Services
) -> None:
    recorder = await recorder_for(user, services)
    await recorder._open_round()
    await recorder.on_event(None, event=PartStartEvent(index=0, part=TextPart("Work")))  # type: ignore[arg-type]
    await recorder.on_event(None, event=PartDeltaEvent(index=0, delta=TextPartDelta("ing")))  # type: ignore[arg-type]
    call = ToolCallPart(tool_name="list_files", args={"path": "."}, tool_call_id="c1")
    ctx = SimpleNamespace(
        deps=TurnDeps(
            user_id=uuid.uuid4(), chat_id=recorder.chat_id, file_root=Path("/nonexistent")
        )
    )
    await recorder.on_event(ctx, event=FunctionToolCallEvent(part=call))  # type: ignore[arg-type]
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
    await recorder.on_event(None, event=PartStartEvent(index=0, part=TextPart("Half an ")))  # type: ignore[arg-type]
    await recorder.abort("incomplete", "connection lost")
    async with services.sessions() as db:
        message = await db.scalar(select(Message).where(Message.chat_id == recorder.chat_id))
    assert message is not None
    assert (message.status, message.content, message.error) == (
        "incomplete",
        "Half an ",
        "connection lost",
    )
