"""The floor under a turn's readers: uvicorn and Starlette alone, streaming server-sent events.

`GET /events?count=N&interval_ms=I` streams N events of a text delta's size, I ms apart, with
`StreamingResponse` and nothing else: no middleware, no database, no turn. What a process serving
readers this way spends is what any reader of a stream costs on this machine before hearth does
anything; `bench/live.py` sets it beside hearth's readers.

    python bench/_sse_floor.py --port PORT
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

DELTA = '{"type":"text-delta","delta":"tok ","id":"0b0e0f3c-7d1a-4a8e-9a52-4a3c2f3d6e11"}'


async def events(request: Request) -> StreamingResponse:
    count = int(request.query_params.get("count", "100"))
    interval = float(request.query_params.get("interval_ms", "20")) / 1000

    async def body() -> AsyncIterator[str]:
        for number in range(1, count + 1):
            yield f"id: {number}\ndata: {DELTA}\n\n"
            await asyncio.sleep(interval)
        yield f"id: {count + 1}\ndata: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


async def healthz(_request: Request) -> StreamingResponse:
    return StreamingResponse(iter([b"ok"]), media_type="text/plain")


app = Starlette(routes=[Route("/events", events), Route("/healthz", healthz)])

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
