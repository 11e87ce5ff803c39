"""Fixtures for turns against the fake providers: the servers, and a registry that uses them."""

from __future__ import annotations

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
    for server in servers.values():
        await server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            await server.stop()


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
