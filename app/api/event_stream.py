"""The HTTP response of a turn's stream: a reader of the turn's log, written to the socket.

Starlette's `StreamingResponse` does the writing; this adds the one thing it has no way to do: be
ended from outside. A reader that fell too far behind (`app.agent.live.MAX_LAG`) is cut by the
turn, and its response, which is then waiting on a socket the client stopped reading, is
cancelled where it waits: the connection closes and the client may reconnect with
`Last-Event-ID`. A client that leaves ends its reader, and cancels nothing of the turn.
"""

from __future__ import annotations

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.agent.live import Reader
from app.agent.stream import STREAM_HEADERS
from app.observability.metrics import Reporter


class EventStreamResponse(StreamingResponse):
    def __init__(self, reader: Reader, *, readers: Reporter | None = None) -> None:
        """`readers`: where a reader that joined a running turn is counted while it follows."""
        super().__init__(reader.batches(), media_type="text/event-stream", headers=STREAM_HEADERS)
        self.reader = reader
        self.readers = readers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.readers is not None:
            self.readers.live_readers(1)
        try:
            with anyio.CancelScope() as scope_:
                self.reader.on_cut(scope_.cancel)
                await super().__call__(scope, receive, send)
        finally:
            self.reader.close()
            if self.readers is not None:
                self.readers.live_readers(-1)
