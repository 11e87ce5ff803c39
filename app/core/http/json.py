"""JSON responses serialised with orjson.

Hot read routes build plain dicts and answer through `json_response`, skipping a second pass
of pydantic validation; their `response_model` still documents (and tests still check) the shape.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson
from fastapi.responses import JSONResponse


def _default(value: Any) -> Any:
    # asyncpg hands back its own UUID subclass, which orjson does not take as a UUID.
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(content: Any) -> bytes:
    return orjson.dumps(
        content, default=_default, option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS
    )


class OrjsonResponse(JSONResponse):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def json_response(content: Any, status_code: int = 200) -> OrjsonResponse:
    return OrjsonResponse(content, status_code=status_code)
