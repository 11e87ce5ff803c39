"""Two hearth processes over one database: one turn per chat, and /stop from the other worker.

The second worker is a real `hearth serve` process sharing the database and the secret key, as
workers behind a load balancer do. The turn lease and the stop flag live in the database, so
neither an in-process lock nor in-process state can make these pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.llm.registry import ModelRegistry
from app.services import Services
from tests.fakes.providers import FakeProviderServer, Hang, Reply
from tests.provider_setup import MODEL_IDS, providers_yaml
from tests.support import Client, http_client, wait_until_idle
from tests.workers import beside, hearth_worker

pytestmark = pytest.mark.usefixtures("services")


@pytest.fixture
async def second_worker(
    services: Services, fakes: dict[str, FakeProviderServer], tmp_path: Path
) -> AsyncIterator[str]:
    env = beside(services.settings, providers_yaml(fakes), tmp_path)
    async with hearth_worker(env) as worker:
        yield worker.base_url


def same_session(user: Client, base_url: str) -> httpx.AsyncClient:
    """The user's browser session, pointed at the other worker."""
    return http_client(base_url=base_url, cookies=user.http.cookies, timeout=30)


async def test_stop_reaching_another_worker_cancels_upstream(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    second_worker: str,
) -> None:
    fake = fakes["anthropic"]
    fake.script(Hang(after_events=5))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()["id"]
    async with (
        user.http.stream(
            "POST",
            f"/api/chats/{chat_id}/messages",
            json={"content": "take your time"},
            headers={"X-CSRF-Token": user.csrf or ""},
        ) as response,
        same_session(user, second_worker) as other,
    ):
        await fake.wait_for_request(0)
        stopped = await other.post(
            f"/api/chats/{chat_id}/stop", headers={"X-CSRF-Token": user.csrf or ""}
        )
        assert stopped.status_code == 202
        body = (await response.aread()).decode()
    assert (await fake.wait_cancelled(0, within=3.0)).cancelled
    assert '"type":"abort"' in body
    chat = await wait_until_idle(user, chat_id)
    assert chat["messages"][-1]["status"] == "cancelled"


async def test_one_turn_per_chat_across_workers(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    second_worker: str,
) -> None:
    fake = fakes["anthropic"]
    fake.script(Reply(text="slow answer", first_token_delay=1.0), Reply(text="slow answer"))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()["id"]
    headers = {"X-CSRF-Token": user.csrf or ""}
    async with same_session(user, second_worker) as other:
        here, there = await asyncio.gather(
            user.post(f"/api/chats/{chat_id}/messages", json={"content": "one"}),
            other.post(f"/api/chats/{chat_id}/messages", json={"content": "two"}, headers=headers),
        )
    assert sorted([here.status_code, there.status_code]) == [200, 409]
    chat = await wait_until_idle(user, chat_id)
    assert len([m for m in chat["messages"] if m["role"] == "user"]) == 1
    assert len(fake.model_requests) == 1
