"""The model list."""

from __future__ import annotations

from pydantic import BaseModel

from app.llm.config import Capability, DtlMode, ProviderKind


class ModelOut(BaseModel):
    id: str
    provider: str
    kind: ProviderKind
    name: str
    capabilities: list[Capability]
    dtl_mode: DtlMode
    context_window: int
    available: bool
