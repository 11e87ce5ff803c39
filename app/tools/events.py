"""hearth's own facts in the event stream: one capability event type, one data part each.

Capabilities emit `HearthPart`s with `ctx.emit(...)`; the stream encoder turns each into a
`data-<part>` chunk of the Vercel UI message stream. Tools may not emit capability events, so
what a tool reports while it runs (an MCP call's progress) is a `CustomEvent` of its own, which
the encoder turns into `data-<name>` the same way. They are not transient, so a frontend's
folded message keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import CapabilityEvent, CustomEvent


@dataclass(kw_only=True)
class HearthPart(CapabilityEvent, namespace="hearth"):
    part: str
    """The data part's name without `data-`: `assistant-message`, `activation`, ..."""
    payload: Any


@dataclass(kw_only=True)
class ToolProgress(CustomEvent, name="tool-progress"):
    """`data-tool-progress`: a server's progress report on a call that is still running. The
    call's id is the envelope's, stamped by `ctx.emit` inside the call."""

    progress: float
    total: float | None
    message: str | None

    def to_payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, **super().to_payload()}


@dataclass(kw_only=True)
class ElicitationAsked(CustomEvent, name="elicitation"):
    """`data-elicitation`: a call's server asks the user to fill in a form. The turn's stream
    ends after it; `POST /api/chats/{chat_id}/elicitations` answers and streams the rest."""

    elicitation_id: str
    message: str
    requested_schema: dict[str, Any]

    def to_payload(self) -> dict[str, Any]:
        return {
            "elicitation_id": self.elicitation_id,
            "tool_call_id": self.tool_call_id,
            "message": self.message,
            "requested_schema": self.requested_schema,
        }


@dataclass(kw_only=True)
class AuthorizationAsked(CustomEvent, name="authorization"):
    """`data-authorization`: a call's server wants the user to sign in again (a wider scope) at
    `url`; the turn's stream ends after it, and the call goes on once they are back."""

    group: str
    url: str

    def to_payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "group": self.group, "url": self.url}
