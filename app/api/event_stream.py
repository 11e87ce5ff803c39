"""The HTTP response of a turn's stream: a reader of the turn's log, written to the socket.

Starlette's `StreamingResponse` does the writing; this adds two things it has no way to do. It
can be ended from outside: a reader that fell too far behind (`app.agent.live.MAX_LAG`) is cut by
the turn, and its response, which is then waiting on a socket the client stopped reading, is
cancelled where it waits: the connection closes and the client may reconnect with
`Last-Event-ID`. A client that leaves ends its reader, and cancels nothing of the turn. And it
writes the stream's chunks straight to the server (`app.core.http.outlet`), its start and its end
going through every middleware as any response's do. Measured (bench/live.py, 100 turns each
followed by two readers in another worker, three rounds a run, alternated with the stack's way):
the readers' worker spent 6.7-9.5 ms (mean 7.8) of CPU per turn against 8.4-9.3 (mean 8.9), about
5 us a chunk; a turn's own client, which gets a chunk per 10 ms of tokens, saves less than
bench/turn_overhead.py --parts d can see.
"""

from __future__ import annotations

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.agent.live import Reader
from app.agent.stream import STREAM_HEADERS
from app.core.http.outlet import direct_send
from app.observability.metrics import Reporter


class EventStreamResponse(StreamingResponse):
    def __init__(self, reader: Reader, *, readers: Reporter | None = None) -> None:
        """`readers`: where a reader that joined a running turn is counted while it follows."""
        super().__init__(reader.batches(), media_type="text/event-stream", headers=STREAM_HEADERS)
        self.reader = reader
        self.readers = readers
        self._scope: Scope = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._scope = scope
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

    async def stream_response(self, send: Send) -> None:
        status = self.status_code
        await send({"type": "http.response.start", "status": status, "headers": self.raw_headers})
        chunks = direct_send(self._scope, status) or send
        async for chunk in self.body_iterator:
            body = chunk.encode() if isinstance(chunk, str) else chunk
            await chunks({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
