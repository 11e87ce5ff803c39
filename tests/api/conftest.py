"""Fixtures for turns against the fake providers: the servers, and a registry that uses them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.llm.registry import ModelRegistry
from app.services import Services
from tests.catalogue_setup import catalogue as catalogue  # the fixture, for every API test
from tests.fakes.providers import FakeAnthropic, FakeOpenAI, FakeProviderServer
from tests.provider_setup import providers_yaml


@pytest.fixture
async def fakes() -> AsyncIterator[dict[str, FakeProviderServer]]:
    servers: dict[str, FakeProviderServer] = {
        "anthropic": FakeAnthropic(),
        "openai": FakeOpenAI(flavour="openai"),
        "moonshot": FakeOpenAI(flavour="moonshot"),
    }
    # Started and stopped together: a uvicorn shutdown waits a fixed 0.1 s or more, and three
    # in a row after every test added up to a good part of the suite's time.
    await asyncio.gather(*(server.start() for server in servers.values()))
    try:
        yield servers
    finally:
        await asyncio.gather(*(server.stop() for server in servers.values()))


@pytest.fixture
def registry(
    fakes: dict[str, FakeProviderServer], services: Services, tmp_path: Path
) -> Iterator[ModelRegistry]:
    path = tmp_path / "providers.yaml"
    path.write_text(providers_yaml(fakes))
    registry = ModelRegistry(
        ModelRegistry.from_file(path).providers, env={"HEARTH_TEST_PROVIDER_KEY": "test-key"}
    )
    original, services.registry = services.registry, registry
    yield registry
    services.registry = original
