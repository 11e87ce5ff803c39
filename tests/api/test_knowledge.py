"""Knowledge tools over the real path: a fake provider drives search and cite; the chat API,
the stream and the outgoing requests show citations, status, budget notices and the capsule."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from app.models import ChatEvidence, ChatLlmTool, Message
from app.services import Services
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.knowledge.documents import add_document
from tests.provider_setup import DTL_MODEL_IDS, MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle
from tests.wire import tail_of

pytestmark = pytest.mark.usefixtures("services", "registry")

GARDEN = b"""# Garden

## Watering

Tomatoes need water every evening in July, and twice on the hottest days.

## Pests

Slugs come out after rain; beer traps catch most of them.

## Harvest

Pick beans young, every second day, or the plant stops flowering.
"""
ACTIVATE = ToolCall("activate_tools", {"groups": ["knowledge"]}, id="call_act")


def search(query: str, id: str, limit: int = 5) -> ToolCall:
    return ToolCall("knowledge_search", {"query": query, "limit": limit}, id=id)


def cite(chunk_ids: list[str], id: str) -> ToolCall:
    return ToolCall("knowledge_cite", {"chunk_ids": chunk_ids}, id=id)


def tool_answers(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def garden(services: Services, user: Client) -> tuple[uuid.UUID, list[str]]:
    upload_id = await add_document(services, user.user["id"], "garden.md", GARDEN)
    return upload_id, [f"{upload_id.hex[:12]}-{n}" for n in (1, 2, 3)]


async def ask(user: Client, chat_id: str, content: str) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    await wait_until_idle(user, chat_id)
    return parse_stream(response.text)


async def new_chat(user: Client) -> str:
    return (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]


def finals(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages that carry a citation status (the final message of each question)."""
    return [m for m in chat["messages"] if m["citation_status"] is not None]


async def test_citations_are_stored_returned_and_streamed(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    upload_id, (watering, pests, _) = await garden(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("when should tomatoes be watered?", "call_s")]),
        Reply(tool_calls=[cite([watering], "call_c")]),
        Reply(text="Every evening in July."),
    )
    chat_id = await new_chat(user)
    chunks = await ask(user, chat_id, "When do I water the tomatoes?")

    found = json.loads(tool_answers(fake.model_requests[2].body)["call_s"])
    assert found[0] == {
        "chunk_id": watering,
        "upload_id": str(upload_id),
        "filename": "garden.md",
        "page": None,
        "text": "Tomatoes need water every evening in July, and twice on the hottest days.",
    }
    recorded = json.loads(tool_answers(fake.model_requests[3].body)["call_c"])
    assert recorded == {"recorded": [watering], "repaired": {}, "ignored": []}

    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    final = chat["messages"][-1]
    expected = [
        {
            "chunk_id": watering,
            "upload_id": str(upload_id),
            "filename": "garden.md",
            "page": None,
            "quote": "Tomatoes need water every evening in July, and twice on the hottest days.",
        }
    ]
    assert final["content"] == "Every evening in July."
    assert final["citations"] == expected and final["citation_status"] == "grounded"
    assert all(m["citations"] == [] for m in chat["messages"][:-1])
    assert finals(chat) == [final]

    data = [c for c in chunks if c["type"] == "data-citations"]
    assert data == [
        {"type": "data-citations", "data": {"message_id": final["id"], "citations": expected}}
    ]
    sources = [c for c in chunks if c["type"] == "source-document"]
    assert sources == [
        {
            "type": "source-document",
            "sourceId": watering,
            "mediaType": "text/plain",
            "title": "garden.md",
            "filename": "garden.md",
        }
    ]
    types = [c["type"] for c in chunks]
    assert types.index("data-citations") < types.index("data-usage") < types.index("finish")
    assert pests not in json.dumps(chat["messages"][-1])


