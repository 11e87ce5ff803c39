"""Availability of local model servers (LM Studio, Ollama): they count once they answer.

A background task asks each local provider's `/models` every 30 seconds with a short timeout,
so `GET /api/models` and chat creation read a recent answer without waiting on the network.
"""

from __future__ import annotations

import asyncio

import httpx

from app.llm.registry import LOCAL_KINDS, ModelRegistry

INTERVAL_SECONDS = 30.0
TIMEOUT_SECONDS = 1.5


async def _probe_once(registry: ModelRegistry, client: httpx.AsyncClient) -> None:
    for provider in registry.providers:
        if provider.kind not in LOCAL_KINDS:
            continue
        model = next(m for m in registry.models() if m.provider.id == provider.id)
        try:
            response = await client.get(f"{(model.base_url or '').rstrip('/')}/models")
            registry.set_reachable(provider.id, response.status_code < 500)
        except (httpx.HTTPError, OSError):
            registry.set_reachable(provider.id, False)


async def _probe_forever(registry: ModelRegistry) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
        while True:
            await _probe_once(registry, client)
            await asyncio.sleep(INTERVAL_SECONDS)


def probe_local_providers(registry: ModelRegistry) -> asyncio.Task[None]:
    task = asyncio.create_task(_probe_forever(registry), name="hearth-probe-local-providers")
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task
