"""A server of the current protocol that asks while its calls run: a form, or a completion.

On a 2026-07-28 session the SDK batches what a tool's resolvers ask into an input-required
result that the client answers inside the call itself; so two calls at once on one session
each get their own question, which is what the tests of concurrent forms need.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("asking")


class Booking(BaseModel):
    name: str
    nights: int = 1


def ask_booking(city: str) -> Elicit[Booking]:
    return Elicit(f"Who is the booking in {city} for?", Booking)


def ask_model(topic: str) -> Sample:
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=topic))
    return Sample([prompt], max_tokens=50, system_prompt="Answer in one word.")


@server.tool()
def book(city: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> str:
    """Book a hotel in `city`; asks the user whom for."""
    if booking.action != "accept":
        return f"No booking in {city}: {booking.action}."
    return f"Booked {booking.data.nights} night(s) in {city} for {booking.data.name}."


@server.tool()
def one_word(topic: str, answer: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model for one word about `topic`."""
    text = answer.content.text if isinstance(answer.content, TextContent) else "?"
    return f"The model says {text} ({answer.model})."


if __name__ == "__main__":
    server.run("stdio")
