"""Input that once answered 500 (and reset the connection) is a clear 4xx, on every backend.

Cursors of a valid-looking but wrong shape, a lone surrogate or NUL in any JSON string, and a
non-ASCII CSRF header. After each answer the same keep-alive connection serves the next request.
"""

from __future__ import annotations

import json
from base64 import urlsafe_b64encode
from typing import Any

import pytest

from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")


def cursor(value: Any) -> str:
    return urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


SOME_ID = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize("route", ["/api/chats", "/api/uploads"])
@pytest.mark.parametrize(
    "value",
    [
        ["2026-01-01T00:00:00+00:00", 5],
        ["2026-01-01T00:00:00+00:00", [SOME_ID]],
        ["2026-01-01T00:00:00+00:00", {"id": SOME_ID}],
        ["0001-01-01T00:00:00+14:00", SOME_ID],
        ["9999-12-31T23:59:59-14:00", SOME_ID],
        [5, SOME_ID],
        ["2026-01-01T00:00:00+00:00", SOME_ID, "more"],
        {"at": "2026-01-01T00:00:00+00:00"},
        "2026-01-01T00:00:00+00:00",
        None,
    ],
)
async def test_cursor_of_the_wrong_shape_is_422(user: Client, route: str, value: Any) -> None:
    response = await user.get(route, params={"cursor": cursor(value)})
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["query", "cursor"]
    assert (await user.get(route)).status_code == 200


async def test_cursor_at_the_edge_of_time_still_pages(user: Client) -> None:
    response = await user.get(
        "/api/chats", params={"cursor": cursor(["0001-01-01T00:00:00-14:00", SOME_ID])}
    )
    assert response.status_code == 200


async def body_routes(user: Client) -> dict[str, tuple[str, str, dict[str, Any], list[Any]]]:
    """Each JSON route's method, path, a valid body and the location of its string to spoil."""
    chat = (await user.post("/api/chats", json={})).json()["id"]
    return {
        "register": (
            "POST",
            "/api/auth/register",
            {"email": "new@example.com", "password": "long enough"},
            ["email"],
        ),
        "register name": (
            "POST",
            "/api/auth/register",
            {"email": "new@example.com", "password": "long enough", "display_name": "N"},
            ["display_name"],
        ),
        "register password": (
            "POST",
            "/api/auth/register",
            {"email": "new@example.com", "password": "long enough"},
            ["password"],
        ),
        "login": (
            "POST",
            "/api/auth/login",
            {"email": user.user["email"], "password": "long enough"},
            ["email"],
        ),
        "login password": (
            "POST",
            "/api/auth/login",
            {"email": user.user["email"], "password": "long enough"},
            ["password"],
        ),
        "chat create": ("POST", "/api/chats", {"title": "A title"}, ["title"]),
        "chat rename": ("PATCH", f"/api/chats/{chat}", {"title": "A title"}, ["title"]),
        "message": ("POST", f"/api/chats/{chat}/messages", {"content": "Hello"}, ["content"]),
        "approval note": (
            "POST",
            f"/api/chats/{chat}/approvals",
            {"decisions": [{"tool_call_id": "call-1", "approved": False, "note": "no"}]},
            ["decisions", 0, "note"],
        ),
    }


ROUTES = [
    "register",
    "register name",
    "register password",
    "login",
    "login password",
    "chat create",
    "chat rename",
    "message",
    "approval note",
]


def spoil(body: dict[str, Any], location: list[Any], marker: str) -> dict[str, Any]:
    """`body` with `marker` put into the string at `location`."""
    body = json.loads(json.dumps(body))
    holder: Any = body
    for part in location[:-1]:
        holder = holder[part]
    holder[location[-1]] = f"a{marker}b"
    return body


@pytest.mark.parametrize("name", ROUTES)
@pytest.mark.parametrize("marker", ["\ud800", "\udfff", "\x00"])
async def test_unstorable_strings_in_any_body_are_422(user: Client, name: str, marker: str) -> None:
    method, path, valid, location = (await body_routes(user))[name]
    # `json.dumps` writes both as escapes (`\ud800`, `\u0000`): the raw bytes a client sends.
    raw = json.dumps(spoil(valid, location, marker)).encode()
    assert b"\\u" in raw
    response = await user.request(
        method, path, content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", *location]
    expected = "NUL" if marker == "\x00" else "lone surrogate"
    assert expected in problem["msg"]
    assert (await user.get("/api/auth/me")).status_code == 200  # the connection lives on


async def test_a_surrogate_sent_as_raw_bytes_is_422(anon: Client) -> None:
    for raw in (
        b'{"email": "\\ud800@x.io", "password": "long enough"}',
        b'{"email": "a@x.io", "password": "long enough\xed\xa0\x80"}',
        b'{"email": "a@x.io", "password": "long enough", "\\udc00": 1}',
    ):
        response = await anon.post(
            "/api/auth/register", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, raw
        assert "lone surrogate" in response.json()["detail"][0]["msg"]
    assert (await anon.get("/api/auth/me")).status_code == 401


async def test_nul_without_a_content_type_is_422(user: Client) -> None:
    response = await user.post("/api/chats", content=b'{"title": "a\\u0000b"}')
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "title"]


async def test_paired_surrogates_and_other_text_pass(user: Client) -> None:
    raw = '{"title": "\\ud83d\\ude00 caf\\u00e9 \u00e9t\u00e9 \\\\u0000"}'.encode()
    response = await user.post(
        "/api/chats", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201
    assert response.json()["title"] == "\U0001f600 caf\u00e9 \u00e9t\u00e9 \\u0000"
    chat = response.json()["id"]
    assert (await user.get(f"/api/chats/{chat}")).json()["title"] == response.json()["title"]


async def test_malformed_json_is_still_fastapis_422(user: Client) -> None:
    response = await user.post(
        "/api/chats", content=b'{"title": "\\u00', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


@pytest.mark.parametrize("token", ["t\u00f6ken".encode(), b"\xff\xfe", "\u00e9".encode("latin-1")])
async def test_non_ascii_csrf_header_is_403(user: Client, token: bytes) -> None:
    response = await user.http.post("/api/chats", json={}, headers={"X-CSRF-Token": token})
    assert response.status_code == 403
    assert "X-CSRF-Token" in response.json()["detail"]
    assert (await user.get("/api/auth/me")).status_code == 200
