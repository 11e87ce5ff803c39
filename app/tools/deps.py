"""What a tool call knows about its turn: who asked, in which chat, where their files are."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TurnDeps:
    """The `deps` of every agent run: passed to each tool through `RunContext.deps`."""

    user_id: uuid.UUID
    chat_id: uuid.UUID
    file_root: Path
