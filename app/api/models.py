"""The models a chat can use."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Auth, ServicesDep
from app.core.http.schemas import error_responses
from app.llm.schemas import ModelOut

router = APIRouter(prefix="/api", tags=["models"])


@router.get("/models", response_model=list[ModelOut], responses=error_responses(401))
async def list_models(_auth: Auth, services: ServicesDep) -> list[ModelOut]:
    """Every configured model, available or not."""
    registry = services.registry
    return [
        ModelOut(
            id=model.id,
            provider=model.provider.id,
            kind=model.provider.kind,
            name=model.name,
            capabilities=list(model.capabilities),
            dtl_mode=model.dtl_mode,
            context_window=model.config.context_window,
            available=registry.is_available(model),
        )
        for model in registry.models()
    ]
