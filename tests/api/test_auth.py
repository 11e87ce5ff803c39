"""Auth over real HTTP: register, login, me, logout, expiry, tampering, CSRF, throttling."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from app.clock import ShiftedClock
from app.db.models import AuthSession
from app.services import Services
from tests.conftest import NewUser
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

USER_FIELDS = {"id", "email", "display_name", "is_admin", "created_at", "csrf_token"}


async def test_register_signs_in_and_me_answers(anon: Client) -> None:
    response = await anon.post(
        "/api/auth/register",
        json={"email": "  Ada@Example.COM ", "password": "analytical", "display_name": "Ada"},
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == USER_FIELDS
    assert body["email"] == "ada@example.com"
    assert body["display_name"] == "Ada"
    assert body["is_admin"] is False
    assert body["csrf_token"] == anon.csrf

    session_cookie = response.headers.get_list("set-cookie")
    session_line = next(line for line in session_cookie if line.startswith("hearth_session="))
    csrf_line = next(line for line in session_cookie if line.startswith("hearth_csrf="))
    assert (
        "HttpOnly" in session_line and "SameSite=lax" in session_line and "Path=/" in session_line
    )
    assert "HttpOnly" not in csrf_line

    me = await anon.get("/api/auth/me")
    assert me.status_code == 200
    assert me.json()["id"] == body["id"]
    assert me.json()["csrf_token"] == body["csrf_token"]


async def test_register_defaults_display_name_to_local_part(anon: Client) -> None:
    response = await anon.post(
        "/api/auth/register", json={"email": "grace@navy.mil", "password": "cobol-rules"}
    )
    assert response.json()["display_name"] == "grace"


async def test_register_email_taken_is_409_case_insensitively(anon: Client, user: Client) -> None:
    response = await anon.post(
        "/api/auth/register",
        json={"email": user.user["email"].upper(), "password": "another-password"},
    )
    assert response.status_code == 409
    assert "exists" in response.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"email": "ada@example.com", "password": "short"},
        {"email": "not-an-email", "password": "long enough"},
        {"email": "two@@example.com", "password": "long enough"},
        {"email": "spaces in@example.com", "password": "long enough"},
        {"email": "ada@example.com"},
        {"password": "long enough"},
        {"email": 42, "password": "long enough"},
        {"email": "ada@example.com", "password": ["a list"]},
        {"email": "ada@example.com", "password": "long enough", "is_admin": True},
        {"email": "ada@example.com", "password": "x" * 2000},
    ],
)
async def test_register_rejects_invalid_input(anon: Client, body: dict[str, object]) -> None:
    response = await anon.post("/api/auth/register", json=body)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)
    assert (await anon.get("/api/auth/me")).status_code == 401


async def test_register_never_makes_an_admin(anon: Client) -> None:
    response = await anon.post(
        "/api/auth/register",
        json={"email": "eve@example.com", "password": "long enough", "is_admin": True},
    )
    assert response.status_code == 422


async def test_registration_closed_is_403(anon: Client, services: Services) -> None:
    services.settings = services.settings.model_copy(update={"allow_registration": False})
    response = await anon.post(
        "/api/auth/register", json={"email": "late@example.com", "password": "long enough"}
    )
    assert response.status_code == 403
    assert response.json() == {"detail": "registration is closed"}


async def test_login_gives_a_new_session_each_time(
    anon: Client, user: Client, services: Services
) -> None:
    first_cookie = user.http.cookies["hearth_session"]
    response = await anon.post(
        "/api/auth/login", json={"email": user.user["email"], "password": user.password}
    )
    assert response.status_code == 200
    assert set(response.json()) == USER_FIELDS
    assert anon.http.cookies["hearth_session"] != first_cookie
    assert response.json()["csrf_token"] != user.csrf
    async with services.sessions() as db:
        count = await db.scalar(select(func.count()).select_from(AuthSession))
    assert count == 2
    # Both sessions stay valid: signing in elsewhere does not sign this browser out.
    assert (await user.get("/api/auth/me")).status_code == 200
    assert (await anon.get("/api/auth/me")).status_code == 200


@pytest.mark.parametrize(
    "credentials",
    [
        {"email": "USER", "password": "wrong password"},
        {"email": "nobody@example.com", "password": "correct horse"},
    ],
)
async def test_bad_credentials_get_one_generic_401(
    anon: Client, user: Client, credentials: dict[str, str]
) -> None:
    email = user.user["email"] if credentials["email"] == "USER" else credentials["email"]
    response = await anon.post(
        "/api/auth/login", json={"email": email, "password": credentials["password"]}
    )
    assert response.status_code == 401
    assert response.json() == {"detail": "wrong email or password"}
    assert "hearth_session" not in anon.http.cookies


async def test_logout_revokes_the_cookie(user: Client) -> None:
    cookie = user.http.cookies["hearth_session"]
    assert (await user.post("/api/auth/logout")).status_code == 204
    user.http.cookies.set("hearth_session", cookie)
    assert (await user.get("/api/auth/me")).status_code == 401
    assert (await user.get("/api/chats")).status_code == 401


async def test_tampered_or_forged_cookie_is_refused(user: Client, anon: Client) -> None:
    cookie = user.http.cookies["hearth_session"]
    token, signature = cookie.rsplit(".", 1)
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    for forged in (f"{flipped}.{signature}", f"{token}.{signature[:-2]}xx", token, "", "x" * 5000):
        anon.http.cookies.set("hearth_session", forged)
        response = await anon.get("/api/auth/me")
        assert response.status_code == 401, forged


async def test_idle_expiry(user: Client, clock: ShiftedClock) -> None:
    clock.advance(days=6)
    assert (await user.get("/api/auth/me")).status_code == 200  # seen: idle time restarts
    clock.advance(days=6)
    assert (await user.get("/api/auth/me")).status_code == 200
    clock.advance(days=7, seconds=1)
    assert (await user.get("/api/auth/me")).status_code == 401


async def test_absolute_expiry_despite_activity(user: Client, clock: ShiftedClock) -> None:
    for _ in range(5):
        clock.advance(days=5)
        assert (await user.get("/api/auth/me")).status_code == 200
    clock.advance(days=5, seconds=1)  # 30 days and a second since sign-in
    assert (await user.get("/api/auth/me")).status_code == 401


@pytest.mark.parametrize("header", [None, "", "wrong", "COOKIE_OF_OTHER_SESSION"])
async def test_csrf_missing_or_wrong_is_403(
    user: Client, new_user: NewUser, header: str | None
) -> None:
    other = await new_user()
    headers = {}
    if header == "COOKIE_OF_OTHER_SESSION":
        # A token that is genuine, but for another session (with the cookie set to match).
        headers["X-CSRF-Token"] = other.csrf or ""
        user.http.cookies.set("hearth_csrf", other.csrf or "")
    elif header is not None:
        headers["X-CSRF-Token"] = header
    response = await user.http.post("/api/chats", json={}, headers=headers)
    assert response.status_code == 403
    assert "X-CSRF-Token" in response.json()["detail"]
    assert (await user.http.post("/api/auth/logout", headers=headers)).status_code == 403


async def test_csrf_header_must_match_the_cookie(user: Client) -> None:
    token = user.csrf or ""
    user.http.cookies.delete("hearth_csrf")
    response = await user.http.post("/api/chats", json={}, headers={"X-CSRF-Token": token})
    assert response.status_code == 403


async def test_safe_methods_need_no_csrf(user: Client) -> None:
    assert (await user.http.get("/api/chats")).status_code == 200


async def test_unauthenticated_routes_answer_401(anon: Client) -> None:
    for method, url in [
        ("GET", "/api/auth/me"),
        ("POST", "/api/auth/logout"),
        ("GET", "/api/chats"),
        ("POST", "/api/chats"),
        ("GET", "/api/models"),
        ("GET", "/api/chats/00000000-0000-0000-0000-000000000000"),
    ]:
        response = await anon.http.request(method, url, json={} if method == "POST" else None)
        assert response.status_code == 401, (method, url)


async def test_throttling_after_repeated_failures(
    anon: Client, user: Client, clock: ShiftedClock
) -> None:
    email = user.user["email"]
    for _ in range(5):
        failed = await anon.post("/api/auth/login", json={"email": email, "password": "nope nope"})
        assert failed.status_code == 401
    blocked = await anon.post("/api/auth/login", json={"email": email, "password": user.password})
    assert blocked.status_code == 429
    retry = int(blocked.headers["Retry-After"])
    assert 1 <= retry <= 15 * 60
    clock.advance(seconds=retry + 1)
    allowed = await anon.post("/api/auth/login", json={"email": email, "password": user.password})
    assert allowed.status_code == 200


async def test_throttling_per_address_covers_other_emails(anon: Client) -> None:
    for n in range(5):
        response = await anon.post(
            "/api/auth/login", json={"email": f"guess{n}@example.com", "password": "nope nope"}
        )
        assert response.status_code == 401
    response = await anon.post(
        "/api/auth/login", json={"email": "guess9@example.com", "password": "nope nope"}
    )
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0


async def test_password_hash_never_leaves_the_server(
    anon: Client, user: Client, services: Services
) -> None:
    async with services.sessions() as db:
        from app.db.models import User

        stored = await db.scalar(select(User.password_hash))
    assert stored and stored.startswith("$argon2")
    responses: list[httpx.Response] = [
        await user.get("/api/auth/me"),
        await anon.post(
            "/api/auth/login", json={"email": user.user["email"], "password": user.password}
        ),
        await anon.post(
            "/api/auth/register", json={"email": "z@example.com", "password": "long enough"}
        ),
        await user.get("/openapi.json"),
    ]
    for response in responses:
        assert "argon2" not in response.text
        assert "password_hash" not in response.text
        assert stored not in response.text
