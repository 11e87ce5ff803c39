"""hearth's own facts in the event stream: one capability event type, one data part each.

Capabilities emit `HearthPart`s with `ctx.emit(...)`; the stream encoder turns each into a
`data-<part>` chunk of the Vercel UI message stream. They are not transient, so a frontend's
folded message keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import CapabilityEvent


@dataclass(kw_only=True)
class HearthPart(CapabilityEvent, namespace="hearth"):
    part: str
    """The data part's name without `data-`: `assistant-message`, `activation`, ..."""
    payload: Any
