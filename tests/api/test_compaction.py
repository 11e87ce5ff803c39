"""Request-time compaction over the real path: the next question sees receipts, the stored
rows keep everything, and a question resumed after approvals keeps its own returns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.files.roots import user_root
from app.services import Services
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle
from tests.wire import conversation

pytestmark = pytest.mark.usefixtures("services", "registry")

NOTES = "".join(f"line {n}: the quarterly numbers look fine\n" for n in range(200))


def tool_answers(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def write_notes(services: Services, user: Client) -> int:
    (user_root(services.settings.data_dir, user.user["id"]) / "notes.md").write_text(NOTES)
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(NOTES.splitlines(), 1))
    return len(numbered)


async def send(user: Client, chat_id: str, content: str) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    await wait_until_idle(user, chat_id)
    return parse_stream(response.text)


async def test_the_next_question_gets_a_receipt_and_the_rows_keep_everything(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    size = write_notes(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.md"}, id="call_read")]),
        Reply(text="They look fine."),
        Reply(tool_calls=[ToolCall("list_files", {}, id="call_list")]),
        Reply(text="Only notes.md."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    await send(user, chat_id, "Summarise notes.md")
    await send(user, chat_id, "What else is there?")
    sent = [r.body for r in fake.model_requests]
    full = tool_answers(sent[1])["call_read"]
    assert len(full) == size >= 1000
    receipt = f"[read_file] notes.md — {size:,} characters, from an earlier question, not shown"
    assert tool_answers(sent[2])["call_read"] == receipt
    assert tool_answers(sent[3]) == {
        "call_read": receipt,
        "call_list": f". holds 1 entry:\nnotes.md ({len(NOTES)} bytes)",
    }
    # Within the new question each request extends the previous one; across questions only
    # the previous question's messages changed.
    before, after = conversation(sent[2]), conversation(sent[3])
    assert after[: len(before)] == before
    changed = [
        i for i, (a, b) in enumerate(zip(conversation(sent[1]), before, strict=False)) if a != b
    ]
    assert changed == [3]  # the read_file return, and nothing else
    # The stored result is whole.
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert chat["messages"][1]["tool_calls"][0]["result"] == full


async def test_turned_off_it_sends_the_history_untouched(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"compact_tool_returns": False})
    write_notes(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.md"}, id="call_read")]),
        Reply(text="Fine."),
        Reply(text="Nothing else."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    await send(user, chat_id, "Summarise notes.md")
    await send(user, chat_id, "Anything else?")
    sent = [r.body for r in fake.model_requests]
    assert tool_answers(sent[2])["call_read"] == tool_answers(sent[1])["call_read"]


async def test_a_resumed_question_keeps_its_returns_until_the_next_question(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    size = write_notes(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": "notes.md"}, id="call_read"),
                ToolCall("write_file", {"path": "summary.md", "content": "fine"}, id="call_w"),
            ]
        ),
        Reply(text="Summary written."),
        Reply(text="You are welcome."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    await send(user, chat_id, "Summarise notes.md into summary.md")
    response = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_w", "approved": True}]},
    )
    assert response.status_code == 200
    await wait_until_idle(user, chat_id)
    await send(user, chat_id, "Thanks")
    sent = [r.body for r in fake.model_requests]
    assert len(tool_answers(sent[1])["call_read"]) == size  # resumed: still the same question
    assert tool_answers(sent[2])["call_read"].startswith("[read_file] notes.md — ")


@pytest.mark.usefixtures("catalogue")
@pytest.mark.parametrize(
    ("mode", "fake_kind", "ids"),
    [
        ("anthropic_tool_reference", "anthropic", ("toolu_01Act", "toolu_02Read")),
        ("kimi_system_tools", "moonshot", ("functions.activate_tools:0", "functions.read_file:1")),
        ("none", "openai", ("call_act", "call_read")),
    ],
)
async def test_golden_request_with_compaction_per_mode(
    mode: str,
    fake_kind: str,
    ids: tuple[str, str],
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
) -> None:
    """An activation and a large read in one question; the next question's request carries the
    activation as the mode renders it and the read as a receipt."""
    from tests.golden import assert_golden
    from tests.provider_setup import DTL_MODEL_IDS

    size = write_notes(services, user)
    fake = fakes[fake_kind]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("activate_tools", {"groups": ["weather"]}, id=ids[0]),
                ToolCall("read_file", {"path": "notes.md"}, id=ids[1]),
            ]
        ),
        Reply(text="The notes look fine; weather is on."),
        Reply(text="Nothing else."),
    )
    chat_id = (await user.post("/api/chats", json={"model": DTL_MODEL_IDS[mode]})).json()["id"]
    await send(user, chat_id, "Read notes.md and turn on weather")
    await send(user, chat_id, "Anything else?")
    requests = fake.model_requests
    assert all(r.validation_error is None for r in requests)
    later = requests[-1].body
    text = json.dumps(later, ensure_ascii=False)
    assert f"[read_file] notes.md — {size:,} characters, from an earlier question" in text
    assert '\\"status\\": \\"activated\\"' in text or "tool_reference" in text
    assert_golden(f"wire_compacted_{mode}", later)


UNCOMPARED = ("id", "chat_id", "parent_id", "sibling_ids", "created_at", "tool_calls", "usage")
"""What differs between two runs of one chat: ids, times, and usage (the provider reports fewer
input tokens with compaction)."""


async def test_stored_rows_are_the_same_with_and_without_compaction(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    """Compaction changes requests only: two chats with the same turns store the same rows."""
    write_notes(services, user)
    fake = fakes["openai"]
    stored = []
    last_input: list[int] = []
    for on in (True, False):
        services.settings = services.settings.model_copy(update={"compact_tool_returns": on})
        fake.script(
            Reply(tool_calls=[ToolCall("read_file", {"path": "notes.md"}, id="call_read")]),
            Reply(text="Fine."),
            Reply(tool_calls=[ToolCall("list_files", {}, id="call_list")]),
            Reply(text="Only notes."),
        )
        chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
        await send(user, chat_id, "Summarise notes.md")
        await send(user, chat_id, "What else?")
        chat = (await user.get(f"/api/chats/{chat_id}")).json()
        last_input.append(chat["messages"][-2]["usage"]["input_tokens"])
        stored.append(
            [
                {key: value for key, value in message.items() if key not in UNCOMPARED}
                | {"alternatives": len(message["sibling_ids"]), "root": not message["parent_id"]}
                | {
                    "tool_calls": [
                        {k: v for k, v in c.items() if k != "id"} for c in message["tool_calls"]
                    ]
                }
                for message in chat["messages"]
            ]
        )
    with_compaction, without = stored
    assert with_compaction == without
    assert last_input[0] < last_input[1]  # the compacted request was the smaller one
    requests = [r.body for r in fake.model_requests]
    assert tool_answers(requests[2])["call_read"] != tool_answers(requests[6])["call_read"]
