"""Accounts over real HTTP: the password change, the sessions list, API keys and Bearer auth, and
disabled users, with what a careless or hostile client sends to each.

Keys are held to the contract one property at a time: the shape and the once-only answer, the
hash at rest, every way a key can stop working (revoked, expired, its owner disabled, one
character changed, a wrong prefix), where a key is not accepted (in a cookie) and what a key
cannot do (make keys, change the password). Time moves with the test clock, never by sleeping.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import select, update

from app.auth.keys import KEY_LENGTH, PREFIX_LENGTH
from app.auth.tokens import SESSION_COOKIE
from app.models import ApiKey, AuthSession, User
from app.services import Services
from tests.api.test_uploads import file_part, form
from tests.clock import ShiftedClock
from tests.conftest import NewUser
from tests.support import Client, http_client

pytestmark = pytest.mark.usefixtures("services")

KEY_FIELDS = {"id", "name", "prefix", "created_at", "expires_at", "last_used_at"}
SESSION_FIELDS = {"id", "created_at", "last_seen_at", "user_agent", "current"}


@asynccontextmanager
async def as_key(base_url: str, key: str) -> AsyncIterator[Client]:
    """A script's client: the key in `Authorization`, no cookies, so no CSRF header either."""
    async with http_client(
        base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        yield Client(http)


@pytest.fixture
def base_url(server: tuple[str, Services]) -> str:
    return server[0]


async def make_key(client: Client, name: str = "script", **body: Any) -> dict[str, Any]:
    response = await client.post("/api/keys", json={"name": name, **body})
    assert response.status_code == 201, response.text
    return response.json()


async def sign_in(anon_of: Callable[[], Any], user: Client, agent: str) -> Client:
    """Another browser of the same person, signed in through the route."""
    client = Client(anon_of())
    response = await client.post(
        "/api/auth/login",
        json={"email": user.user["email"], "password": user.password},
        headers={"User-Agent": agent},
    )
    assert response.status_code == 200, response.text
    return client


@pytest.fixture
async def browser(base_url: str) -> AsyncIterator[Callable[[], Any]]:
    opened = []

    def make() -> Any:
        http = http_client(base_url=base_url, timeout=30)
        opened.append(http)
        return http

    yield make
    for http in opened:
        await http.aclose()


# -- the password ---------------------------------------------------------------------------


async def test_a_password_change_signs_out_every_other_session_and_keeps_this_one(
    user: Client, browser: Callable[[], Any]
) -> None:
    laptop = await sign_in(browser, user, "Laptop/1.0")
    phone = await sign_in(browser, user, "Phone/2.0")
    changed = await laptop.post(
        "/api/auth/password",
        json={"current_password": user.password, "new_password": "a brand new one"},
    )
    assert changed.status_code == 204, changed.text
    assert (await laptop.get("/api/auth/me")).status_code == 200
    assert (await phone.get("/api/auth/me")).status_code == 401
    assert (await user.get("/api/auth/me")).status_code == 401

    fresh = Client(browser())
    old = {"email": user.user["email"], "password": user.password}
    assert (await fresh.post("/api/auth/login", json=old)).status_code == 401
    new = {"email": user.user["email"], "password": "a brand new one"}
    assert (await fresh.post("/api/auth/login", json=new)).status_code == 200


async def test_a_wrong_current_password_is_401_counted_as_a_failed_sign_in(
    user: Client, services: Services, browser: Callable[[], Any]
) -> None:
    limit = services.settings.login_max_failures
    codes = []
    for n in range(limit + 1):
        answer = await user.post(
            "/api/auth/password",
            json={"current_password": f"guess {n}", "new_password": "whatever else"},
        )
        codes.append(answer.status_code)
    assert codes == [401] * limit + [429]
    # The guesses were counted for this email and address, as sign-ins are: the throttle holds.
    signing_in = await Client(browser()).post(
        "/api/auth/login", json={"email": user.user["email"], "password": user.password}
    )
    assert signing_in.status_code == 429
    assert (await user.get("/api/auth/me")).status_code == 200, "the session stays"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"current_password": "correct horse", "new_password": "short"}, "new_password"),
        ({"current_password": "correct horse"}, "new_password"),
        ({"new_password": "long enough now"}, "current_password"),
        ({"current_password": 5, "new_password": "long enough now"}, "current_password"),
        ({"current_password": "correct horse", "new_password": ["x" * 9]}, "new_password"),
        (
            {"current_password": "correct horse", "new_password": "x" * 2000},
            "new_password",
        ),
    ],
)
async def test_a_password_change_with_a_bad_body_is_422_and_changes_nothing(
    user: Client, body: dict[str, Any], field: str, browser: Callable[[], Any]
) -> None:
    answer = await user.post("/api/auth/password", json=body)
    assert answer.status_code == 422, answer.text
    assert field in {str(e["loc"][-1]) for e in answer.json()["detail"]}
    again = await Client(browser()).post(
        "/api/auth/login", json={"email": user.user["email"], "password": user.password}
    )
    assert again.status_code == 200


