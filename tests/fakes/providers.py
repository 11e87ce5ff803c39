"""Fake model-provider servers for tests and benchmarks: the public entry point.

Tests script what each request gets and read back what was sent:

    async with FakeAnthropic() as fake:
        fake.script(Reply(tool_calls=[ToolCall("list_files", {"path": "."})]), Reply(text="Done."))
        ...  # point the code under test at fake.base_url
        assert len(fake.model_requests) == 2

Benchmarks run one in a process of its own, answering every request on a schedule:

    python -m tests.fakes.providers --kind openai --port 8901 \\
        --schedule first_ms=200,tokens=50,interval_ms=20

The implementation is split by concern: `script` (what to answer), `server` (HTTP, recording,
cancellation), `anthropic_fake` and `openai_fake` (the wire formats), `validation` (request
bodies against the SDK types).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from tests.fakes.anthropic_fake import FakeAnthropic
from tests.fakes.openai_fake import FakeOpenAI, Flavour
from tests.fakes.script import (
    Cut,
    Fail,
    Hang,
    Reply,
    Scripted,
    ToolCall,
    Usage,
    parse_schedule,
    schedule,
)
from tests.fakes.server import FakeProviderServer, RecordedRequest
from tests.fakes.validation import (
    InvalidRequestBody,
    validate_anthropic_request,
    validate_openai_request,
)

__all__ = [
    "Cut",
    "Fail",
    "FakeAnthropic",
    "FakeOpenAI",
    "FakeProviderServer",
    "Flavour",
    "Hang",
    "InvalidRequestBody",
    "RecordedRequest",
    "Reply",
    "Scripted",
    "ToolCall",
    "Usage",
    "main",
    "make_fake",
    "parse_schedule",
    "schedule",
    "validate_anthropic_request",
    "validate_openai_request",
]

KINDS = ("anthropic", "openai", "moonshot")


def make_fake(
    kind: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    always: Scripted | None = None,
    require_auth: bool = True,
    max_records: int | None = None,
) -> FakeProviderServer:
    """A fake for `kind` (`anthropic`, `openai` or `moonshot`)."""
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "always": always,
        "require_auth": require_auth,
        "max_records": max_records,
    }
    if kind == "anthropic":
        return FakeAnthropic(**options)
    if kind in ("openai", "moonshot"):
        flavour: Flavour = "moonshot" if kind == "moonshot" else "openai"
        return FakeOpenAI(flavour, **options)
    raise ValueError(f"unknown provider kind {kind!r}; expected one of {KINDS}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.providers",
        description="Serve a fake model provider that answers every request on a schedule.",
    )
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--no-auth", action="store_true", help="answer requests that carry no API key"
    )
    parser.add_argument(
        "--schedule",
        default="first_ms=200,tokens=50,interval_ms=20",
        help="first_ms=X,tokens=N,interval_ms=Y[,token=TEXT]",
    )
    args = parser.parse_args(argv)
    fake = make_fake(
        args.kind,
        host=args.host,
        port=args.port,
        always=parse_schedule(args.schedule),
        require_auth=not args.no_auth,
        max_records=1000,
    )

    def announce(line: str) -> None:
        print(line, flush=True)

    asyncio.run(fake.serve_forever(announce))
    return 0


if __name__ == "__main__":
    sys.exit(main())
