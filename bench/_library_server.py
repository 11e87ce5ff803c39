"""The floor under part (c) of `turn_overhead.py`: pydantic-ai serving the same turns by itself.

`POST /chat` takes a Vercel AI SDK request (`submit-message`) and answers it the way
pydantic-ai's own UI adapter does (`VercelAIAdapter.dispatch_request`): one agent run against
the fake provider, streamed as the UI message stream. The model is set up as hearth's turns set
it up (`OpenAIChatModel` over `HearthAsyncOpenAI`), and the server is uvicorn with the same
worker count, loop and HTTP parser as `hearth serve`. There is no database, no history, no
account, no turn log: what a burst costs here, and how late its tokens reach the client, is
what the library and the machine give before hearth does anything. Its arrivals are paced by
its own HTTP layer, as hearth's are by hearth's, so the two are compared under one client.

    python -m uvicorn --app-dir bench _library_server:app --workers 2 --port PORT
    (HEARTH_FLOOR_PROVIDER_URL: the fake's `/v1` URL; HEARTH_BENCH_PROVIDER_KEY: its key)
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.models import create_async_httpx2_client
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from app.llm.wire.openai_client import HearthAsyncOpenAI

MODEL = "gpt-4.1"
SDK_VERSION = 5

client = HearthAsyncOpenAI(
    base_url=os.environ.get("HEARTH_FLOOR_PROVIDER_URL", "http://127.0.0.1:1/v1"),
    api_key=os.environ.get("HEARTH_BENCH_PROVIDER_KEY", "bench-key"),
    max_retries=0,
    http_client=create_async_httpx2_client(),
)
agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))


async def chat(request: Request) -> Response:
    return await VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=SDK_VERSION)


async def healthz(_request: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/chat", chat, methods=["POST"]), Route("/healthz", healthz)])
