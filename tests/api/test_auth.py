"""Auth over real HTTP: register, login, me, logout, expiry, tampering, CSRF, throttling.

Throttling tests name client addresses through `X-Forwarded-For` from a trusted loopback proxy,
and count Argon2 work by wrapping the functions the worker threads run: the server runs in this
process, so no assertion depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.auth import passwords, throttle
from app.cli import _create_user
from app.models import AuthSession
from app.services import Services
from tests.clock import ShiftedClock
from tests.conftest import NewUser
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

USER_FIELDS = {"id", "email", "display_name", "is_admin", "created_at", "csrf_token"}
FROM_A = {"X-Forwarded-For": "203.0.113.10"}
FROM_B = {"X-Forwarded-For": "198.51.100.20"}


def settings(services: Services, **update: Any) -> None:
    """Change the running server's settings for one test (the fixture restores them)."""
    services.settings = services.settings.model_copy(update=update)


class CallCounter:
    """Counts the calls of a function that runs in worker threads, and the most at once."""

    def __init__(self, function: Callable[..., Any], hold: float) -> None:
        self.function = function
        self.hold = hold
        self.calls = 0
        self.running = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            time.sleep(self.hold)  # overlap is likely, if the code allows it
            return self.function(*args)
        finally:
            with self.lock:
                self.running -= 1


def count_calls(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, hold: float = 0.0
) -> CallCounter:
    counter = CallCounter(getattr(module, name), hold)
    monkeypatch.setattr(module, name, counter)
    return counter


def record_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The slowdown's pauses, recorded instead of waited."""
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(throttle, "pause", pause)
    return pauses


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


async def test_throttling_per_address_covers_other_emails(
    anon: Client, user: Client, services: Services
) -> None:
    settings(services, login_max_failures_per_address=3)
    for n in range(3):
        response = await anon.post(
            "/api/auth/login", json={"email": f"guess{n}@example.com", "password": "nope nope"}
        )
        assert response.status_code == 401
    response = await anon.post(
        "/api/auth/login", json={"email": "guess9@example.com", "password": "nope nope"}
    )
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    # The address is refused before any check, even with a right password.
    owner = {"email": user.user["email"], "password": user.password}
    assert (await anon.post("/api/auth/login", json=owner)).status_code == 429


async def test_successful_sign_ins_do_not_count_against_the_address(
    anon: Client, user: Client, services: Services
) -> None:
    settings(services, login_max_failures_per_address=2)
    owner = {"email": user.user["email"], "password": user.password}
    for _ in range(4):
        assert (await anon.post("/api/auth/login", json=owner)).status_code == 200


