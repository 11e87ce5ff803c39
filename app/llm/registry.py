"""The model registry: every configured model, its capabilities, DTL mode and availability.

A model is known by `<provider id>/<model id>` (split at the first `/`, since model ids may hold
more). A provider whose key is missing stays listed, marked unavailable, so an operator sees
what is configured and a user gets a clear 422 instead of a silently shorter list.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from app.llm.config import (
    DEFAULT_BASE_URLS,
    Capability,
    DtlMode,
    ModelConfig,
    ProviderConfig,
    load_providers,
)

CAPABILITY_ORDER: tuple[Capability, ...] = ("vision", "video", "document", "tool_search")
LOCAL_KINDS = frozenset({"lmstudio", "ollama"})


_DTL_BY_KIND: dict[str, DtlMode] = {
    "anthropic": "anthropic_tool_reference",
    "moonshot": "kimi_system_tools",
}


def dtl_format(provider: ProviderConfig) -> DtlMode:
    if provider.dtl is not None:
        return provider.dtl
    return _DTL_BY_KIND.get(provider.kind, "none")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    id: str
    provider: ProviderConfig
    config: ModelConfig
    capabilities: tuple[Capability, ...]

    @property
    def name(self) -> str:
        return self.config.name or self.config.id

    @property
    def dtl_mode(self) -> DtlMode:
        """docs/wire.md §2: the provider's format when the model can search tools, else `none`."""
        return dtl_format(self.provider) if "tool_search" in self.capabilities else "none"

    @property
    def base_url(self) -> str | None:
        return self.provider.base_url or DEFAULT_BASE_URLS.get(self.provider.kind)


def _capabilities(provider: ProviderConfig, model: ModelConfig) -> tuple[Capability, ...]:
    found = set(model.capabilities)
    for rule in provider.enrich:
        if fnmatchcase(model.id, rule.match):
            found.update(rule.add_capabilities)
    return tuple(cap for cap in CAPABILITY_ORDER if cap in found)


class ModelRegistry:
    """All configured models, in file order."""

    def __init__(self, providers: list[ProviderConfig], env: Mapping[str, str] | None = None):
        self._env = os.environ if env is None else env
        self._providers = {provider.id: provider for provider in providers}
        self._models: dict[str, ModelInfo] = {}
        self._reachable: dict[str, bool] = {}
        for provider in providers:
            for model in provider.models:
                model_id = f"{provider.id}/{model.id}"
                self._models[model_id] = ModelInfo(
                    model_id, provider, model, _capabilities(provider, model)
                )

    @classmethod
    def from_file(cls, path: Path) -> ModelRegistry:
        return cls(load_providers(path).providers)

    @property
    def providers(self) -> list[ProviderConfig]:
        return list(self._providers.values())

    def models(self) -> list[ModelInfo]:
        return list(self._models.values())

    def get(self, model_id: str) -> ModelInfo | None:
        return self._models.get(model_id)

    def api_key(self, provider: ProviderConfig) -> str | None:
        if provider.api_key_env is None:
            return None
        return self._env.get(provider.api_key_env) or None

    def set_reachable(self, provider_id: str, reachable: bool) -> None:
        """Record whether a local server (LM Studio, Ollama) answered its last probe."""
        self._reachable[provider_id] = reachable

    def is_available(self, model: ModelInfo) -> bool:
        provider = model.provider
        if provider.kind == "demo":
            return True
        if provider.api_key_env is not None and self.api_key(provider) is None:
            return False
        if provider.kind in LOCAL_KINDS:
            return self._reachable.get(provider.id, False)
        return provider.api_key_env is not None or provider.base_url is not None

    def available(self) -> dict[str, ModelInfo]:
        """The models a chat can use now, by id."""
        return {model.id: model for model in self._models.values() if self.is_available(model)}

    def default_model(self) -> ModelInfo | None:
        return next((m for m in self._models.values() if self.is_available(m)), None)
