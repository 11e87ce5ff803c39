"""The log of a real `hearth serve` through a whole scenario: one JSON object a line, each with
its request, user, chat and turn where known, and none of what must never be written.

The scenario signs up and in, makes and uses an API key, uploads a file, runs a turn with a tool
call and one its provider fails, as a person and a script would. Then every line of the
process's stderr is parsed, and the log is searched for the password, the message, the tool's
arguments, the answer, the key, the session and CSRF cookies, the file's text and the provider
key, each of which the scenario made distinctive.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.services import Services
from tests.fakes.providers import Fail, FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS, providers_yaml
from tests.support import Client, http_client, wait_until_idle
from tests.workers import beside, hearth_worker

pytestmark = pytest.mark.usefixtures("services", "registry")

FIELDS = {"time", "level", "logger", "message"}


def lines_of(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        entry = orjson.loads(line)  # every line is one JSON object, uvicorn's own included
        assert isinstance(entry, dict) and set(entry) >= FIELDS, line
        parsed.append(entry)
    return parsed


async def test_a_whole_scenario_logs_json_with_its_ids_and_nothing_secret(
    backend: str, services: Services, fakes: dict[str, FakeProviderServer], tmp_path: Path
) -> None:
    if backend != "postgresql":
        pytest.skip("a second process beside the test's own server writes to PostgreSQL")
    provider_key = "sk-provider-" + secrets.token_hex(12)
    env = beside(services.settings, providers_yaml(fakes), tmp_path, log_format="json")
    env["HEARTH_TEST_PROVIDER_KEY"] = provider_key
    password = "pw-" + secrets.token_hex(10)
    secret = "my secret plan is " + secrets.token_hex(6)
    path = "folder-" + secrets.token_hex(6)
    answer = "The answer is " + secrets.token_hex(6)
    file_text = "file body " + secrets.token_hex(6)
    email = f"log-{secrets.token_hex(4)}@example.com"

    async with hearth_worker(env) as worker, http_client(base_url=worker.base_url) as http:
        person = Client(http)
        registered = await person.post(
            "/api/auth/register", json={"email": email, "password": password}
        )
        assert registered.status_code == 201, registered.text
        user_id = registered.json()["id"]
        wrong = await person.post("/api/auth/login", json={"email": email, "password": secret})
        assert wrong.status_code == 401
        signed_in = await person.post(
            "/api/auth/login",
            json={"email": email, "password": password},
            headers={"X-Request-ID": "given-id-42"},
        )
        assert signed_in.headers["x-request-id"] == "given-id-42"
        made = await person.post("/api/auth/login", json={"email": email, "password": "x" * 9})
        assert made.headers["x-request-id"]  # made when none was sent
        key = (await person.post("/api/keys", json={"name": "logs"})).json()["key"]
        async with http_client(
            base_url=worker.base_url, headers={"Authorization": f"Bearer {key}"}
        ) as script:
            assert (await script.get("/api/chats")).status_code == 200
            assert (await script.get("/api/chats", headers={"Authorization": key})).is_error

        uploaded = await http.post(
            "/api/uploads",
            files={"file": ("plan.txt", file_text.encode(), "text/plain")},
            headers={"X-CSRF-Token": person.csrf or ""},
        )
        assert uploaded.status_code == 201, uploaded.text

        fakes["openai"].script(
            Reply(tool_calls=[ToolCall("list_files", {"path": path})]), Reply(text=answer)
        )
        chat_id = (await person.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()[
            "id"
        ]
        sent = await person.post(f"/api/chats/{chat_id}/messages", json={"content": secret})
        assert sent.status_code == 200, sent.text
        assert answer in orjson.dumps(await wait_until_idle(person, chat_id)).decode()
        fakes["openai"].script(Fail(500, message="upstream exploded"))
        failed = await person.post(f"/api/chats/{chat_id}/messages", json={"content": secret})
        assert failed.status_code == 200
        await wait_until_idle(person, chat_id)
        cookies = [http.cookies[SESSION_COOKIE], http.cookies[CSRF_COOKIE]]
        assert worker.log is not None
        text = worker.log.read_text()

    entries = lines_of(text)
    for forbidden in [password, secret, path, answer, key, file_text, provider_key, *cookies]:
        assert forbidden not in text, forbidden
    assert key[:12] not in text  # not even the key's visible prefix

    http_lines = [e for e in entries if e["logger"] == "hearth.http"]
    given = [e for e in http_lines if e.get("request_id") == "given-id-42"]
    assert len(given) == 1 and given[0]["message"].startswith("POST /api/auth/login 200")
    sends = [
        e for e in http_lines if e["message"].startswith(f"POST /api/chats/{chat_id}/messages")
    ]
    assert len(sends) == 2
    for entry in sends:
        assert entry["user_id"] == user_id and entry["chat_id"] == chat_id
        assert entry["request_id"] and entry["level"] == "info"
    assert all(e["request_id"] for e in http_lines)
    assert len({e["request_id"] for e in http_lines}) == len(http_lines)  # one id per request
    by_key = [e for e in http_lines if e["message"].startswith("GET /api/chats 200")]
    assert len(by_key) == 1 and by_key[0]["user_id"] == user_id

    (ended,) = [e for e in entries if "ended by an error" in e["message"]]
    assert ended["logger"] == "hearth.turns" and ended["level"] == "warning"
    assert ended["chat_id"] == chat_id and ended["user_id"] == user_id
    assert ended["turn"] and ended["request_id"] == sends[1]["request_id"]
    assert any(e["logger"].startswith("uvicorn") for e in entries)  # its lines are JSON too