@pytest.mark.slow
async def test_parallel_wrong_sign_ins_check_the_password_exactly_the_limit(
    anon: Client, user: Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = count_calls(monkeypatch, passwords, "_verify")
    pauses = record_pauses(monkeypatch)
    settings(services, trusted_proxies=["127.0.0.1"])
    email = user.user["email"]
    answers = await asyncio.gather(
        *(
            anon.post(
                "/api/auth/login",
                json={"email": email, "password": f"wrong guess {n}"},
                headers=FROM_A,
            )
            for n in range(40)
        )
    )
    limit = services.settings.login_max_failures
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [401] * limit + [429] * (40 - limit)
    assert checks.calls == limit
    assert all(int(a.headers["Retry-After"]) >= 1 for a in answers if a.status_code == 429)

    # The owner is not locked out: from another address they sign in, only slowed down.
    owner = {"email": email, "password": user.password}
    assert (await anon.post("/api/auth/login", json=owner, headers=FROM_B)).status_code == 200
    assert pauses and pauses[-1] > 0
    # From the guessing address, even the right password waits for the window.
    assert (await anon.post("/api/auth/login", json=owner, headers=FROM_A)).status_code == 429


@pytest.mark.slow
async def test_failures_from_many_addresses_slow_the_email_down_never_lock_it(
    anon: Client, user: Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses = record_pauses(monkeypatch)
    settings(services, trusted_proxies=["127.0.0.1"])
    email = user.user["email"]
    limit = services.settings.login_max_failures
    for n in range(limit + 8):
        response = await anon.post(
            "/api/auth/login",
            json={"email": email, "password": "wrong guess"},
            headers={"X-Forwarded-For": f"198.51.100.{n + 1}"},
        )
        assert response.status_code == 401  # one failure per address: never refused
    assert pauses[0] == throttle.SLOWDOWN_STEP
    assert pauses == sorted(pauses) and len(set(pauses)) > 3  # growing with the failures
    assert max(pauses) == throttle.SLOWDOWN_CAP  # and capped
    owner = {"email": email, "password": user.password}
    assert (await anon.post("/api/auth/login", json=owner, headers=FROM_B)).status_code == 200
    assert len(pauses) == limit + 8 - limit + 1


@pytest.mark.slow
async def test_a_success_clears_the_failures_of_its_email_and_address(
    anon: Client, user: Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_pauses(monkeypatch)
    email = user.user["email"]
    limit = services.settings.login_max_failures
    wrong = {"email": email, "password": "wrong guess"}
    for _ in range(limit - 1):
        assert (await anon.post("/api/auth/login", json=wrong)).status_code == 401
    owner = {"email": email, "password": user.password}
    assert (await anon.post("/api/auth/login", json=owner)).status_code == 200
    for _ in range(limit):
        assert (await anon.post("/api/auth/login", json=wrong)).status_code == 401
    assert (await anon.post("/api/auth/login", json=wrong)).status_code == 429


async def test_forwarded_headers_are_ignored_from_an_untrusted_peer(
    anon: Client, user: Client, services: Services
) -> None:
    email = user.user["email"]
    for n in range(services.settings.login_max_failures):
        response = await anon.post(
            "/api/auth/login",
            json={"email": email, "password": "wrong guess"},
            headers={"X-Forwarded-For": f"203.0.113.{n + 1}", "Forwarded": f"for=192.0.2.{n}"},
        )
        assert response.status_code == 401
    # Every attempt came from 127.0.0.1 whatever the headers said, so this one is refused too.
    response = await anon.post(
        "/api/auth/login",
        json={"email": email, "password": user.password},
        headers={"X-Forwarded-For": "203.0.113.99"},
    )
    assert response.status_code == 429


@pytest.mark.slow
@pytest.mark.parametrize("header", ["X-Forwarded-For", "Forwarded"])
async def test_forwarded_headers_are_honoured_from_a_trusted_proxy(
    anon: Client, user: Client, services: Services, header: str
) -> None:
    settings(services, trusted_proxies=["127.0.0.0/8"])

    def via(address: str) -> dict[str, str]:
        value = address if header == "X-Forwarded-For" else f'for="{address}";proto=https'
        return {header: value}

    email = user.user["email"]
    wrong = {"email": email, "password": "wrong guess"}
    for _ in range(services.settings.login_max_failures):
        response = await anon.post("/api/auth/login", json=wrong, headers=via("203.0.113.7"))
        assert response.status_code == 401
    refused = await anon.post("/api/auth/login", json=wrong, headers=via("203.0.113.7"))
    assert refused.status_code == 429
    assert (
        await anon.post("/api/auth/login", json=wrong, headers=via("203.0.113.8"))
    ).status_code == 401
    # Without the header the proxy itself is the client: another address again.
    assert (await anon.post("/api/auth/login", json=wrong)).status_code == 401


@pytest.mark.slow
async def test_parallel_sign_ups_hash_a_few_at_a_time_and_are_limited_per_address(
    anon: Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashes = count_calls(monkeypatch, passwords, "_hash", hold=0.02)
    limit = services.settings.registrations_per_hour
    answers = await asyncio.gather(
        *(
            anon.post(
                "/api/auth/register",
                json={"email": f"burst{n}@example.com", "password": "long enough"},
            )
            for n in range(30)
        )
    )
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [201] * limit + [429] * (30 - limit)
    assert hashes.calls == limit
    assert 1 <= hashes.most_at_once <= passwords.SLOTS


async def test_sign_ups_per_address_are_limited_per_hour(
    anon: Client, services: Services, clock: ShiftedClock
) -> None:
    settings(services, registrations_per_hour=2, trusted_proxies=["127.0.0.1"])

    async def sign_up(n: int, headers: dict[str, str] | None = None) -> httpx.Response:
        return await anon.post(
            "/api/auth/register",
            json={"email": f"hourly{n}@example.com", "password": "long enough"},
            headers=headers,
        )

    assert (await sign_up(1, FROM_A)).status_code == 201
    assert (await sign_up(2, FROM_A)).status_code == 201
    refused = await sign_up(3, FROM_A)
    assert refused.status_code == 429
    assert "sign-ups" in refused.json()["detail"]
    retry = int(refused.headers["Retry-After"])
    assert 3500 <= retry <= 3600
    assert (await sign_up(4, FROM_B)).status_code == 201
    clock.advance(seconds=retry + 1)
    assert (await sign_up(5, FROM_A)).status_code == 201


@pytest.mark.parametrize(
    "password",
    ["password", "12345678", "PassWord1", "  iloveyou  ", "baseball", "qwertyuiop"],
)
async def test_register_refuses_the_most_common_passwords(anon: Client, password: str) -> None:
    response = await anon.post(
        "/api/auth/register", json={"email": "common@example.com", "password": password}
    )
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "password"]
    assert "most common passwords" in problem["msg"]


@pytest.mark.parametrize("password", [" " * 8, "\t" * 8, " \u3000 " * 4, "\n" * 12])
async def test_register_refuses_whitespace_passwords(anon: Client, password: str) -> None:
    response = await anon.post(
        "/api/auth/register", json={"email": "blank@example.com", "password": password}
    )
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "password"]
    assert "only whitespace" in problem["msg"]


@pytest.mark.parametrize("password", ["password1", "        "])
async def test_users_create_refuses_what_register_refuses(
    services: Services, password: str
) -> None:
    with pytest.raises(SystemExit) as refused:
        await _create_user(services.settings, "admin@example.com", password, True, None)
    assert "password" in str(refused.value)


async def test_password_hash_never_leaves_the_server(
    anon: Client, user: Client, services: Services
) -> None:
    async with services.sessions() as db:
        from app.models import User

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
