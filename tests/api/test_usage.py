"""Usage and quotas over real HTTP, with turns against the fake providers: what each request
costs by the models' pricing, per day, model and user; who may see what; the ranges a client may
ask for; and quotas, refused before a turn starts (429 with `Retry-After`) and ending a turn that
crosses one after the round it is in — whatever made the requests, rounds, sampling or summaries.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart
from sqlalchemy import select, update

from app.models import LlmRequest, User
from app.services import Services
from app.tools.asks import SamplingRequest
from tests.api.test_accounts import as_key, make_key
from tests.api.test_admin import make_admin
from tests.api.test_mcp_asks import AskingServer
from tests.api.test_mcp_asks import asking as asking  # the fixture
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.fakes.script import Usage
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")

FIGURES = {
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
}


async def turn(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    kind: str,
    *replies: Reply,
    chat_id: str | None = None,
) -> str:
    fakes[kind].script(*replies)
    if chat_id is None:
        chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Go"})
    assert response.status_code == 200, response.text
    await wait_until_idle(user, chat_id)
    return chat_id


async def set_quota(services: Services, user: Client, quota: dict[str, Any] | None) -> None:
    async with services.sessions() as db:
        await db.execute(
            update(User).where(User.id == uuid.UUID(user.user["id"])).values(quota=quota)
        )
        await db.commit()


# -- usage ------------------------------------------------------------------------------------


async def test_usage_counts_every_request_and_prices_it_per_model(
    user: Client, new_user: NewUser, fakes: dict[str, FakeProviderServer]
) -> None:
    await turn(
        user,
        fakes,
        "anthropic",
        Reply(
            text="A.", usage=Usage(10_000, 2_000, cache_read_tokens=6_000, cache_write_tokens=1_000)
        ),
    )
    await turn(user, fakes, "openai", Reply(text="B.", usage=Usage(5_000, 1_000, 2_000)))
    await turn(user, fakes, "moonshot", Reply(text="C.", usage=Usage(1_000, 100)))
    other = await new_user()
    await turn(other, fakes, "openai", Reply(text="D.", usage=Usage(7, 7)))

    body = (await user.get("/api/usage", params={"group_by": "model"})).json()
    by_model = {item["model"]: item for item in body["items"]}
    assert list(by_model) == sorted(by_model)
    claude = by_model[MODEL_IDS["anthropic"]]
    assert set(claude) == FIGURES | {"model"}
    assert claude["requests"] == 1
    assert (claude["input_tokens"], claude["output_tokens"]) == (10_000, 2_000)
    assert (claude["cache_read_tokens"], claude["cache_write_tokens"]) == (6_000, 1_000)
    # 3,000 uncached input at $3, 2,000 output at $15, 6,000 reads at $0.30, 1,000 writes at $3.75
    assert claude["cost_usd"] == pytest.approx(0.04455)
    gpt = by_model[MODEL_IDS["openai"]]
    assert gpt["cost_usd"] == pytest.approx((3_000 * 2 + 1_000 * 8 + 2_000 * 0.5) / 1e6)
    assert by_model[MODEL_IDS["moonshot"]]["cost_usd"] is None  # no pricing
    assert body["total"]["requests"] == 3
    assert body["total"]["cost_usd"] == pytest.approx(0.04455 + 0.015)
    assert body["total"]["input_tokens"] == 16_000

    by_day = (await user.get("/api/usage")).json()
    today = datetime.now(UTC).date().isoformat()
    assert [item["day"] for item in by_day["items"]] == [today]
    assert by_day["items"][0]["requests"] == 3
    assert (await other.get("/api/usage")).json()["total"]["requests"] == 1


async def test_usage_is_per_utc_day_and_the_range_is_inclusive(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    chat_id = await turn(user, fakes, "openai", Reply(text="Old.", usage=Usage(100, 10)))
    services.clock.advance(days=3)  # type: ignore[attr-defined]
    await turn(user, fakes, "openai", Reply(text="New.", usage=Usage(200, 20)), chat_id=chat_id)
    today = services.clock.now().date()
    early = today - timedelta(days=3)
    body = (await user.get("/api/usage")).json()
    assert [(i["day"], i["input_tokens"]) for i in body["items"]] == [
        (early.isoformat(), 100),
        (today.isoformat(), 200),
    ]
    params = {"from": early.isoformat(), "to": early.isoformat()}
    assert (await user.get("/api/usage", params=params)).json()["total"]["input_tokens"] == 100
    params = {"from": (early + timedelta(days=1)).isoformat()}
    assert (await user.get("/api/usage", params=params)).json()["total"]["input_tokens"] == 200


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-05-02", "to": "2026-05-01"},
        {"from": "2025-01-01", "to": "2026-01-02"},
        {"from": "yesterday"},
        {"to": "2026-02-30"},
        {"to": "-7.033393382251493e-261"},  # a number pydantic alone reads as a Unix time
        {"from": "1767225600"},
        {"to": "2026-1-5"},
        {"group_by": "user"},
        {"group_by": "week"},
    ],
)
async def test_a_bad_usage_query_is_422(user: Client, params: dict[str, str]) -> None:
    response = await user.get("/api/usage", params=params)
    assert response.status_code == 422, response.text


async def test_a_year_of_366_days_is_a_valid_range(user: Client) -> None:
    response = await user.get("/api/usage", params={"from": "2024-01-01", "to": "2024-12-31"})
    assert response.status_code == 200
    assert response.json() == {
        "items": [],
        "total": dict.fromkeys(FIGURES - {"cost_usd"}, 0) | {"cost_usd": None},
    }


async def test_a_key_reads_its_owners_usage(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    await turn(user, fakes, "openai", Reply(text="A.", usage=Usage(50, 5)))
    key = (await make_key(user))["key"]
    async with as_key(str(user.http.base_url), key) as script:
        body = (await script.get("/api/usage")).json()
        assert body["total"]["input_tokens"] == 50
        assert (await script.get("/api/admin/usage")).status_code == 403


async def test_admin_usage_groups_by_user_day_and_model_and_filters_one_user(
    user: Client, new_user: NewUser, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    admin = await make_admin(services, await new_user("boss@example.com"))
    await turn(user, fakes, "openai", Reply(text="A.", usage=Usage(1_000_000, 0)))
    other = await new_user("other@example.com")
    await turn(other, fakes, "anthropic", Reply(text="B.", usage=Usage(100, 10)))
    await turn(other, fakes, "openai", Reply(text="C.", usage=Usage(10, 1)))

    assert (await user.get("/api/admin/usage")).status_code == 403
    body = (await admin.get("/api/admin/usage")).json()
    assert [(i["email"], i["requests"]) for i in body["items"]] == [
        (user.user["email"], 1),  # $2.00: the costliest first
        ("other@example.com", 2),
    ]
    assert body["items"][0]["user_id"] == user.user["id"]
    assert body["items"][0]["cost_usd"] == pytest.approx(2.0)
    assert body["total"]["requests"] == 3
    models = (await admin.get("/api/admin/usage", params={"group_by": "model"})).json()
    assert {i["model"]: i["requests"] for i in models["items"]} == {
        MODEL_IDS["anthropic"]: 1,
        MODEL_IDS["openai"]: 2,
    }
    days = (await admin.get("/api/admin/usage", params={"group_by": "day"})).json()
    assert [i["requests"] for i in days["items"]] == [3]
    one = await admin.get(
        "/api/admin/usage", params={"group_by": "model", "user_id": other.user["id"]}
    )
    assert one.json()["total"]["requests"] == 2
    bad = await admin.get("/api/admin/usage", params={"user_id": "not-a-uuid"})
    assert bad.status_code == 422


async def test_summaries_and_sampling_count_as_usage(
    user: Client,
    services: Services,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
) -> None:
    asking.sample = SamplingRequest(
        messages=[ModelRequest(parts=[UserPromptPart("Say hi")])], system_prompt=None, max_tokens=5
    )
    chat_id = await turn(
        user,
        fakes,
        "openai",
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})], usage=Usage(1, 1)),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})], usage=Usage(1, 1)),
        Reply(text="Hi.", usage=Usage(30, 3)),
        Reply(text="Done.", usage=Usage(1, 1)),
    )
    for _ in range(2):
        await turn(user, fakes, "openai", Reply(text="More.", usage=Usage(1, 1)), chat_id=chat_id)
    services.settings = services.settings.model_copy(update={"compact_keep": 2})
    fakes["openai"].script(Reply(text="A summary.", usage=Usage(400, 40)))
    assert (await user.post(f"/api/chats/{chat_id}/compact")).status_code == 200
    async with services.sessions() as db:
        purposes = (await db.scalars(select(LlmRequest.purpose).order_by(LlmRequest.id))).all()
    assert purposes == ["round", "round", "sampling", "round", "round", "round", "summary"]
    total = (await user.get("/api/usage")).json()["total"]
    assert total["requests"] == 7
    assert total["input_tokens"] == 1 + 1 + 30 + 1 + 1 + 1 + 400


# -- quotas -----------------------------------------------------------------------------------


def seconds_to_midnight(now: datetime) -> int:
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    return int((midnight - now).total_seconds())


async def test_a_user_over_the_daily_tokens_is_refused_every_way_a_turn_starts(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    chat_id = await turn(user, fakes, "openai", Reply(text="A.", usage=Usage(900, 100)))
    await set_quota(services, user, {"daily_tokens": 1_000, "monthly_cost_usd": None})
    before = (await user.get(f"/api/chats/{chat_id}")).json()
    question = before["messages"][0]["id"]
    answers = [
        await user.post(f"/api/chats/{chat_id}/messages", json={"content": "More"}),
        await user.post(f"/api/chats/{chat_id}/regenerate", json={"message_id": question}),
        await user.post(f"/api/chats/{chat_id}/compact"),
    ]
    for answer in answers:
        assert answer.status_code == 429, answer.text
        assert "daily quota of 1,000 tokens" in answer.json()["detail"]
        retry = int(answer.headers["Retry-After"])
        assert abs(retry - seconds_to_midnight(services.clock.now())) <= 2
    assert (await user.get(f"/api/chats/{chat_id}")).json()["messages"] == before["messages"]
    assert len(fakes["openai"].model_requests) == 1

    services.clock.advance(days=1)  # type: ignore[attr-defined]
    fakes["openai"].script(Reply(text="A new day."))
    again = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "More"})
    assert again.status_code == 200


async def test_the_monthly_cost_quota_resets_on_the_first(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    await turn(user, fakes, "openai", Reply(text="Dear.", usage=Usage(1_000_000, 0)))  # $2
    await set_quota(services, user, {"daily_tokens": None, "monthly_cost_usd": 2.0})
    chat = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    answer = await user.post(f"/api/chats/{chat}/messages", json={"content": "Again"})
    assert answer.status_code == 429
    assert "monthly quota of $2.00" in answer.json()["detail"]
    now = services.clock.now()
    first = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
    assert abs(int(answer.headers["Retry-After"]) - (first - now).total_seconds()) <= 2


async def test_the_defaults_apply_to_users_without_their_own_quota(
    user: Client, new_user: NewUser, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    services.settings = services.settings.model_copy(update={"default_quota_daily_tokens": 10})
    free = await new_user()
    await set_quota(services, free, {"daily_tokens": None, "monthly_cost_usd": None})
    for person in (user, free):
        await turn(person, fakes, "openai", Reply(text="A.", usage=Usage(20, 5)))
    results = []
    for person in (user, free):
        chat = (await person.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
        fakes["openai"].script(Reply(text="B."))
        results.append(
            (await person.post(f"/api/chats/{chat}/messages", json={"content": "B"})).status_code
        )
    assert results == [429, 200]  # the default limits one; the other's own quota is unlimited


async def test_a_turn_that_crosses_its_quota_ends_after_the_round_it_is_in(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    await set_quota(services, user, {"daily_tokens": 1_000})
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("list_files", {"path": "."})], usage=Usage(1_500, 50)),
        Reply(text="Never asked for."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Files?"})
    assert response.status_code == 200
    chunks = parse_stream(response.text)
    [error] = [c for c in chunks if c["type"] == "error"]
    assert "daily quota of 1,000 tokens" in error["errorText"]
    chat = await wait_until_idle(user, chat_id)
    last = chat["messages"][-1]
    assert last["status"] == "ok"
    assert "daily quota of 1,000 tokens" in last["error"]
    assert [(t["name"], t["status"]) for t in last["tool_calls"]] == [("list_files", "done")]
    assert len(fakes["openai"].model_requests) == 1  # the round it was in; no other


async def test_two_turns_racing_past_a_quota_each_end_at_most_one_round_over(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    await set_quota(services, user, {"daily_tokens": 1_000})
    held = asyncio.Event()
    fakes["openai"].script(
        *(
            Reply(
                tool_calls=[ToolCall("list_files", {"path": "."})], usage=Usage(800, 10), hold=held
            )
            for _ in range(2)
        ),
        *(Reply(text="Over.") for _ in range(2)),
    )
    chats = [
        (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
        for _ in range(2)
    ]

    async def send(chat_id: str) -> Any:
        return await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Go"})

    sending = [asyncio.create_task(send(chat_id)) for chat_id in chats]
    await wait_until(lambda: len(fakes["openai"].model_requests) == 2)  # both in flight
    held.set()
    answers = await asyncio.gather(*sending)
    assert [a.status_code for a in answers] == [200, 200]
    # Each turn checks the stored total before its second round, and each round's usage is
    # committed before its own turn checks. So the turn that checks last sees both rounds and
    # stops; the one that checks first may have seen only its own (810 of 1,000) and asked for
    # one more round, its one round over. Never can both go on.
    ends = []
    for chat_id in chats:
        last = (await wait_until_idle(user, chat_id))["messages"][-1]
        ends.append("over quota" if "daily quota" in (last["error"] or "") else last["content"])
        assert last["status"] == "ok", last
    rounds = len(fakes["openai"].model_requests)
    assert rounds in (2, 3)
    expected = ["over quota", "over quota"] if rounds == 2 else ["Over.", "over quota"]
    assert sorted(ends) == expected
    answer = await send(chats[0])
    assert answer.status_code == 429


async def test_sampling_is_refused_to_a_user_over_quota(
    user: Client,
    services: Services,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
) -> None:
    await set_quota(services, user, {"daily_tokens": 500})
    asking.sample = SamplingRequest(
        messages=[ModelRequest(parts=[UserPromptPart("Say hi")])], system_prompt=None, max_tokens=5
    )
    chat_id = await turn(
        user,
        fakes,
        "openai",
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})], usage=Usage(9, 1)),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})], usage=Usage(900, 9)),
        Reply(text="Never sampled."),
    )
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    [call] = [
        t for m in chat["messages"] for t in m["tool_calls"] if t["name"].endswith("forecast")
    ]
    assert call["status"] == "failed"
    assert "sampling failed" in call["result"] and "daily quota of 500 tokens" in call["result"]
    assert asking.sampled == []
    assert len(fakes["openai"].model_requests) == 2
    assert "daily quota" in chat["messages"][-1]["error"]


async def test_a_range_at_the_calendars_first_day_is_cut_there(user: Client) -> None:
    response = await user.get("/api/usage", params={"to": "0001-01-01"})
    assert response.status_code == 200
    assert response.json()["items"] == []
