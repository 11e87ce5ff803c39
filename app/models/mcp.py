"""Each user's own credentials for MCP servers that sign people in (`auth: oauth`).

One row per user and server, holding what the OAuth client keeps between sessions: the tokens
and the client registration (dynamic registration is made per user, so one user's revoked
client never breaks another's), both encrypted with a key derived from the secret key
(`app.tools.mcp.secrets`), and the authorization server's endpoints, so a refresh or a
revocation after a restart goes where the tokens came from.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, LargeBinary, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import BigId, JSONDoc, UTCDateTime


class McpConnection(Base):
    __tablename__ = "mcp_connections"
    __table_args__ = (UniqueConstraint("user_id", "server"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("users.id", ondelete="CASCADE"))
    server: Mapped[str] = mapped_column(String(64))
    """The `mcp.yaml` server name (the group)."""
    tokens: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    """The token response, encrypted; None until the user has finished connecting."""
    client: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    """The registered client's information, encrypted."""
    metadata_: Mapped[Any] = mapped_column("metadata", JSONDoc, default=None, nullable=True)
    """What discovery found: the authorization server's and the resource's metadata (public)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
