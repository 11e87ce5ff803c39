"""The database's own identity: one row, made by the migration that created the table.

A data dir holds files that only make sense beside the rows that name them, so it records the id
of the database it belongs to (`app.files.data_dir`). A backup restored into the same database
keeps the id; another database, or a data dir pointed at the wrong one, does not match and
start-up stops before anything reads or writes files.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Integer, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import UTCDateTime


class Installation(Base):
    __tablename__ = "installation"

    key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """Always 1: the table holds exactly one row."""
    id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
