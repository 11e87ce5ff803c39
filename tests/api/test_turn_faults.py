"""What a model, a tool or hearth itself can get wrong in a turn, driven by a scripted model.

Each fault ends as a tool error the model reads (a `failed` row, and the turn goes on) or as a
plain message: never a crashed turn, never a row left `running`, and nothing stored, streamed or
sent to the model carries the data directory's absolute path or database and driver text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy import Update, func, select, update

from app.agent import leases
from app.agent import turn as turns_module
from app.agent.capabilities import recorder as recorder_module
from app.agent.leases import INTERRUPTED_CALL, INTERRUPTED_ROUND
from app.files.roots import user_root
from app.models import Chat, ChatLlmTool, Message
from app.services import Services
from app.tools import files as files_module
from app.tools.writing import MAX_WRITE_BYTES
from tests.clock import ShiftedClock
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")

LEAKS = ("SELECT", "INSERT", "UPDATE ", "[SQL", "sqlalchemy", "asyncpg", "psycopg", "Traceback")


async def new_chat(user: Client, kind: str = "openai") -> str:
    return (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]


async def send(user: Client, chat_id: str, content: str, **kwargs: Any) -> httpx.Response:
    response = await user.post(
        f"/api/chats/{chat_id}/messages", json={"content": content}, **kwargs
    )
    assert response.status_code == 200, response.text
    return response


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def calls_of(chat: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["tool_call_id"]: c for m in chat["messages"] for c in m["tool_calls"]}


def assert_clean(services: Services, *texts: str) -> None:
    """No absolute host path and no database or driver text in anything a user or model sees."""
    data_dir = str(services.settings.data_dir.resolve())
    for text in texts:
        assert data_dir not in text
        for leak in LEAKS:
            assert leak not in text, (leak, text[:2000])


def assert_settled(chat: dict[str, Any]) -> None:
    assert not chat["running"]
    assert all(m["status"] != "streaming" for m in chat["messages"])
    assert all(c["status"] != "running" for c in calls_of(chat).values())


async def test_os_errors_of_the_file_tools_are_tool_errors_with_relative_paths(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    root = user_root(services.settings.data_dir, user.user["id"])
    (root / "a.txt").write_text("a file\n")
    long_name = "x" * 300
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": long_name}, id="call_long"),
                ToolCall("list_files", {"path": long_name}, id="call_list_long"),
                ToolCall("list_files", {"path": "a.txt/b"}, id="call_list_through"),
                ToolCall("read_file", {"path": "a.txt/b"}, id="call_read_through"),
            ]
        ),
        Reply(tool_calls=[ToolCall("read_file", {"path": "y" * 300}, id="call_again")]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt/b/c.txt", "content": "c"})]),
        Reply(text="Those paths do not work."),
    )
    chat_id = await new_chat(user)
    first = await send(user, chat_id, "Read them")
    chunks = parse_stream(first.text)
    assert "error" not in [c["type"] for c in chunks], chunks
    [approval] = [c for c in chunks if c["type"] == "tool-approval-request"]
    resumed = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": approval["toolCallId"], "approved": True}]},
    )
    assert resumed.status_code == 200
    assert "error" not in [c["type"] for c in parse_stream(resumed.text)]

    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    assert [m["status"] for m in chat["messages"][1:]] == ["ok"] * 4
    assert chat["messages"][-1]["content"] == "Those paths do not work."
    calls = calls_of(chat)
    assert calls["call_long"]["result"] == f"{long_name}: the name is too long"
    assert calls["call_list_long"]["result"] == f"{long_name}: the name is too long"
    assert calls["call_again"]["status"] == "failed"  # a second failing round ends nothing
    written = calls[approval["toolCallId"]]
    assert written["status"] == "failed"
    assert written["result"] == "a.txt/b/c.txt: a part of the path is a file, not a folder"
    assert all(c["status"] == "failed" for c in calls.values())
    sent = json.dumps([r.body for r in fake.model_requests])
    assert_clean(services, first.text, resumed.text, json.dumps(chat), sent)
    assert (root / "a.txt").read_text() == "a file\n"


async def test_a_nul_byte_after_the_first_8_kib_is_binary_and_nul_never_fails_a_write(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    root = user_root(services.settings.data_dir, user.user["id"])
    (root / "late-nul.txt").write_bytes(b"line\n" * 2000 + b"then a \x00 byte\n")
    fake.script(
        Reply(
            text="Reading \x00 it.",
            tool_calls=[
                ToolCall("read_file", {"path": "late-nul.txt"}, id="call_read"),
                ToolCall("list_files", {"path": "no\x00where"}, id="call_nul_arg"),
            ],
        ),
        Reply(text="It is binary."),
    )
    chat_id = await new_chat(user)
    response = await send(user, chat_id, "Read late-nul.txt")
    assert "error" not in [c["type"] for c in parse_stream(response.text)]
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    first, last = chat["messages"][1:]
    assert (first["status"], last["status"]) == ("ok", "ok")
    assert first["content"] == "Reading \ufffd it."
    calls = calls_of(chat)
    assert calls["call_read"]["status"] == "failed"
    assert (
        calls["call_read"]["result"] == "late-nul.txt is a binary file; it cannot be read as text"
    )
    assert calls["call_nul_arg"]["status"] == "failed"
    assert calls["call_nul_arg"]["arguments"] == {"path": "no\ufffdwhere"}
    assert last["content"] == "It is binary."
    assert_clean(services, response.text, json.dumps(chat))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_oversized_tool_names_and_ids_are_answered_as_errors(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes[kind]
    long_name, long_id, other_id = "n" * 250, "i" * 250, "j" * 250
    fake.script(
        Reply(
            tool_calls=[
                ToolCall(long_name, {}, id=long_id),
                ToolCall("list_files", {"path": "."}, id=other_id),
            ]
        ),
        Reply(text="Sorry."),
        Reply(text="Still here."),
    )
    chat_id = await new_chat(user, kind)
    response = await send(user, chat_id, "Call it")
    assert "error" not in [c["type"] for c in parse_stream(response.text)]
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    assert [m["status"] for m in chat["messages"][1:]] == ["ok", "ok"]
    assert all(m["error"] is None for m in chat["messages"])
    rows = chat["messages"][1]["tool_calls"]
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert all(len(r["tool_call_id"]) <= 200 and len(r["name"]) <= 200 for r in rows)
    assert rows[0]["result"].startswith("Unknown tool name")
    assert rows[1]["result"] == "This call was not run: its id is longer than 200 characters."

    # The ids go back to the provider exactly as it sent them, now and in later turns.
    await send(user, chat_id, "And now?")
    for request in fake.model_requests[1:]:
        assert request.validation_error is None, request.validation_error
        sent = json.dumps(request.body)
        assert sent.count(long_id) == 2 and sent.count(other_id) == 2
    assert_clean(services, response.text, json.dumps(chat))


async def test_repeated_tool_call_ids_in_one_round(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    root = user_root(services.settings.data_dir, user.user["id"])
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("list_files", {"path": "."}, id="call_l"),
                ToolCall("list_files", {"path": "."}, id="call_l"),
                ToolCall("write_file", {"path": "p.txt", "content": "P"}, id="call_w"),
                ToolCall("write_file", {"path": "q.txt", "content": "Q"}, id="call_w"),
            ]
        ),
        Reply(text="One of each ran."),
    )
    chat_id = await new_chat(user)
    response = await send(user, chat_id, "Write twice")
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks]
    assert [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"] == ["call_w"]
    chat = await wait_until_idle(user, chat_id)
    assert {i: c["status"] for i, c in calls_of(chat).items()} == {
        "call_l": "done",
        "call_l-2": "failed",
        "call_w": "pending",
        "call_w-2": "failed",
    }
    decided = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_w", "approved": True}]},
    )
    assert decided.status_code == 200
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    assert calls_of(chat)["call_w"]["status"] == "done"
    assert chat["messages"][-1]["content"] == "One of each ran."
    assert (root / "p.txt").read_text() == "P" and not (root / "q.txt").exists()
    answers = tool_messages(fake.model_requests[1].body)
    assert set(answers) == {"call_l", "call_l-2", "call_w", "call_w-2"}
    assert "repeats the id" in answers["call_w-2"]


@pytest.mark.parametrize("where", ["in the run", "before the run"])
async def test_a_fault_of_hearths_own_shows_no_internal_text(
    where: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "(sqlalchemy.exc.OperationalError) SELECT password_hash FROM users"

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(secret)

    if where == "in the run":
        monkeypatch.setattr(recorder_module, "preview", broken)
        calls = [ToolCall("list_files", {"path": "."}, id="call_l")]
        calls.append(ToolCall("write_file", {"path": "w.txt", "content": "w"}, id="call_w"))
        fakes["openai"].script(Reply(text="Working.", tool_calls=calls))
    else:

        async def broken_history(self: Any, path: Any = None) -> Any:
            broken()

        monkeypatch.setattr(turns_module.Turn, "_history", broken_history)
    chat_id = await new_chat(user)
    with caplog.at_level(logging.WARNING, logger="hearth"):
        response = await send(user, chat_id, "Go", headers={"X-Request-ID": "req-fault-1"})
    assert response.headers["x-request-id"] == "req-fault-1"
    told = "hearth could not finish this turn because of an internal error (request req-fault-1)."
    [error] = [c for c in parse_stream(response.text) if c["type"] == "error"]
    assert error["errorText"] == told
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    last = chat["messages"][-1]
    assert (last["status"], last["error"]) == ("failed", told)
    assert_clean(services, response.text, json.dumps(chat))
    logged = "\n".join(
        f"{r.getMessage()} {r.exc_info[1] if r.exc_info else ''}" for r in caplog.records
    )
    assert secret in logged and "req-fault-1" in logged and chat_id in logged


async def test_request_ids_are_made_when_missing_and_plain_ones_are_kept(user: Client) -> None:
    made = await user.get("/api/chats")
    assert len(made.headers["x-request-id"]) >= 16
    kept = await user.get("/api/chats", headers={"X-Request-ID": "abc-123"})
    assert kept.headers["x-request-id"] == "abc-123"
    odd = await user.get("/api/chats", headers={"X-Request-ID": "a b\tc"})
    assert odd.headers["x-request-id"] != "a b\tc"


async def test_the_approved_preview_is_all_that_is_written(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    root = user_root(services.settings.data_dir, user.user["id"])
    content = "".join(f"line {n}\n" for n in range(40_000))  # over 300,000 characters
    too_big = "z" * (MAX_WRITE_BYTES + 1)
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "big.txt", "content": content}, id="call_big"),
                ToolCall("write_file", {"path": "huge.txt", "content": too_big}, id="call_huge"),
                ToolCall("write_file", {"path": "nul.txt", "content": "a\x00b"}, id="call_nul"),
            ],
            chunk_chars=1 << 23,
        ),
        Reply(text="Written."),
    )
    chat_id = await new_chat(user)
    chunks = parse_stream((await send(user, chat_id, "Write big.txt")).text)
    approvals = [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"]
    assert approvals == ["call_big"]  # writes that cannot happen are not put to the user
    chat = await wait_until_idle(user, chat_id)
    calls = calls_of(chat)
    assert calls["call_big"]["preview_new"] == content
    assert calls["call_huge"]["status"] == calls["call_nul"]["status"] == "failed"
    assert calls["call_huge"]["preview_new"] is None
    assert "at most" in calls["call_huge"]["result"]
    assert "NUL" in calls["call_nul"]["result"]
    decided = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_big", "approved": True}]},
    )
    assert decided.status_code == 200
    await wait_until_idle(user, chat_id)
    assert (root / "big.txt").read_text() == calls["call_big"]["preview_new"]
    assert not (root / "huge.txt").exists() and not (root / "nul.txt").exists()


async def test_writes_past_the_storage_quota_are_tool_errors_that_write_nothing(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"user_storage_bytes": 1000})
    fake = fakes["openai"]
    root = user_root(services.settings.data_dir, user.user["id"])
    (root / "kept.txt").write_bytes(b"k" * 600)
    fits = ToolCall("write_file", {"path": "fits.txt", "content": "f" * 300}, id="call_fits")
    over = ToolCall("write_file", {"path": "over.txt", "content": "o" * 500}, id="call_over")
    # Replacing a file counts only what it adds: 600 bytes become 900.
    swap = ToolCall("write_file", {"path": "kept.txt", "content": "r" * 900}, id="call_swap")
    fake.script(
        Reply(tool_calls=[fits, over]),
        Reply(text="Wrote what fits."),
        Reply(tool_calls=[swap]),
        Reply(text="Replaced."),
    )
    chat_id = await new_chat(user)
    chunks = parse_stream((await send(user, chat_id, "Write them")).text)
    approvals = [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"]
    assert approvals == ["call_fits"]  # the one that cannot fit asks nobody
    chat = await wait_until_idle(user, chat_id)
    refused = calls_of(chat)["call_over"]
    assert refused["status"] == "failed"
    assert "storage quota of 1000 bytes (600 bytes in use)" in refused["result"]
    assert_clean(services, refused["result"])

    # Meanwhile something else takes the room: the approved write is refused when it runs.
    (root / "meanwhile.txt").write_bytes(b"m" * 200)
    decided = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_fits", "approved": True}]},
    )
    assert decided.status_code == 200
    chat = await wait_until_idle(user, chat_id)
    late = calls_of(chat)["call_fits"]
    assert late["status"] == "failed"
    assert "storage quota of 1000 bytes (800 bytes in use)" in late["result"]
    assert not (root / "fits.txt").exists() and not (root / "over.txt").exists()

    (root / "meanwhile.txt").unlink()
    chunks = parse_stream((await send(user, chat_id, "Replace kept.txt")).text)
    assert [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"] == [
        "call_swap"
    ]
    decided = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_swap", "approved": True}]},
    )
    assert decided.status_code == 200
    chat = await wait_until_idle(user, chat_id)
    assert calls_of(chat)["call_swap"]["status"] == "done"
    assert (root / "kept.txt").read_bytes() == b"r" * 900


async def three_questions(user: Client, fake: FakeProviderServer, last: Reply) -> str:
    fake.script(Reply(text="A is 1."), Reply(text="B is 2."), last)
    chat_id = await new_chat(user)
    for question in ("What is A?", "What is B?", "What is C?"):
        await send(user, chat_id, question)
        await wait_until_idle(user, chat_id)
    return chat_id


@pytest.mark.slow
@pytest.mark.parametrize("how", ["on request", "at turn start"])
async def test_no_turn_starts_beside_a_summary_that_outlasts_the_lease(
    how: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    clock: ShiftedClock,
) -> None:
    from tests.fakes.providers import Usage

    lease = 1
    services.settings = services.settings.model_copy(
        update={"compact_keep": 2, "turn_lease_seconds": lease}
    )
    fake = fakes["openai"]
    near_the_window = Usage(input_tokens=100_000, output_tokens=5)
    chat_id = await three_questions(
        user, fake, Reply(text="C is 3.", usage=near_the_window if how == "at turn start" else None)
    )
    summarised = asyncio.Event()  # the summary's answer waits for it
    fake.script(Reply(text="Summary: A=1, B=2.", hold=summarised), Reply(text="D is 4."))
    if how == "on request":
        running = asyncio.create_task(user.post(f"/api/chats/{chat_id}/compact"))
    else:
        running = asyncio.create_task(send(user, chat_id, "What is D?"))
    await fake.wait_for_request(3)  # the summary request is under way
    clock.advance(seconds=2 * lease + 0.5)  # longer than the lease the summary started with

    async def lease_renewed() -> bool:  # by the supervisor's next tick, after the jump
        async with services.sessions() as db:
            until = await db.scalar(select(Chat.turn_lease_until).where(Chat.id == UUID(chat_id)))
        return until is not None and until > clock.now()

    try:
        await wait_until(lease_renewed, failure="the summary's lease lapsed")
        beside = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Me too"})
        assert beside.status_code == 409, beside.text
    finally:
        summarised.set()
    done = await running
    assert done.status_code == 200, done.text
    chat = await wait_until_idle(user, chat_id)
    assert len(chat["summaries"]) == 1
    assert [m["content"] for m in chat["messages"] if m["role"] == "user"][-1] != "Me too"


async def test_a_turn_that_stalled_past_its_lease_ends_as_interrupted_not_as_stopped(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services, clock: ShiftedClock
) -> None:
    """Its process stalled past the lease, so another worker settled the chat, and the turn
    went on (a round, a call, a new round) until its next renewal told it: what it stored
    after the settling is closed the way the settling would have closed it."""
    fake = fakes["openai"]
    answered, writing = asyncio.Event(), asyncio.Event()
    fake.script(
        Reply(tool_calls=[ToolCall("list_files", {"path": "."})], hold=answered),
        Reply(text="Still writing.", hold=writing),
    )
    chat_id = await new_chat(user)
    running = asyncio.create_task(send(user, chat_id, "Files?"))
    try:
        await fake.wait_for_request(0)
        async with services.sessions() as db:  # another worker's sweep, the lease long lapsed
            settled = await leases.sweep(db, clock.now() + timedelta(minutes=5), live=set())
            await db.commit()
        assert settled == [UUID(chat_id)]
        answered.set()
        await fake.wait_for_request(1)  # the stalled turn went on: a call, then a second round
        services.settings = services.settings.model_copy(update={"turn_lease_seconds": 1})
        response = await asyncio.wait_for(running, 10)  # its next renewal stops it
    finally:
        answered.set()
        writing.set()
    chunks = parse_stream(response.text)
    types = [c["type"] for c in chunks]
    assert "abort" in types and types[-1] == "[DONE]", types  # its client is told it ended
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    [_, first, second] = chat["messages"]
    assert first["status"] == "incomplete" and first["error"] == INTERRUPTED_ROUND  # the sweep's
    [call] = first["tool_calls"]
    assert call["status"] == "done"
    assert second["status"] == "incomplete" and second["error"] == INTERRUPTED_ROUND
    assert chat["active_leaf_id"] == second["id"]
    fake.script(Reply(text="Here again."))
    await send(user, chat_id, "Go on")  # the chat is free
    assert (await wait_until_idle(user, chat_id))["messages"][-1]["content"] == "Here again."


async def _leftover_call(services: Services, chat_id: str, clock: ShiftedClock) -> int:
    """A call of the chat's open round left `running`, as a turn cut short would leave it."""
    async with services.sessions() as db:
        chat = await db.get(Chat, UUID(chat_id))
        assert chat is not None and chat.active_leaf_id is not None
        row = ChatLlmTool(
            chat_id=chat.id,
            message_id=chat.active_leaf_id,
            tool_call_id="call_left",
            name="list_files",
            arguments={},
            status="running",
            created_at=clock.now(),
            updated_at=clock.now(),
        )
        db.add(row)
        await db.commit()
        return row.id


