"""The providers file (`config/providers.yaml`): its schema and its loading.

Parsing is strict (unknown keys, kinds and capabilities are errors) because a typo in this
file should stop start-up with a message naming the entry, not quietly drop a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.core.config_files import load_config_file

ProviderKind = Literal[
    "anthropic", "openai", "moonshot", "lmstudio", "ollama", "openrouter", "demo"
]
Capability = Literal["vision", "video", "document", "tool_search"]
DtlMode = Literal["none", "anthropic_tool_reference", "kimi_system_tools"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "lmstudio": "http://127.0.0.1:1234/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "moonshot": "https://api.moonshot.ai/v1",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pricing(_Strict):
    """USD per million tokens. A cache price left out is the input price (what a provider
    without prompt-cache prices charges for those tokens)."""

    input: float = Field(ge=0, le=10_000, allow_inf_nan=False)
    output: float = Field(ge=0, le=10_000, allow_inf_nan=False)
    cache_read: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False)
    cache_write: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False)


class ModelConfig(_Strict):
    id: str = Field(min_length=1, max_length=200)
    name: str | None = None
    capabilities: list[Capability] = Field(default_factory=list)
    context_window: int = Field(default=128_000, gt=0)
    max_output_tokens: int = Field(default=8192, gt=0)
    compact_threshold: float | None = Field(default=None, gt=0, le=1)
    """This model's own share of its context window that triggers a summary."""
    pricing: Pricing | None = None
    """What its tokens cost; without it, usage shows the model's cost as null."""


class EnrichRule(_Strict):
    match: str = Field(min_length=1)
    add_capabilities: list[Capability] = Field(default_factory=list)


class ProviderConfig(_Strict):
    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: ProviderKind
    base_url: str | None = None
    api_key_env: str | None = None
    dtl: DtlMode | None = None
    models: list[ModelConfig] = Field(min_length=1)
    enrich: list[EnrichRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _dtl_fits_kind(self) -> ProviderConfig:
        """A DTL format is a wire shape: only the APIs that have it can be sent it."""
        if self.dtl == "anthropic_tool_reference" and self.kind != "anthropic":
            raise ValueError("dtl anthropic_tool_reference needs kind anthropic")
        if self.dtl == "kimi_system_tools" and self.kind in ("anthropic", "demo"):
            raise ValueError("dtl kimi_system_tools needs an OpenAI-compatible kind")
        return self

    @field_validator("models")
    @classmethod
    def _unique_model_ids(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        seen: set[str] = set()
        for model in models:
            if model.id in seen:
                raise ValueError(f"model id {model.id!r} appears twice")
            seen.add(model.id)
        return models


class ProvidersFile(_Strict):
    providers: list[ProviderConfig] = Field(min_length=1)

    @field_validator("providers")
    @classmethod
    def _unique_provider_ids(cls, providers: list[ProviderConfig]) -> list[ProviderConfig]:
        seen: set[str] = set()
        for provider in providers:
            if provider.id in seen:
                raise ValueError(f"provider id {provider.id!r} appears twice")
            seen.add(provider.id)
        return providers


def load_providers(path: Path) -> ProvidersFile:
    return load_config_file(path, ProvidersFile, "providers", "provider", "id")