async def test_a_password_change_needs_the_csrf_header(user: Client) -> None:
    answer = await user.http.post(
        "/api/auth/password",
        json={"current_password": user.password, "new_password": "a brand new one"},
    )
    assert answer.status_code == 403


# -- sessions -------------------------------------------------------------------------------


async def test_the_sessions_list_shows_live_sessions_with_their_browser_and_this_one_marked(
    user: Client, browser: Callable[[], Any], services: Services
) -> None:
    laptop = await sign_in(browser, user, "Laptop/1.0")
    await sign_in(browser, user, "Phone/2.0")
    signed_out = await sign_in(browser, user, "Old/0.1")
    assert (await signed_out.post("/api/auth/logout")).status_code == 204

    listed = await laptop.get("/api/auth/sessions")
    assert listed.status_code == 200, listed.text
    sessions = listed.json()
    assert all(set(s) == SESSION_FIELDS for s in sessions)
    assert len(sessions) == 3  # the fixture's, the laptop's and the phone's
    agents = {s["user_agent"]: s for s in sessions}
    assert set(agents) == {None, "Laptop/1.0", "Phone/2.0"}
    assert [s["user_agent"] for s in sessions if s["current"]] == ["Laptop/1.0"]
    other_users = await (await _other(services, browser)).get("/api/auth/sessions")
    assert {s["id"] for s in other_users.json()}.isdisjoint({s["id"] for s in sessions})


async def _other(services: Services, browser: Callable[[], Any]) -> Client:
    client = Client(browser())
    answer = await client.post(
        "/api/auth/register",
        json={"email": f"other-{uuid.uuid4().hex[:6]}@example.com", "password": "long enough"},
    )
    assert answer.status_code == 201, answer.text
    return client


async def test_last_seen_is_written_at_most_once_a_minute(
    user: Client, services: Services, clock: ShiftedClock
) -> None:
    [session] = (await user.get("/api/auth/sessions")).json()
    first = session["last_seen_at"]
    clock.advance(seconds=30)
    [session] = (await user.get("/api/auth/sessions")).json()
    assert session["last_seen_at"] == first
    clock.advance(seconds=31)
    [session] = (await user.get("/api/auth/sessions")).json()
    assert session["last_seen_at"] > first


async def test_a_session_revoked_from_the_list_is_refused_at_once(
    user: Client, browser: Callable[[], Any]
) -> None:
    phone = await sign_in(browser, user, "Phone/2.0")
    [phone_session] = [
        s for s in (await user.get("/api/auth/sessions")).json() if s["user_agent"] == "Phone/2.0"
    ]
    assert (await user.delete(f"/api/auth/sessions/{phone_session['id']}")).status_code == 204
    assert (await phone.get("/api/auth/me")).status_code == 401
    assert (await user.get("/api/auth/me")).status_code == 200
    again = await user.delete(f"/api/auth/sessions/{phone_session['id']}")
    assert again.status_code == 404


async def test_revoking_this_session_from_the_list_signs_it_out_and_clears_its_cookies(
    user: Client,
) -> None:
    [mine] = (await user.get("/api/auth/sessions")).json()
    answer = await user.delete(f"/api/auth/sessions/{mine['id']}")
    assert answer.status_code == 204
    assert SESSION_COOKIE in answer.headers.get("set-cookie", "")
    assert (await user.get("/api/auth/me")).status_code == 401


async def test_another_users_session_or_a_bad_id_is_404_and_revokes_nothing(
    user: Client, services: Services, browser: Callable[[], Any]
) -> None:
    other = await _other(services, browser)
    [theirs] = (await other.get("/api/auth/sessions")).json()
    assert (await user.delete(f"/api/auth/sessions/{theirs['id']}")).status_code == 404
    assert (await user.delete(f"/api/auth/sessions/{uuid.uuid4()}")).status_code == 404
    assert (await user.delete("/api/auth/sessions/not-a-uuid")).status_code == 422
    assert (await user.delete("/api/auth/sessions/..%2F..%2Fetc")).status_code in (404, 422)
    assert (await other.get("/api/auth/me")).status_code == 200
    csrf_less = await user.http.delete(f"/api/auth/sessions/{uuid.uuid4()}")
    assert csrf_less.status_code == 403