async def test_a_damaged_id_is_repaired_and_strangers_are_ignored(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    _, (watering, *_) = await garden(services, user)
    damaged = watering.replace("-", "_")
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", "call_s")]),
        Reply(tool_calls=[cite([damaged, "chunk-that-never-was"], "call_c")]),
        Reply(text="Every evening."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "Water?")
    answer = json.loads(tool_answers(fake.model_requests[3].body)["call_c"])
    assert answer == {
        "recorded": [watering],
        "repaired": {damaged: watering},
        "ignored": ["chunk-that-never-was"],
    }
    final = (await user.get(f"/api/chats/{chat_id}")).json()["messages"][-1]
    assert [c["chunk_id"] for c in final["citations"]] == [watering]
    assert final["citation_status"] == "grounded"


async def test_nothing_resolves_for_unknown_ids_or_another_users_passage(
    user: Client, new_user: NewUser, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    await garden(services, user)
    stranger = await new_user()
    theirs = await add_document(services, stranger.user["id"], "theirs.md", GARDEN)
    their_chunk = f"{theirs.hex[:12]}-1"
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", "call_s")]),
        Reply(tool_calls=[cite(["nonsense", their_chunk], "call_c")]),
        Reply(text="I could not cite it."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "Water?")
    error = tool_answers(fake.model_requests[3].body)["call_c"]
    assert "is a passage you retrieved" in error and "exactly as knowledge_search" in error
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    cite_call = next(
        t for m in chat["messages"] for t in m["tool_calls"] if t["name"] == "knowledge_cite"
    )
    assert cite_call["status"] == "failed"
    final = chat["messages"][-1]
    assert final["citations"] == [] and final["citation_status"] == "missing"
    async with services.sessions() as db:
        kinds = (await db.scalars(select(ChatEvidence.kind))).all()
    assert sorted(set(kinds)) == ["retrieved"]


async def test_evidence_after_a_declaration_makes_it_missing_again(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    _, (watering, *_) = await garden(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", "call_s1")]),
        Reply(tool_calls=[cite([watering], "call_c")]),
        Reply(tool_calls=[search("slugs", "call_s2")]),
        Reply(text="Water in the evening; slugs too."),
        # The next question: an empty cite after a grounded one does not weaken it.
        Reply(tool_calls=[search("beans harvest", "call_s3")]),
        Reply(tool_calls=[cite([f"{watering[:-1]}3"], "call_c2")]),
        Reply(tool_calls=[cite([], "call_c3")]),
        Reply(text="Pick them young."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "Water and slugs?")
    await ask(user, chat_id, "And beans?")
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    first, second = finals(chat)
    assert first["content"] == "Water in the evening; slugs too."
    assert first["citation_status"] == "missing"
    assert [c["chunk_id"] for c in first["citations"]] == [watering]
    assert second["content"] == "Pick them young." and second["citation_status"] == "grounded"
    assert [c["chunk_id"] for c in second["citations"]] == [f"{watering[:-1]}3"]
    declared = json.loads(tool_answers(fake.model_requests[8].body)["call_c3"])
    assert declared["recorded"] == [] and "not grounded" in declared["declared"]


async def test_an_empty_cite_alone_is_ungrounded(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    await garden(services, user)
    fakes["openai"].script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("volcanoes near tomatoes", "call_s")]),
        Reply(tool_calls=[cite([], "call_c")]),
        Reply(text="Your documents say nothing about volcanoes."),
    )
    chat_id = await new_chat(user)
    chunks = await ask(user, chat_id, "Volcanoes?")
    final = (await user.get(f"/api/chats/{chat_id}")).json()["messages"][-1]
    assert final["citation_status"] == "ungrounded" and final["citations"] == []
    assert not [c for c in chunks if c["type"] in ("data-citations", "source-document")]


async def test_the_sixth_search_is_refused_with_a_notice_and_the_tool_still_declared(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    await garden(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        *[Reply(tool_calls=[search(f"tomatoes {n}", f"call_s{n}")]) for n in range(1, 7)],
        Reply(text="Enough searching."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "Search a lot")
    sent = [r.body for r in fake.model_requests]
    assert len(sent) == 8
    answers = tool_answers(sent[7])
    assert all(json.loads(answers[f"call_s{n}"]) for n in range(1, 6))  # real results
    assert answers["call_s6"] == (
        "The search budget of this question is spent (5 searches): no search was made. "
        "Cite the passages that ground your answer with knowledge_cite, then answer."
    )
    notice = (
        "[hearth/budget] knowledge_search has spent its budget for this question (5 searches) "
        "and will not search again. Still available: knowledge_cite and your other tools, for "
        "{} more model requests in this turn."
    )
    for index, body in enumerate(sent):
        tail = tail_of(body)
        assert tail is not None
        if index < 6:  # before the fifth search's result came back
            assert "[hearth/budget]" not in tail
        else:
            assert tail.endswith(notice.format(25 - (index + 1)))
        names = [t["function"]["name"] for t in body.get("tools", [])]
        if index >= 1:
            assert {"knowledge_search", "knowledge_cite"} <= set(names)
    # Only five searches reached the index: the sixth left no evidence.
    async with services.sessions() as db:
        epochs = (
            await db.scalars(select(ChatEvidence.epoch).where(ChatEvidence.kind == "retrieved"))
        ).all()
    assert len(set(epochs)) == 5


async def test_the_budget_is_per_question(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    await garden(services, user)
    services.settings = services.settings.model_copy(update={"search_budget": 1})
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes", "call_s1")]),
        Reply(text="One."),
        Reply(tool_calls=[search("slugs", "call_s2")]),
        Reply(text="Two."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "First")
    await ask(user, chat_id, "Second")
    sent = [r.body for r in fake.model_requests]
    assert json.loads(tool_answers(sent[4])["call_s2"])  # a fresh budget: real results
    assert "[hearth/budget]" in (tail_of(sent[2]) or "")
    assert "[hearth/budget]" not in (tail_of(sent[3]) or "")


async def test_one_capsule_of_cited_evidence_after_three_questions(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    _, (watering, pests, harvest) = await garden(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", "call_s1")]),
        Reply(tool_calls=[cite([watering, pests], "call_c1")]),
        Reply(text="One."),
        Reply(tool_calls=[search("slugs rain", "call_s2")]),
        Reply(tool_calls=[cite([pests], "call_c2")]),
        Reply(text="Two."),
        Reply(tool_calls=[search("beans", "call_s3a"), search("flowering", "call_s3b")]),
        Reply(tool_calls=[cite([harvest], "call_c3")]),
        Reply(text="Three."),
        Reply(text="Four."),
    )
    chat_id = await new_chat(user)
    questions = ["Watering?", "Slugs?", "Beans?", "Thanks"]
    for question in questions:
        await ask(user, chat_id, question)
    async with services.sessions() as db:
        stored_before = [
            (r.tool_call_id, r.result) for r in (await db.scalars(select(ChatLlmTool))).all()
        ]
    fourth = fake.model_requests[-1].body
    answers = tool_answers(fourth)
    text = {tid: answers[tid] for tid in ("call_s1", "call_s2", "call_s3a", "call_s3b")}
    capsules = [tid for tid, content in text.items() if content.startswith("[hearth/evidence]")]
    assert capsules == ["call_s3b"]  # the newest evidence return of the earlier questions
    assert text["call_s1"].startswith("[knowledge_search] tomatoes water — ")
    assert text["call_s2"].startswith("[knowledge_search] slugs rain — ")
    assert text["call_s3a"].startswith("[knowledge_search] beans — ")
    assert all(
        content.endswith("from an earlier question, not shown")
        for tid, content in text.items()
        if tid != "call_s3b"
    )
    body = GARDEN.decode()
    passage = {
        cid: next(p.strip() for p in body.split("\n\n") if word in p)
        for cid, word in ((watering, "Tomatoes"), (pests, "Slugs"), (harvest, "beans"))
    }
    assert text["call_s3b"] == (
        "[hearth/evidence] Passages cited in earlier questions, in full (their other search "
        "results are not shown):\n\n"
        'Cited for the question "Watering?":\n\n'
        f"[{watering}] garden.md, Garden > Watering\n{passage[watering]}\n\n"
        'Cited for the question "Slugs?":\n\n'
        f"[{pests}] garden.md, Garden > Pests\n{passage[pests]}\n\n"
        'Cited for the question "Beans?":\n\n'
        f"[{harvest}] garden.md, Garden > Harvest\n{passage[harvest]}"
    )
    # Every call keeps its return, in order, and cite answers stay as they were.
    calls = [
        c["id"]
        for m in fourth["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls", [])
    ]
    assert calls == [m["tool_call_id"] for m in fourth["messages"] if m["role"] == "tool"]
    assert json.loads(answers["call_c3"])["recorded"] == [harvest]
    # The stored rows keep every result whole.
    async with services.sessions() as db:
        rows = (await db.scalars(select(ChatLlmTool))).all()
        assert [(r.tool_call_id, r.result) for r in rows] == stored_before
        search_rows = [r for r in rows if r.name == "knowledge_search"]
        assert all(json.loads(r.result)[0]["chunk_id"] for r in search_rows)
        assert (
            await db.scalar(
                select(Message.content)
                .where(Message.role == "user")
                .order_by(Message.id.desc())
                .limit(1)
            )
            == "Thanks"
        )


@pytest.mark.parametrize(
    ("mode", "provider"),
    [
        ("none", "openai"),
        ("anthropic_tool_reference", "anthropic"),
        ("kimi_system_tools", "moonshot"),
    ],
)
async def test_the_knowledge_group_works_in_every_dtl_mode(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    mode: str,
    provider: str,
) -> None:
    _, (watering, *_) = await garden(services, user)
    fake = fakes[provider]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["knowledge"]})]),
        Reply(tool_calls=[ToolCall("knowledge_search", {"query": "tomatoes water"})]),
        Reply(tool_calls=[ToolCall("knowledge_cite", {"chunk_ids": [watering]})]),
        Reply(text="Every evening."),
    )
    response = await user.post("/api/chats", json={"model": DTL_MODEL_IDS[mode]})
    chat_id = response.json()["id"]
    chunks = await ask(user, chat_id, "Water?")
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    final = chat["messages"][-1]
    assert final["content"] == "Every evening." and final["citation_status"] == "grounded"
    assert [c["chunk_id"] for c in final["citations"]] == [watering]
    calls = [t for m in chat["messages"] for t in m["tool_calls"]]
    assert [(t["name"], t["status"]) for t in calls] == [
        ("activate_tools", "done"),
        ("knowledge_search", "done"),
        ("knowledge_cite", "done"),
    ]
    assert [c["sourceId"] for c in chunks if c["type"] == "source-document"] == [watering]
    activations = (await user.get(f"/api/chats/{chat_id}/activations")).json()
    assert [(a["kind"], a["ref"]) for a in activations] == [("builtin", "knowledge")]


async def test_a_question_resumed_after_approval_keeps_its_evidence_and_budget(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    _, (watering, *_) = await garden(services, user)
    services.settings = services.settings.model_copy(update={"search_budget": 1})
    damaged = watering.replace("-", ":")
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", "call_s1")]),
        Reply(tool_calls=[ToolCall("write_file", {"path": "plan.md", "content": "x"}, id="w")]),
        Reply(tool_calls=[cite([damaged], "call_c"), search("more", "call_s2")]),
        Reply(text="Planned."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "Plan the watering")
    resumed = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "w", "approved": True}]},
    )
    assert resumed.status_code == 200
    await wait_until_idle(user, chat_id)
    answers = tool_answers(fake.model_requests[4].body)
    assert json.loads(answers["call_c"])["repaired"] == {damaged: watering}
    assert answers["call_s2"].startswith("The search budget of this question is spent")
    chunks = parse_stream(resumed.text)
    final = (await user.get(f"/api/chats/{chat_id}")).json()["messages"][-1]
    assert final["content"] == "Planned." and final["citation_status"] == "grounded"
    assert (
        next(c for c in chunks if c["type"] == "data-citations")["data"]["message_id"]
        == (final["id"])
    )


