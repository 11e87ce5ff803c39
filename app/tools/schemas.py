"""The tool catalogue and a chat's activations as the API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel


class ToolOut(BaseModel):
    name: str
    description: str


class GroupOut(BaseModel):
    group: str
    kind: Literal["builtin", "mcp"]
    description: str
    status: Literal["starting", "available", "unavailable", "needs_connection"]
    """`needs_connection`: the group works with each user's own account, which this user has
    not connected (`GET /api/mcp/{group}/connect`)."""
    error: str | None = None
    """Why the group is `unavailable`; null otherwise."""
    connectable: bool = False
    """Whether users connect the group with their own account (`auth: oauth`)."""
    tools: list[ToolOut]


class ActivationOut(BaseModel):
    kind: Literal["builtin", "mcp"]
    ref: str
    message_id: int
    created_at: datetime
