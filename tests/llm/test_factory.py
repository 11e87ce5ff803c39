"""Model factories: the pydantic-ai model per kind, its profile from hearth's capabilities."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.moonshotai import MoonshotAIProvider

from app.llm.factory import MAX_RETRIES, build_model, model_settings
from app.llm.registry import ModelRegistry
from app.llm.wire.openai_client import HearthAsyncOpenAI

PROVIDERS = """
providers:
  - {id: demo, kind: demo, models: [{id: scripted}]}
  - id: anthropic
    kind: anthropic
    api_key_env: K_ANTHROPIC
    base_url: http://127.0.0.1:9/anthropic
    models: [{id: claude, capabilities: [vision, document, tool_search]}]
  - {id: openai, kind: openai, api_key_env: K_OPENAI, models: [{id: gpt, capabilities: [vision]}]}
  - id: moonshot
    kind: moonshot
    api_key_env: K_MOONSHOT
    base_url: http://127.0.0.1:9/moonshot/v1
    models: [{id: kimi-k2}, {id: k3, capabilities: [vision]}]
  - {id: lm, kind: lmstudio, models: [{id: qwen, capabilities: [document]}]}
  - {id: ol, kind: ollama, models: [{id: llama}]}
  - id: router
    kind: openrouter
    api_key_env: K_ROUTER
    models: [{id: meta/llama, capabilities: [vision, document]}]
"""


@pytest.fixture
def registry(tmp_path: Path) -> ModelRegistry:
    path = tmp_path / "providers.yaml"
    path.write_text(PROVIDERS)
    env = {"K_ANTHROPIC": "a", "K_OPENAI": "o", "K_MOONSHOT": "m", "K_ROUTER": "r"}
    return ModelRegistry(ModelRegistry.from_file(path).providers, env=env)


@pytest.mark.parametrize(
    ("model_id", "model_class", "image", "document"),
    [
        ("demo/scripted", FunctionModel, False, False),
        ("anthropic/claude", AnthropicModel, True, True),
        ("openai/gpt", OpenAIChatModel, True, False),
        ("moonshot/kimi-k2", OpenAIChatModel, False, False),
        ("moonshot/k3", OpenAIChatModel, True, False),
        ("lm/qwen", OpenAIChatModel, False, True),
        ("ol/llama", OpenAIChatModel, False, False),
        ("router/meta/llama", OpenAIChatModel, True, True),
    ],
)
def test_profile_follows_capabilities_not_library_defaults(
    registry: ModelRegistry, model_id: str, model_class: type, image: bool, document: bool
) -> None:
    info = registry.get(model_id)
    assert info is not None
    model = build_model(info, registry)
    assert isinstance(model, model_class)
    assert model.profile.get("supports_image_input") is image
    assert model.profile.get("supports_document_input") is document
    assert model.profile.get("supports_video_input") is False


def test_moonshot_library_default_claims_pdf_but_hearth_does_not(registry: ModelRegistry) -> None:
    library_default = MoonshotAIProvider(api_key="x").model_profile("kimi-k2")
    assert library_default is not None
    info = registry.get("moonshot/kimi-k2")
    assert info is not None
    assert build_model(info, registry).profile.get("supports_document_input") is False


def test_base_urls_and_keys_reach_the_clients(registry: ModelRegistry) -> None:
    def client_of(model_id: str) -> object:
        info = registry.get(model_id)
        assert info is not None
        return build_model(info, registry).client  # type: ignore[attr-defined]

    anthropic = client_of("anthropic/claude")
    assert str(anthropic.base_url).startswith("http://127.0.0.1:9/anthropic")  # type: ignore[attr-defined]
    assert anthropic.api_key == "a"  # type: ignore[attr-defined]
    assert str(client_of("moonshot/k3").base_url).startswith("http://127.0.0.1:9/moonshot/v1")  # type: ignore[attr-defined]
    assert str(client_of("lm/qwen").base_url).startswith("http://127.0.0.1:1234/v1")  # type: ignore[attr-defined]
    assert str(client_of("ol/llama").base_url).startswith("http://127.0.0.1:11434/v1")  # type: ignore[attr-defined]


def test_clients_retry_on_their_own_and_openai_kinds_use_hearths_client(
    registry: ModelRegistry,
) -> None:
    """Retries set on the client, not per request: no request copies its client."""
    kinds = ("anthropic/claude", "openai/gpt", "moonshot/k3", "lm/qwen", "router/meta/llama")
    for model_id in kinds:
        info = registry.get(model_id)
        assert info is not None
        assert "max_retries" not in model_settings(info)
        client = build_model(info, registry).client  # type: ignore[attr-defined]
        assert client.max_retries == MAX_RETRIES
        if model_id != "anthropic/claude":
            assert isinstance(client, HearthAsyncOpenAI)
            assert client.user_agent.startswith("AsyncOpenAI/Python ")
