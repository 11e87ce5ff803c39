"""What a tool's server may ask of the turn while one of its calls runs.

An MCP server may, in the middle of a call, ask the user to fill in a form (`elicitation/create`),
ask for a completion by the model (`sampling/createMessage`), or want the user to sign in again
with a wider scope (an OAuth step-up). Both are answered by the turn
the call belongs to — it knows the user, the chat's model and the stream — so the MCP layer
gets an object of this protocol with each call and hands it what the server asked; it knows
nothing of turns. The types are plain data so that layer and the turn engine meet here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic_ai.messages import ModelMessage

ElicitAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class Elicited:
    """The user's answer to a form a server asked for: `content` only with `accept`."""

    action: ElicitAction
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A completion a server asked for, in pydantic-ai's message types."""

    messages: list[ModelMessage]
    system_prompt: str | None
    max_tokens: int
    """As the server asked; the turn caps it at the model's own maximum output."""
    temperature: float | None = None
    stop_sequences: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Sampled:
    text: str
    model: str
    """The model's id in hearth (`<provider>/<model>`)."""
    stop_reason: Literal["endTurn", "maxTokens", "stopSequence"]


class ServerAsks(Protocol):
    """The turn's side of one call: answers what the call's server asks."""

    async def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any],
        *,
        timeout: float,  # noqa: ASYNC109 (how long the user has, which is the call's timeout)
    ) -> Elicited:
        """Put the form to the user and wait for the answer, `cancel` after `timeout`."""
        ...

    async def sample(self, request: SamplingRequest) -> Sampled:
        """Run the completion with the chat's model, without tools; it counts as usage."""
        ...

    async def authorize(self, server: str, url: str) -> None:
        """Tell the user that `server` asks them to sign in again (at `url`) for the call to go
        on; the call then waits for them to come back (`app.tools.mcp.oauth`)."""
        ...
