"""Logs: one JSON object a line on stderr, each carrying what it is about.

Every line has `time` (UTC, ISO 8601), `level`, `logger` and `message`, and where known
`request_id`, `user_id`, `chat_id` and `turn`. Those four come from context variables: the
request id from its middleware, the user from authentication, the chat from the route's path,
the turn from the turn engine. A turn runs in a task created inside the request that started it,
so it inherits all of them; a value passed as `extra=` wins over the context.

What is never written is decided where lines are made, not filtered here: hearth logs ids,
statuses, sizes and error descriptions, never a message, a tool's arguments or results, a
password, a cookie, an API key or a provider key. (A test runs a full scenario and searches the
log for each.)
"""

from __future__ import annotations

import logging
import sys
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from app.core.http.request_id import current_request_id

_user_id: ContextVar[str | None] = ContextVar("hearth_log_user_id", default=None)
_chat_id: ContextVar[str | None] = ContextVar("hearth_log_chat_id", default=None)
_turn: ContextVar[str | None] = ContextVar("hearth_log_turn", default=None)

FIELDS = ("request_id", "user_id", "chat_id", "turn")


def bind_user(user_id: object) -> None:
    _user_id.set(str(user_id))


def bind_chat(chat_id: object) -> None:
    _chat_id.set(str(chat_id))


def bind_turn(turn: object) -> None:
    _turn.set(str(turn))


def _context() -> dict[str, str | None]:
    return {
        "request_id": current_request_id(),
        "user_id": _user_id.get(),
        "chat_id": _chat_id.get(),
        "turn": _turn.get(),
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in _context().items():
            given = getattr(record, name, None)
            if given is not None or value is not None:
                line[name] = str(given if given is not None else value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """For a person at a terminal: the time, level, logger and message, then the ids."""

    converter = staticmethod(time.gmtime)

    def __init__(self) -> None:
        super().__init__("%(asctime)sZ %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ids = [
            f"{name}={getattr(record, name, None) or value}"
            for name, value in _context().items()
            if getattr(record, name, None) or value
        ]
        return f"{text} [{' '.join(ids)}]" if ids else text


def configure_logging(kind: Literal["json", "text"], level: int = logging.INFO) -> None:
    """One handler on the root logger, writing `kind` lines to stderr (uvicorn's too).

    A line says neither where in the code it was made nor which thread or process made it, so
    `logging` is told not to find out for each record, as its HOWTO's "Optimization" section
    says: the caller's frame was looked up for every line, the access log's included (11.5 against
    8.4 us a line, measured)."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if kind == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # The provider SDKs' clients log every request they make; hearth's request log has them.
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