async def test_evidence_follows_the_branch(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    """A regenerated answer has evidence of its own: the other branch's citations and status
    are not shown on it, its own are not shown on the other, and a later question's capsule
    holds what its own path cited, nothing else."""
    _, (watering, pests, _) = await garden(services, user)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("watering", "call_s1")]),
        Reply(tool_calls=[cite([watering], "call_c1")]),
        Reply(text="Every evening."),
    )
    chat_id = await new_chat(user)
    await ask(user, chat_id, "When do I water?")
    question = (await user.get(f"/api/chats/{chat_id}")).json()["messages"][0]

    # The group activated on the first answer's branch is not active on the new answer's.
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["knowledge"]}, id="call_a2")]),
        Reply(tool_calls=[search("pests", "call_s2")]),
        Reply(tool_calls=[cite([pests], "call_c2")]),
        Reply(text="Beer traps."),
    )
    response = await user.post(
        f"/api/chats/{chat_id}/regenerate", json={"message_id": question["id"]}
    )
    assert response.status_code == 200
    await wait_until_idle(user, chat_id)
    activated = json.loads(tool_answers(fake.model_requests[5].body)["call_a2"])
    assert [(r["group"], r["status"]) for r in activated] == [("knowledge", "activated")]
    regenerated = (await user.get(f"/api/chats/{chat_id}")).json()
    [final] = finals(regenerated)
    assert final["content"] == "Beer traps."
    assert final["citation_status"] == "grounded"
    assert [c["chunk_id"] for c in final["citations"]] == [pests]

    first_answer = regenerated["messages"][1]["sibling_ids"][0]
    switched = await user.put(f"/api/chats/{chat_id}/active", json={"message_id": first_answer})
    [final] = finals(switched.json())
    assert final["content"] == "Every evening."
    assert [c["chunk_id"] for c in final["citations"]] == [watering]

    fake.script(Reply(text="You're welcome."))
    await ask(user, chat_id, "Thanks")
    answers = tool_answers(fake.model_requests[-1].body)
    assert set(answers) == {"call_act", "call_s1", "call_c1"}
    capsule = answers["call_s1"]
    assert capsule.startswith("[hearth/evidence] Passages cited in earlier questions")
    assert f"[{watering}]" in capsule and pests not in capsule
