"""pydantic-ai models for the registry's entries, one factory per provider kind.

What a model may be sent is decided by hearth's configured capabilities, not the library's
defaults: the profile built here switches image, PDF and video input on exactly when the model
has `vision`, `document` or `video`, so a default profile that claims PDF support (Moonshot's,
Ollama's) never leaks through. Transient provider faults (timeouts, 429, 5xx) are retried by the
provider SDKs themselves, with bounded exponential backoff that honours `Retry-After`.

Each model gets its SDK client built here, with its retries set on the client: a retry count
in the model settings instead would make pydantic-ai copy the client for every request.
OpenAI-compatible kinds use `HearthAsyncOpenAI` (see its module for what it saves).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic_ai.models import Model, create_async_httpx2_client
from pydantic_ai.settings import ModelSettings

from app.llm.demo import demo_model
from app.llm.dtl import HearthProfile
from app.llm.registry import ModelInfo, ModelRegistry
from app.llm.wire.openai_client import HearthAsyncOpenAI

MAX_RETRIES = 3
REQUEST_TIMEOUT_SECONDS = 300.0
AgentT = TypeVar("AgentT")
_Key = tuple[str, str | None, str | None]

OPENAI_COMPATIBLE = frozenset({"openai", "openrouter", "lmstudio", "ollama"})


class ModelUnavailable(Exception):
    """The model's provider is not usable now (missing key, unknown kind)."""


def capability_profile(model: ModelInfo) -> HearthProfile:
    """File input from hearth's capabilities alone, the tail in its own place, the DTL mode."""
    capabilities = set(model.capabilities)
    return HearthProfile(
        dtl_mode=model.dtl_mode,
        supports_image_input="vision" in capabilities,
        supports_document_input="document" in capabilities,
        supports_video_input="video" in capabilities,
        supports_audio_file_input=False,
        # hearth places its only mid-conversation system text (the dynamic tail) itself, in the
        # provider's own place for it (docs/wire.md §2c), rather than as `<system>` user text.
        supports_inline_system_prompts=True,
    )


def model_settings(model: ModelInfo) -> ModelSettings:
    return ModelSettings(
        max_tokens=model.config.max_output_tokens,
        timeout=REQUEST_TIMEOUT_SECONDS,
    )


class ModelCache:
    """One pydantic-ai model per configured model, and its agent, built on first use and kept.

    A model owns its provider client and that client's connection pool, so keeping it means
    every turn reuses warm connections (and TLS sessions) instead of building a client, with
    its certificate store, per turn. Its agent (tool schemas and all) is kept beside it, under
    the same key: the key holds everything the model is built from.
    """

    def __init__(self) -> None:
        self._models: dict[_Key, Model] = {}
        self._agents: dict[_Key, Any] = {}

    @staticmethod
    def _key(model: ModelInfo, registry: ModelRegistry) -> _Key:
        return (model.id, model.base_url, registry.api_key(model.provider))

    def get(self, model: ModelInfo, registry: ModelRegistry) -> Model:
        key = self._key(model, registry)
        built = self._models.get(key)
        if built is None:
            built = self._models[key] = build_model(model, registry)
        return built

    def agent(
        self, model: ModelInfo, registry: ModelRegistry, make: Callable[[Model], AgentT]
    ) -> AgentT:
        """The agent `make` builds for the model, built once (one kind of agent per model)."""
        key = self._key(model, registry)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = make(self.get(model, registry))
        return cast(AgentT, agent)


def build_model(model: ModelInfo, registry: ModelRegistry) -> Model:
    """A pydantic-ai model that serves `model`, configured from the providers file."""
    kind = model.provider.kind
    name = model.config.id
    profile = capability_profile(model)
    api_key = registry.api_key(model.provider)
    if kind == "demo":
        return demo_model(model.id, profile)
    if kind == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.providers.anthropic import AnthropicProvider

        from app.llm.wire.anthropic import HearthAnthropicModel

        client = AsyncAnthropic(
            api_key=api_key or "missing",
            base_url=model.provider.base_url,
            max_retries=MAX_RETRIES,
            http_client=create_async_httpx2_client(),
        )
        return HearthAnthropicModel(
            name,
            provider=AnthropicProvider(anthropic_client=client),
            profile=profile,
        )
    if kind == "moonshot":
        from pydantic_ai.providers.moonshotai import MoonshotAIProvider

        from app.llm.wire.openai import HearthOpenAIChatModel

        moonshot = MoonshotAIProvider(openai_client=_openai_client(model, api_key or "missing"))
        return HearthOpenAIChatModel(name, provider=moonshot, profile=profile)
    if kind in OPENAI_COMPATIBLE:
        from pydantic_ai.providers.openai import OpenAIProvider

        from app.llm.wire.openai import HearthOpenAIChatModel

        provider = OpenAIProvider(openai_client=_openai_client(model, api_key or "not-needed"))
        return HearthOpenAIChatModel(name, provider=provider, profile=profile)
    raise ModelUnavailable(f"provider kind {kind!r} has no model factory")


def _openai_client(model: ModelInfo, api_key: str) -> HearthAsyncOpenAI:
    return HearthAsyncOpenAI(
        api_key=api_key,
        base_url=model.base_url,
        max_retries=MAX_RETRIES,
        http_client=create_async_httpx2_client(),
    )
