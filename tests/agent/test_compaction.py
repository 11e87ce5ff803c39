"""Request-time compaction as a pure function: receipts for earlier questions' large returns,
new objects only, everything else as it was."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agent.capabilities.compaction import compact_earlier_returns
from app.llm.dtl import MESSAGE_ID_KEY

AT = datetime(2026, 11, 30, tzinfo=UTC)
BIG = "x" * 12_345
RECEIPT = "[read_file] docs/a.md — 12,345 characters, from an earlier question, not shown"


def question(message_id: int, text: str) -> ModelRequest:
    return ModelRequest(
        parts=[UserPromptPart(content=text, timestamp=AT)], metadata={MESSAGE_ID_KEY: message_id}
    )


def round_trip(call_id: str, tool: str, args: dict[str, str], result: str) -> list:
    return [
        ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=call_id)], timestamp=AT),
        ModelRequest(parts=[ToolReturnPart(tool, result, tool_call_id=call_id, timestamp=AT)]),
    ]


def chat() -> list:
    return [
        question(1, "Read a"),
        *round_trip("c1", "read_file", {"path": "docs/a.md"}, BIG),
        *round_trip("c2", "list_files", {"path": "."}, "small"),
        *round_trip("c3", "activate_tools", {"groups": "weather"}, "y" * 5000),
        ModelResponse(parts=[TextPart("Done.")], timestamp=AT),
        question(7, f"Quoting you: {RECEIPT}"),
        *round_trip("c4", "read_file", {"path": "docs/b.md"}, BIG),
    ]


def returns(messages: list) -> dict[str, str]:
    return {
        p.tool_call_id: p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def test_earlier_large_returns_become_receipts_and_nothing_else_changes() -> None:
    messages = chat()
    before = ModelMessagesTypeAdapter.dump_json(messages)
    snapshot = copy.deepcopy(messages)
    compacted = compact_earlier_returns(messages, question_id=7)
    assert returns(compacted) == {"c1": RECEIPT, "c2": "small", "c3": "y" * 5000, "c4": BIG}
    # The input (the run's own history) is untouched, object for object.
    assert ModelMessagesTypeAdapter.dump_json(messages) == before
    assert messages == snapshot
    # Every call stays paired; the user quoting a receipt is user content, left alone.
    assert len(compacted) == len(messages)
    assert compacted[-3].parts[0].content == f"Quoting you: {RECEIPT}"
    assert compacted[0] is messages[0]


def test_the_question_in_progress_keeps_its_own_returns() -> None:
    messages = chat()
    assert returns(compact_earlier_returns(messages, question_id=1)) == returns(messages)
    # A question that is not in the history (nothing to tell earlier from current): untouched.
    assert compact_earlier_returns(messages, question_id=99) is messages
