"""Administration over real HTTP: who may administer (an enabled admin with a session, nobody
else, and never a key), the users list and its search, disabling (refused at once, a running
turn stopped), quotas and their bounds, the last-admin rule, and deletion that leaves nothing of
the user behind, in any table or on disk."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.core.db.base import Base
from app.files.roots import user_root
from app.models import Chat, McpConnection, User
from app.services import Services
from tests.api.test_accounts import as_key, make_key
from tests.api.test_knowledge import ACTIVATE, cite, garden, search
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services")

ADMIN_FIELDS = {
    "id",
    "email",
    "display_name",
    "is_admin",
    "created_at",
    "disabled",
    "last_seen_at",
    "quota",
}


async def make_admin(services: Services, client: Client) -> Client:
    async with services.sessions() as db:
        await db.execute(
            update(User).where(User.id == uuid.UUID(client.user["id"])).values(is_admin=True)
        )
        await db.commit()
    client.user["is_admin"] = True
    return client


@pytest.fixture
async def admin(new_user: NewUser, services: Services) -> Client:
    return await make_admin(services, await new_user("admin@example.com"))


async def state(services: Services, user_id: str) -> tuple[bool, bool, Any]:
    async with services.sessions() as db:
        row = (
            await db.execute(
                select(User.is_admin, User.disabled, User.quota).where(
                    User.id == uuid.UUID(user_id)
                )
            )
        ).one()
    return row.is_admin, row.disabled, row.quota


# -- who may administer -----------------------------------------------------------------------


async def test_a_non_admin_gets_403_on_every_admin_route_and_nothing_changes(
    user: Client, admin: Client, services: Services
) -> None:
    before = await state(services, admin.user["id"])
    answers = [
        await user.get("/api/admin/users"),
        await user.patch(f"/api/admin/users/{admin.user['id']}", json={"disabled": True}),
        await user.patch(f"/api/admin/users/{user.user['id']}", json={"is_admin": True}),
        await user.delete(f"/api/admin/users/{admin.user['id']}"),
    ]
    assert [a.status_code for a in answers] == [403] * 4
    assert all(a.json() == {"detail": "administrators only"} for a in answers)
    assert await state(services, admin.user["id"]) == before
    assert await state(services, user.user["id"]) == (False, False, None)


async def test_an_admins_key_is_403_on_every_admin_route(
    admin: Client, user: Client, services: Services
) -> None:
    key = (await make_key(admin))["key"]
    async with as_key(str(admin.http.base_url), key) as script:
        answers = [
            await script.get("/api/admin/users"),
            await script.patch(f"/api/admin/users/{user.user['id']}", json={"disabled": True}),
            await script.delete(f"/api/admin/users/{user.user['id']}"),
        ]
    assert [a.status_code for a in answers] == [403] * 3
    assert await state(services, user.user["id"]) == (False, False, None)


async def test_anyone_signed_out_is_401_on_admin_routes(anon: Client, user: Client) -> None:
    assert (await anon.get("/api/admin/users")).status_code == 401
    response = await anon.http.delete(f"/api/admin/users/{user.user['id']}")
    assert response.status_code in (401, 403)  # without a session there is no CSRF pair either


async def test_a_disabled_admin_administers_nothing(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    other = await make_admin(services, await new_user())
    response = await admin.patch(f"/api/admin/users/{other.user['id']}", json={"disabled": True})
    assert response.status_code == 200
    assert (await other.get("/api/admin/users")).status_code == 401


# -- the list --------------------------------------------------------------------------------


async def test_the_users_list_pages_newest_first_with_state_and_quota(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    made = []
    for n in range(5):
        services.clock.advance(seconds=1)  # type: ignore[attr-defined]
        made.append(await new_user(f"person-{n}@example.com"))
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        body = (await admin.get("/api/admin/users", params=params)).json()
        assert len(body["items"]) <= 2
        seen += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert [u["email"] for u in seen] == [
        *(f"person-{n}@example.com" for n in reversed(range(5))),
        "admin@example.com",
    ]
    assert all(set(u) == ADMIN_FIELDS for u in seen)
    newest = seen[0]
    assert newest["disabled"] is False and newest["quota"] is None
    assert newest["last_seen_at"] is not None  # their session's


async def test_the_users_list_searches_email_and_display_name_literally(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    ada = await new_user("ada@example.com")
    await new_user("bob@example.org")
    await new_user("100%_sure@example.com")
    async with services.sessions() as db:
        await db.execute(
            update(User).where(User.id == uuid.UUID(ada.user["id"])).values(display_name="Lovelace")
        )
        await db.commit()

    async def found(q: str) -> list[str]:
        response = await admin.get("/api/admin/users", params={"q": q})
        assert response.status_code == 200, response.text
        return sorted(u["email"] for u in response.json()["items"])

    assert await found("ADA@") == ["ada@example.com"]
    assert await found("lovel") == ["ada@example.com"]
    assert await found("example.org") == ["bob@example.org"]
    assert await found("%") == ["100%_sure@example.com"]  # no wildcard: the character itself
    assert await found("_") == ["100%_sure@example.com"]
    assert await found("nobody") == []


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": "ten"},
        {"limit": 10**6},
        {"cursor": "not-a-cursor"},
        {"q": "x" * 400},
    ],
)
async def test_a_bad_users_list_query_is_422(admin: Client, params: dict[str, Any]) -> None:
    response = await admin.get("/api/admin/users", params=params)
    assert response.status_code == 422, response.text


# -- disabling -------------------------------------------------------------------------------


async def test_disabling_a_user_stops_their_running_turn_and_refuses_their_session_and_key(
    admin: Client,
    user: Client,
    services: Services,
    registry: Any,
    fakes: dict[str, FakeProviderServer],
) -> None:
    key = (await make_key(user))["key"]
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    held = asyncio.Event()
    fakes["openai"].script(Reply(text="This will not be finished.", hold=held))
    async with as_key(str(user.http.base_url), key) as script:
        async with script.http.stream(
            "POST", f"/api/chats/{chat_id}/messages", json={"content": "Go on"}
        ) as response:
            assert response.status_code == 200
            chunks = response.aiter_text()
            text = await anext(chunks)  # the turn is under way, its model request held
            assert '"type":"start"' in text.replace(" ", "")
            answer = await admin.patch(
                f"/api/admin/users/{user.user['id']}", json={"disabled": True}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["disabled"] is True
            async for more in chunks:
                text += more
        assert text.endswith("data: [DONE]\n\n")
        types = [p["type"] for p in parse_stream(text)]
        assert "abort" in types and "finish" not in types, types
        assert (await script.get("/api/chats")).status_code == 401
    held.set()
    assert (await user.get("/api/auth/me")).status_code == 401
    async with services.sessions() as db:
        chat = await db.get(Chat, uuid.UUID(chat_id))
        assert chat is not None and chat.turn_owner is None
    shown = (await admin.get("/api/admin/users", params={"q": user.user["email"]})).json()
    assert shown["items"][0]["disabled"] is True


async def test_enabling_a_user_again_lets_them_sign_in(
    admin: Client, user: Client, anon: Client
) -> None:
    path = f"/api/admin/users/{user.user['id']}"
    assert (await admin.patch(path, json={"disabled": True})).status_code == 200
    credentials = {"email": user.user["email"], "password": user.password}
    assert (await anon.post("/api/auth/login", json=credentials)).status_code == 401
    assert (await admin.patch(path, json={"disabled": False})).json()["disabled"] is False
    assert (await anon.post("/api/auth/login", json=credentials)).status_code == 200


async def test_the_admin_flag_is_granted_and_taken(admin: Client, user: Client) -> None:
    path = f"/api/admin/users/{user.user['id']}"
    assert (await admin.patch(path, json={"is_admin": True})).json()["is_admin"] is True
    assert (await user.get("/api/admin/users")).status_code == 200
    assert (await admin.patch(path, json={"is_admin": False})).json()["is_admin"] is False
    assert (await user.get("/api/admin/users")).status_code == 403


# -- quotas ----------------------------------------------------------------------------------


async def test_a_quota_is_set_partly_unlimited_and_cleared(
    admin: Client, user: Client, services: Services
) -> None:
    path = f"/api/admin/users/{user.user['id']}"
    quota = {"daily_tokens": 50_000, "monthly_cost_usd": 12.5}
    assert (await admin.patch(path, json={"quota": quota})).json()["quota"] == quota
    assert (await state(services, user.user["id"]))[2] == quota
    tokens_only = {"daily_tokens": 10, "monthly_cost_usd": None}
    answer = await admin.patch(path, json={"quota": {"daily_tokens": 10}})
    assert answer.json()["quota"] == tokens_only
    untouched = await admin.patch(path, json={"is_admin": False})
    assert untouched.json()["quota"] == tokens_only  # a field not sent is not changed
    assert (await admin.patch(path, json={"quota": None})).json()["quota"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"quota": {"daily_tokens": -1}},
        {"quota": {"monthly_cost_usd": -0.01}},
        {"quota": {"daily_tokens": 10**18}},
        {"quota": {"monthly_cost_usd": 1e12}},
        {"quota": {"monthly_cost_usd": "Infinity"}},
        {"quota": {"daily_tokens": 1.5}},
        {"quota": {"daily_tokens": "many"}},
        {"quota": {"weekly": 3}},
        {"quota": 5},
        {"disabled": "yes"},
        {"disabled": None},
        {"is_admin": 1},
        {"role": "admin"},
        [],
    ],
)
async def test_a_bad_patch_is_422_and_changes_nothing(
    admin: Client, user: Client, services: Services, body: Any
) -> None:
    response = await admin.patch(f"/api/admin/users/{user.user['id']}", json=body)
    assert response.status_code == 422, response.text
    assert await state(services, user.user["id"]) == (False, False, None)


async def test_an_unknown_or_malformed_user_id_is_404_or_422(admin: Client) -> None:
    unknown = f"/api/admin/users/{uuid.uuid4()}"
    assert (await admin.patch(unknown, json={"disabled": True})).status_code == 404
    assert (await admin.delete(unknown)).status_code == 404
    assert (await admin.patch("/api/admin/users/../keys", json={})).status_code in (404, 405)
    assert (await admin.patch("/api/admin/users/42", json={})).status_code == 422


# -- the last admin --------------------------------------------------------------------------


async def test_the_last_admin_cannot_be_demoted_disabled_or_deleted(
    admin: Client, services: Services
) -> None:
    path = f"/api/admin/users/{admin.user['id']}"
    for body in ({"is_admin": False}, {"disabled": True}):
        response = await admin.patch(path, json=body)
        assert response.status_code == 409, body
        assert "no enabled administrator" in response.json()["detail"]
    response = await admin.delete(path)
    assert response.status_code == 409
    assert await state(services, admin.user["id"]) == (True, False, None)


async def test_with_another_admin_one_may_step_down_and_the_last_may_not(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    other = await make_admin(services, await new_user())
    assert (await admin.patch(f"/api/admin/users/{other.user['id']}", json={})).status_code == 200
    response = await other.patch(f"/api/admin/users/{other.user['id']}", json={"is_admin": False})
    assert response.status_code == 200
    response = await admin.patch(f"/api/admin/users/{admin.user['id']}", json={"is_admin": False})
    assert response.status_code == 409


async def test_two_admins_demoting_each_other_at_once_leave_one(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    other = await make_admin(services, await new_user())
    answers = await asyncio.gather(
        admin.patch(f"/api/admin/users/{other.user['id']}", json={"is_admin": False}),
        other.patch(f"/api/admin/users/{admin.user['id']}", json={"is_admin": False}),
    )
    assert sorted(a.status_code for a in answers) in ([200, 409], [200, 403])
    async with services.sessions() as db:
        admins = await db.scalar(select(func.count()).select_from(User).where(User.is_admin))
    assert admins == 1


async def test_an_admin_deletes_themself_when_another_admin_remains(
    admin: Client, new_user: NewUser, services: Services
) -> None:
    await make_admin(services, await new_user())
    assert (await admin.delete(f"/api/admin/users/{admin.user['id']}")).status_code == 204
    assert (await admin.get("/api/auth/me")).status_code == 401


# -- deleting --------------------------------------------------------------------------------


async def rows_of_everything(services: Services) -> dict[str, int]:
    async with services.engine.connect() as connection:
        counts = {}
        for table in Base.metadata.sorted_tables:
            counts[table.name] = await connection.scalar(select(func.count()).select_from(table))
    return counts


async def test_deleting_a_user_removes_every_row_and_file_that_was_theirs(
    admin: Client,
    new_user: NewUser,
    services: Services,
    registry: Any,
    fakes: dict[str, FakeProviderServer],
) -> None:
    before = await rows_of_everything(services)
    person = await new_user()
    await make_key(person)
    _, (watering, *_) = await garden(services, person)
    fakes["openai"].script(
        Reply(tool_calls=[ACTIVATE]),
        Reply(tool_calls=[search("tomatoes water", id="call_s")]),
        Reply(tool_calls=[cite([watering], id="call_c")]),
        Reply(text="Every evening."),
        Reply(text="You are welcome."),
        Reply(text="Good night."),
        Reply(text="A summary of the garden talk."),
    )
    chat_id = (await person.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    for question in ("Water?", "Thanks.", "Bye."):
        response = await person.post(f"/api/chats/{chat_id}/messages", json={"content": question})
        assert response.status_code == 200
        await wait_until_idle(person, chat_id)
    services.settings = services.settings.model_copy(update={"compact_keep": 2})
    compacted = await person.post(f"/api/chats/{chat_id}/compact")
    assert compacted.status_code == 200, compacted.text
    async with services.sessions() as db:
        db.add(
            McpConnection(
                user_id=uuid.UUID(person.user["id"]),
                server="github",
                created_at=services.clock.now(),
                updated_at=services.clock.now(),
            )
        )
        await db.commit()
    during = await rows_of_everything(services)
    owned = {name for name, count in during.items() if count > before[name]}
    expected = {
        "users",
        "auth_sessions",
        "api_keys",
        "mcp_connections",
        "llm_requests",
        "uploads",
        "chats",
        "messages",
        "chat_llm_tools",
        "activated_tools",
        "chat_summaries",
        "knowledge_chunks",
        "chat_evidence",
        "usage_daily",
    }
    assert expected <= owned, expected - owned
    root = user_root(services.settings.data_dir, person.user["id"])
    assert any(path.is_file() for path in root.rglob("*"))

    assert (await admin.delete(f"/api/admin/users/{person.user['id']}")).status_code == 204

    after = await rows_of_everything(services)
    left = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert left == {}, left
    assert not root.exists()
    assert (await person.get("/api/auth/me")).status_code == 401
    assert (await admin.get("/api/auth/me")).status_code == 200


async def test_deleting_a_user_with_a_running_turn_stops_it_first(
    admin: Client,
    user: Client,
    services: Services,
    registry: Any,
    fakes: dict[str, FakeProviderServer],
) -> None:
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    held = asyncio.Event()
    fakes["openai"].script(Reply(text="Never told.", hold=held))
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "Go"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        assert response.status_code == 200
        chunks = response.aiter_text()
        await anext(chunks)
        assert (await admin.delete(f"/api/admin/users/{user.user['id']}")).status_code == 204
        async for _ in chunks:
            pass
    held.set()
    async with services.sessions() as db:
        assert await db.scalar(select(func.count()).select_from(Chat)) == 0
        assert await db.get(User, uuid.UUID(user.user["id"])) is None

    assert not (services.settings.data_dir / "users" / user.user["id"]).exists()


async def test_a_refused_deletion_of_the_last_admin_stops_nothing_of_theirs(
    admin: Client, services: Services, registry: Any, fakes: dict[str, FakeProviderServer]
) -> None:
    chat_id = (await admin.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    fakes["openai"].script(Reply(text="Still here.", token_interval=0.02, chunk_chars=2))
    async with admin.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "Go"},
        headers={"X-CSRF-Token": admin.csrf or ""},
    ) as response:
        chunks = response.aiter_text()
        await anext(chunks)
        assert (await admin.delete(f"/api/admin/users/{admin.user['id']}")).status_code == 409
        async for _ in chunks:
            pass
    chat = await wait_until_idle(admin, chat_id)
    assert chat["messages"][-1]["status"] == "ok"
    assert chat["messages"][-1]["content"] == "Still here."