async def test_logout_all_signs_out_every_session_this_one_included(
    user: Client, browser: Callable[[], Any], base_url: str
) -> None:
    phone = await sign_in(browser, user, "Phone/2.0")
    key = (await make_key(user))["key"]
    answer = await user.post("/api/auth/logout-all")
    assert answer.status_code == 204
    assert (await user.get("/api/auth/me")).status_code == 401
    assert (await phone.get("/api/auth/me")).status_code == 401
    async with as_key(base_url, key) as script:  # keys are not sessions: they stay
        assert (await script.get("/api/auth/me")).status_code == 200


# -- API keys -------------------------------------------------------------------------------


async def test_a_new_key_is_shown_once_and_stored_only_as_its_hash(
    user: Client, services: Services
) -> None:
    created = await make_key(user, "nightly report")
    key = created["key"]
    assert set(created) == KEY_FIELDS | {"key"}
    assert key.startswith("hth_") and len(key) - 4 >= 32 and len(key) == KEY_LENGTH
    assert set(key[4:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert created["prefix"] == key[:PREFIX_LENGTH] and created["name"] == "nightly report"
    assert created["expires_at"] is None and created["last_used_at"] is None

    listed = (await user.get("/api/keys")).json()
    assert listed == [{k: v for k, v in created.items() if k != "key"}]
    async with services.sessions() as db:
        row = await db.scalar(select(ApiKey).where(ApiKey.id == uuid.UUID(created["id"])))
    assert row is not None
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in repr(row.__dict__)
    other = await make_key(user, "another")
    assert other["key"] != key and other["prefix"] != created["prefix"]


async def test_a_key_authenticates_api_and_data_routes_without_csrf(
    user: Client, base_url: str
) -> None:
    key = (await make_key(user))["key"]
    async with as_key(base_url, key) as script:
        me = await script.get("/api/auth/me")
        assert me.status_code == 200 and me.json()["id"] == user.user["id"]
        made = await script.post("/api/chats", json={})
        assert made.status_code == 201, made.text
        body, headers = form(file_part("notes.txt", b"hello from a script\n", "text/plain"))
        uploaded = await script.post("/api/uploads", content=body, headers=headers)
        assert uploaded.status_code == 201, uploaded.text
        [item] = uploaded.json()
        served = await script.get(item["url"])
        assert served.status_code == 200 and served.content == b"hello from a script\n"
        renamed = await script.patch(f"/api/chats/{made.json()['id']}", json={"title": "by key"})
        assert renamed.status_code == 200, renamed.text
    chats = (await user.get("/api/chats")).json()["items"]
    assert [c["title"] for c in chats] == ["by key"]


async def test_a_key_cannot_make_keys_change_the_password_or_sign_out_a_session(
    user: Client, base_url: str
) -> None:
    key = (await make_key(user))["key"]
    async with as_key(base_url, key) as script:
        assert (await script.post("/api/keys", json={"name": "child"})).status_code == 403
        changed = await script.post(
            "/api/auth/password",
            json={"current_password": user.password, "new_password": "taken over now"},
        )
        assert changed.status_code == 403
        assert (await script.post("/api/auth/logout")).status_code == 403
        # What it may do with keys: list them, and retire itself.
        [mine] = (await script.get("/api/keys")).json()
        assert (await script.delete(f"/api/keys/{mine['id']}")).status_code == 204
        assert (await script.get("/api/auth/me")).status_code == 401
    assert (await user.get("/api/keys")).json() == []


async def test_a_revoked_expired_altered_or_unknown_key_is_401(
    user: Client, base_url: str, clock: ShiftedClock
) -> None:
    revoked = await make_key(user, "revoked")
    assert (await user.delete(f"/api/keys/{revoked['id']}")).status_code == 204
    expiring = await make_key(user, "expiring", expires_in_days=1)
    good = (await make_key(user, "good"))["key"]
    last = good[-1]
    altered = [
        good[:-1] + ("A" if last != "A" else "B"),  # one character changed
        good[:10] + ("x" if good[10] != "x" else "y") + good[11:],  # one in the prefix
        "hth-" + good[4:],  # a wrong mark
        "sk_" + good[4:],
        good[4:],
        good + "A",
        good[:-1],
        "hth_" + "A" * 43,
    ]
    async with as_key(base_url, expiring["key"]) as script:
        assert (await script.get("/api/auth/me")).status_code == 200
        clock.advance(days=1, seconds=1)
        assert (await script.get("/api/auth/me")).status_code == 401
    for key in [revoked["key"], *altered]:
        async with as_key(base_url, key) as script:
            answer = await script.get("/api/chats")
            assert answer.status_code == 401, key
    assert [k["name"] for k in (await user.get("/api/keys")).json()] == ["good"]


async def test_a_key_in_a_cookie_or_a_cookie_as_a_key_is_refused(
    user: Client, base_url: str
) -> None:
    key = (await make_key(user))["key"]
    cookie = user.http.cookies.get(SESSION_COOKIE)
    assert cookie
    async with http_client(base_url=base_url, timeout=30) as http:
        http.cookies.set(SESSION_COOKIE, key, domain="127.0.0.1")
        assert (await http.get("/api/auth/me")).status_code == 401
    async with as_key(base_url, cookie) as script:
        assert (await script.get("/api/auth/me")).status_code == 401
    for header in (f"Basic {key}", key, f"Token {key}", "Bearer", f"Bearer {key} {key}"):
        async with http_client(
            base_url=base_url, timeout=30, headers={"Authorization": header}
        ) as http:
            assert (await http.get("/api/auth/me")).status_code == 401, header


async def test_a_bad_key_beside_a_good_cookie_is_still_401(user: Client) -> None:
    answer = await user.get("/api/auth/me", headers={"Authorization": "Bearer hth_nope"})
    assert answer.status_code == 401


async def test_last_used_is_written_at_most_once_a_minute(
    user: Client, base_url: str, clock: ShiftedClock
) -> None:
    created = await make_key(user)

    async def last_used() -> str | None:
        [listed] = (await user.get("/api/keys")).json()
        return listed["last_used_at"]

    async with as_key(base_url, created["key"]) as script:
        await script.get("/api/chats")
        first = await last_used()
        assert first is not None
        clock.advance(seconds=30)
        await script.get("/api/chats")
        assert await last_used() == first
        clock.advance(seconds=31)
        await script.get("/api/chats")
        later = await last_used()
        assert later is not None and later > first


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": "   "},
        {"name": "x" * 101},
        {"name": 7},
        {"name": "tab\tin it"},
        {"name": "ok", "expires_in_days": 0},
        {"name": "ok", "expires_in_days": -3},
        {"name": "ok", "expires_in_days": 10**9},
        {"name": "ok", "expires_in_days": "soon"},
        {"name": "ok", "expires_in_days": 1.5},
        {"name": "ok", "scope": "admin"},
        ["name"],
    ],
)
async def test_a_bad_key_request_is_422_and_makes_no_key(user: Client, body: Any) -> None:
    answer = await user.post("/api/keys", json=body)
    assert answer.status_code == 422, answer.text
    assert (await user.get("/api/keys")).json() == []


