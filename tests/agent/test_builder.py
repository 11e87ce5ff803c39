"""The message builder is a pure function of the rows: golden snapshots and its replay rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    INTERRUPTED_TOOL_RETURN_CONTENT,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agent.history import build_history
from app.agent.rows import StoredMessage, StoredToolCall
from tests.golden import assert_golden

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def row(n: int, role: str, content: str = "", **kw: Any) -> StoredMessage:
    return StoredMessage(
        id=n,
        role=role,
        content=content,
        reasoning=kw.get("reasoning"),
        status=kw.get("status", "ok"),
        model=kw.get("model", "p/m" if role == "assistant" else None),
        provider_details=kw.get("provider_details"),
        meta={},
        created_at=T0 + timedelta(seconds=n),
        tool_calls=tuple(kw.get("tool_calls", ())),
    )


def call(n: int, call_id: str, status: str, result: str | None = None) -> StoredToolCall:
    return StoredToolCall(n, call_id, "list_files", {"path": "."}, status, result)


def stored_response(*parts: Any) -> dict[str, Any]:
    response = ModelResponse(parts=list(parts), model_name="claude", timestamp=T0)
    return {"response": ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]}


def chat_rows() -> list[StoredMessage]:
    return [
        row(1, "user", "What is in my files?"),
        row(2, "assistant", "Let me look.", tool_calls=[call(1, "c1", "done", "a.txt")]),
        row(3, "assistant", "Found a.txt."),
        row(4, "user", "And now?"),
        row(
            5,
            "assistant",
            "",
            provider_details=stored_response(
                ThinkingPart(content="hmm", signature="sig-1", provider_name="anthropic"),
                ToolCallPart(tool_name="list_files", args={"path": "x"}, tool_call_id="c2"),
                ToolCallPart(tool_name="list_files", args={"path": "y"}, tool_call_id="c3"),
            ),
            tool_calls=[call(2, "c2", "failed", "x does not exist"), call(3, "c3", "running")],
        ),
        row(6, "assistant", "Partial ans", status="cancelled"),
        row(7, "assistant", "", status="failed"),
        row(8, "user", "Try again"),
    ]


def test_history_golden() -> None:
    history = build_history(chat_rows())
    assert_golden("builder_history", ModelMessagesTypeAdapter.dump_python(history, mode="json"))


def test_same_rows_same_history() -> None:
    first = ModelMessagesTypeAdapter.dump_json(build_history(chat_rows()))
    second = ModelMessagesTypeAdapter.dump_json(build_history(chat_rows()))
    assert first == second


def test_replay_rules() -> None:
    history = build_history(chat_rows())
    kinds = [type(m).__name__ for m in history]
    # the failed round with nothing said is left out; every call is answered right after it
    assert kinds == [
        "ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse",
        "ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse", "ModelRequest",
    ]  # fmt: skip
    assert isinstance(history[0], ModelRequest)
    [prompt] = history[0].parts
    assert isinstance(prompt, UserPromptPart) and prompt.content == "What is in my files?"
    returns = history[2].parts
    assert isinstance(returns[0], ToolReturnPart) and returns[0].content == "a.txt"

    thinking_round = history[5]
    assert isinstance(thinking_round, ModelResponse)
    thinking = thinking_round.parts[0]
    assert isinstance(thinking, ThinkingPart) and thinking.signature == "sig-1"

    failed, interrupted = history[6].parts
    assert isinstance(failed, ToolReturnPart) and failed.content == "x does not exist"
    assert failed.outcome == "retried"
    assert isinstance(interrupted, ToolReturnPart)
    assert interrupted.outcome == "interrupted"
    assert interrupted.content == INTERRUPTED_TOOL_RETURN_CONTENT

    partial = history[7]
    assert isinstance(partial, ModelResponse)
    assert partial.parts == [TextPart(content="Partial ans")]
    last = history[8]
    assert isinstance(last, ModelRequest)
    assert isinstance(last.parts[0], UserPromptPart) and last.parts[0].content == "Try again"


def test_call_without_a_row_is_answered_as_interrupted() -> None:
    rows = [
        row(1, "user", "hi"),
        row(
            2,
            "assistant",
            provider_details=stored_response(
                ToolCallPart(tool_name="list_files", args={}, tool_call_id="lost")
            ),
        ),
    ]
    history = build_history(rows)
    [answer] = history[-1].parts
    assert isinstance(answer, ToolReturnPart)
    assert (answer.tool_call_id, answer.outcome) == ("lost", "interrupted")


def activation_rows() -> list[StoredMessage]:
    activate = StoredToolCall(
        1,
        "c-act",
        "activate_tools",
        {"groups": ["weather", "mail"]},
        "done",
        '[{"group": "weather", "status": "activated"}, {"group": "mail", "status": "activated"}]',
    )
    return [
        row(1, "user", "Turn on weather and mail"),
        StoredMessage(**{**_fields(row(2, "assistant", "")), "tool_calls": (activate,)}),
        row(3, "assistant", "Both on."),
        row(4, "user", "Thanks"),
        row(5, "assistant", "Welcome."),
        row(6, "user", "Forecast?"),
    ]


def _fields(message: StoredMessage) -> dict[str, Any]:
    return {name: getattr(message, name) for name in StoredMessage.__slots__}


def test_an_activation_a_summary_covers_is_rendered_at_the_summary() -> None:
    """Anchored at a covered round, the groups ride on the first surviving request (where each
    model class renders them), in activation order; a later anchor stays at its own return."""
    rows = activation_rows()
    anchors = {2: ["weather", "mail"]}
    whole = build_history(rows, anchors)
    returns = whole[2]
    assert isinstance(returns, ModelRequest)
    assert returns.parts[0].metadata == {"hearth_activated": ["weather", "mail"]}

    summarised = build_history(rows, anchors, covered_up_to=3)
    first = summarised[0]
    assert isinstance(first, ModelRequest) and first.metadata is not None
    assert first.metadata["hearth_activated"] == ["weather", "mail"]
    last = summarised[-1]
    assert isinstance(last, ModelRequest) and last.metadata is not None
    assert "hearth_activated" not in last.metadata  # rendered once, at the summary
    # Nothing covered: nothing rendered at the first message.
    assert "hearth_activated" not in (whole[0].metadata or {})


def test_an_older_release_moved_anchor_renders_where_it_was_moved() -> None:
    """An anchor an older release moved onto a surviving user message is rendered there,
    beside the ones a newer summary covers."""
    rows = activation_rows()
    history = build_history(rows, {2: ["weather"], 4: ["mail"]}, covered_up_to=3)
    first = history[0]
    assert isinstance(first, ModelRequest) and first.metadata is not None
    assert first.metadata["hearth_activated"] == ["weather", "mail"]
