"""What a streaming round's row holds before the round ends: what its client was sent.

A round's text reaches its row twice a second while it streams (the supervisor writes every
local turn's new text in one statement), so a killed process loses at most the last half second.
The text written is the text the client's response has handed to the server (`Delivered` marks
in the turn's outbox), not what the model produced: the run works one event ahead of its
consumer, and the outbox may hold events a slow client has not taken yet. So whatever moment a
process dies, a round's stored content is a prefix of what its client received. A client that
has gone away receives nothing more, and then everything the turn streamed is written.

The pieces are the stream's own chunks (`text-delta`, `reasoning-delta`), so the stored prefix is
byte for byte the client's; the round's id comes from the `data-assistant-message` part that opens
it. The round's final content is the recorder's, written when the round ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from pydantic_ai.ui.vercel_ai.response_types import (
    BaseChunk,
    DataChunk,
    ReasoningDeltaChunk,
    TextDeltaChunk,
)

from app.agent.stored_text import storable_text

ROUND_PART = "data-assistant-message"


@dataclass(eq=False)
class SentRound:
    message_id: int
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


class Mark(NamedTuple):
    """How much of a round a stream position covers: its first `text` and `reasoning` pieces."""

    round: SentRound
    text: int
    reasoning: int

    def row(self) -> tuple[int, str, str | None]:
        """The round's row id, text and reasoning up to this mark, as a row stores them."""
        reasoning = storable_text("".join(self.round.reasoning[: self.reasoning])) or None
        return (
            self.round.message_id,
            storable_text("".join(self.round.text[: self.text])),
            reasoning,
        )


class SentText:
    """The open round's pieces as the turn puts them in its client's stream."""

    def __init__(self) -> None:
        self.round: SentRound | None = None

    def take(self, chunk: BaseChunk) -> Mark | None:
        """Note what `chunk` adds; the stream position after it (None before any round)."""
        if isinstance(chunk, TextDeltaChunk):
            return self.take_text(chunk.delta)
        current = self.round
        if isinstance(chunk, ReasoningDeltaChunk) and current is not None:
            current.reasoning.append(chunk.delta)
        elif isinstance(chunk, DataChunk) and chunk.type == ROUND_PART:
            current = self.round = SentRound(int(chunk.data["id"]))
        return self.mark()

    def take_text(self, delta: str) -> Mark | None:
        """`take` for a text delta's chunk, given its text."""
        if (current := self.round) is not None:
            current.text.append(delta)
        return self.mark()

    def mark(self) -> Mark | None:
        current = self.round
        if current is None:
            return None
        return Mark(current, len(current.text), len(current.reasoning))