async def test_keys_of_another_user_are_404_and_stay(
    user: Client, new_user: NewUser, base_url: str
) -> None:
    other = await new_user()
    theirs = await make_key(other)
    assert (await user.delete(f"/api/keys/{theirs['id']}")).status_code == 404
    assert (await user.delete(f"/api/keys/{uuid.uuid4()}")).status_code == 404
    assert (await user.delete("/api/keys/12")).status_code == 422
    assert (await user.get("/api/keys")).json() == []
    async with as_key(base_url, theirs["key"]) as script:
        me = await script.get("/api/auth/me")
        assert me.json()["id"] == other.user["id"]
    assert (await user.http.delete(f"/api/keys/{theirs['id']}")).status_code == 403  # no CSRF


async def test_a_user_holds_a_bounded_number_of_keys(user: Client, services: Services) -> None:
    from app.users.keys import MAX_KEYS

    for n in range(MAX_KEYS):
        await make_key(user, f"k{n}")
    answer = await user.post("/api/keys", json={"name": "one too many"})
    assert answer.status_code == 409
    assert len((await user.get("/api/keys")).json()) == MAX_KEYS


async def test_keys_made_at_once_are_all_different(user: Client) -> None:
    made = await asyncio.gather(*(make_key(user, f"k{n}") for n in range(10)))
    assert len({m["key"] for m in made}) == 10
    assert len({m["prefix"] for m in made}) == 10


# -- disabled users -------------------------------------------------------------------------


async def disable(services: Services, user: Client) -> None:
    async with services.sessions() as db:
        await db.execute(
            update(User).where(User.id == uuid.UUID(user.user["id"])).values(disabled=True)
        )
        await db.commit()


async def test_a_disabled_user_is_refused_everywhere_at_once(
    user: Client, services: Services, base_url: str, browser: Callable[[], Any]
) -> None:
    key = (await make_key(user))["key"]
    await disable(services, user)
    assert (await user.get("/api/auth/me")).status_code == 401
    async with as_key(base_url, key) as script:
        assert (await script.get("/api/chats")).status_code == 401
    signing_in = await Client(browser()).post(
        "/api/auth/login", json={"email": user.user["email"], "password": user.password}
    )
    assert signing_in.status_code == 401
    assert signing_in.json() == {"detail": "wrong email or password"}
    async with services.sessions() as db:
        sessions = (await db.scalars(select(AuthSession))).all()
    assert len(sessions) == 1, "a refused sign-in opens no session"