async def _call_and_owner(services: Services, chat_id: str, row_id: int) -> tuple[Any, ...]:
    async with services.sessions() as db:
        call = await db.get(ChatLlmTool, row_id)
        chat = await db.get(Chat, UUID(chat_id))
        assert call is not None and chat is not None
        return call.status, call.result, chat.turn_owner


@pytest.mark.parametrize("release_fails", [False, True], ids=["released", "release fails"])
async def test_what_a_turn_left_open_is_closed_with_its_release_or_not_at_all(
    release_fails: bool,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    clock: ShiftedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failing the turn's leftovers and releasing its chat are one transaction: when the release
    fails, the leftovers stay as they were for the sweep, which settles both once the lease
    lapses; a chat never shows calls failed by a turn that still holds it."""
    if release_fails:

        async def broken_release(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("the release failed")

        release_after = leases.release_after

        def broken_release_after(closing: tuple[Update, ...]) -> Update:
            # PostgreSQL releases in one statement, with the leftovers' updates: it fails in
            # the database.
            return release_after(closing).where(func.sqrt(-1) > 0)

        monkeypatch.setattr(leases, "release", broken_release)
        monkeypatch.setattr(leases, "release_after", broken_release_after)
    fake = fakes["openai"]
    writing = asyncio.Event()
    fake.script(Reply(text="Done.", hold=writing))
    chat_id = await new_chat(user)
    running = asyncio.create_task(send(user, chat_id, "Go"))
    try:
        await fake.wait_for_request(0)
        row_id = await _leftover_call(services, chat_id, clock)
    finally:
        writing.set()
    response = await asyncio.wait_for(running, 10)
    assert parse_stream(response.text)[-1]["type"] == "[DONE]"
    status, result, owner = await _call_and_owner(services, chat_id, row_id)
    if not release_fails:
        assert (status, result, owner) == ("failed", recorder_module.UNFINISHED_CALL, None)
        return
    assert (status, owner is not None) == ("running", True)  # rolled back with the release
    monkeypatch.undo()
    async with services.sessions() as db:  # the lease lapses; a sweep settles the chat
        settled = await leases.sweep(db, clock.now() + timedelta(minutes=5), live=set())
        await db.commit()
    assert settled == [UUID(chat_id)]
    status, result, owner = await _call_and_owner(services, chat_id, row_id)
    assert (status, result, owner) == ("cancelled", leases.INTERRUPTED_CALL, None)


async def _another_turns_call(services: Services, chat_id: str, clock: ShiftedClock) -> int:
    """Another turn holding the chat, its round and its call running, as a user who sent a
    message after the sweep would start one; the call's row id."""
    now = clock.now()
    async with services.sessions() as db:
        chat = await db.get(Chat, UUID(chat_id))
        assert chat is not None
        chat.turn_owner, chat.turn_lease_until = "another", now + timedelta(minutes=5)
        message = Message(
            chat_id=chat.id, role="assistant", content="", status="streaming", created_at=now
        )
        db.add(message)
        await db.flush()
        call = ChatLlmTool(
            chat_id=chat.id,
            message_id=message.id,
            tool_call_id="call_other",
            name="list_files",
            arguments={},
            status="running",
            created_at=now,
            updated_at=now,
        )
        db.add(call)
        await db.commit()
        return call.id


@pytest.mark.parametrize("taken", [False, True], ids=["chat left free", "chat taken over"])
async def test_a_turn_swept_between_its_round_and_its_call_ends_interrupted(
    taken: bool,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    clock: ShiftedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sweep of another worker came after the round was stored `ok` and before its call
    was: it had nothing to settle, yet it took the chat. The turn learns it at its next renewal,
    inside the call, and ends the way the sweep would have ended it after the call began. If
    another turn took the chat meanwhile, that turn's running call is not the stalled one's to
    close."""
    fake = fakes["openai"]
    fake.script(
        Reply(text="Let me look.", tool_calls=[ToolCall("list_files", {"path": "."})]),
        Reply(text="Found them."),
    )
    release = threading.Event()
    listing = files_module._list

    def held(*args: Any) -> str:
        release.wait(30)
        return listing(*args)

    monkeypatch.setattr(files_module, "_list", held)
    started = recorder_module.Recorder._tool_started
    swept: list[UUID] = []

    async def swept_first(self: recorder_module.Recorder, ctx: Any, event: Any) -> None:
        async with services.sessions() as db:
            swept.extend(await leases.sweep(db, clock.now() + timedelta(minutes=5), live=set()))
            await db.commit()
        await started(self, ctx, event)

    monkeypatch.setattr(recorder_module.Recorder, "_tool_started", swept_first)
    chat_id = await new_chat(user)
    running = asyncio.create_task(send(user, chat_id, "Files?"))

    async def in_the_call() -> bool:
        chat = (await user.get(f"/api/chats/{chat_id}")).json()
        return any(c["status"] == "running" for c in calls_of(chat).values())

    try:
        await wait_until(in_the_call, failure="the call never started")
        assert swept == [UUID(chat_id)]
        if taken:
            others = await _another_turns_call(services, chat_id, clock)
        services.settings = services.settings.model_copy(update={"turn_lease_seconds": 1})
        response = await asyncio.wait_for(running, 10)  # its next renewal stops it
    finally:
        release.set()
    if taken:
        async with services.sessions() as db:
            other = await db.get(ChatLlmTool, others)
            assert other is not None and other.status == "running"
            await db.execute(update(Chat).values(turn_owner=None, turn_lease_until=None))
            await db.commit()
    assert [c["type"] for c in parse_stream(response.text)][-2:] == ["data-usage", "[DONE]"]
    chat = await wait_until_idle(user, chat_id)
    assert_settled(chat)
    [_, answer] = chat["messages"]
    assert answer["content"] == "Let me look."
    assert answer["status"] == "incomplete" and answer["error"] == INTERRUPTED_ROUND
    [call] = answer["tool_calls"]
    assert call["status"] == "cancelled" and call["result"] == INTERRUPTED_CALL
