"""What a tool call knows about its turn: who asked, in which chat, where their files are.

`active_groups` is the turn's live set of activated groups: loaded from the chat's activation
rows when the turn starts and grown by `activate_tools`, so tools activated in one round are
declared from the next request of the same turn on. `evidence` is the question's live evidence
state, loaded the same way and grown by the knowledge tools.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability

from app.knowledge.evidence import QuestionEvidence
from app.tools.asks import ServerAsks
from app.tools.catalogue import Catalogue


@dataclass(slots=True)
class TurnDeps:
    """The `deps` of every agent run: passed to each tool through `RunContext.deps`."""

    user_id: uuid.UUID
    chat_id: uuid.UUID
    file_root: Path
    storage_quota: int | None = None
    """All of the user's files together may take this many bytes (None: no limit)."""
    catalogue: Catalogue = field(default_factory=Catalogue)
    active_groups: set[str] = field(default_factory=set)
    evidence: QuestionEvidence | None = None
    """The question in progress: what it retrieved, and its search budget."""
    call_rows: dict[str, int] = field(default_factory=dict)
    """tool_call_id -> its `chat_llm_tools` row, filled by the recorder as each call starts:
    media a tool returns are named by the row."""
    largest_medium: int = 268_435_456
    """A medium a tool returns is kept up to this size (that of an upload)."""
    asks: Callable[[RunContext[Any], str], ServerAsks] | None = None
    """(the call's context, its tool_call_id) -> what answers its server's own requests: the
    turn's forms and completions; None where no turn can answer (they are then refused)."""
    capability: AbstractCapability[Any] | None = None
    """The turn's own capability (`app.agent.capabilities.turn_hooks.TurnHooks`), which the turn
    agent's `TurnSlot` makes the run's."""
