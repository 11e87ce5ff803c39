"""The events of running turns that readers in other worker processes follow (PostgreSQL).

A turn's events are written here only once a reader in another process asks for them
(`app.agent.relay`), and only while the turn runs: after it ends the stored chat is the truth,
and its rows go a minute later (the grace a reader needs to read the last of them), as do those
of a process that died mid-turn, once its lease has lapsed. `owner` is the turn's lease owner
(`chats.turn_owner`), unique per turn, so a chat's next turn never meets the rows of its last.
`data` is the event's `data:` part as the turn's own client received it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import UTCDateTime


class LiveEvent(Base):
    __tablename__ = "live_events"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
