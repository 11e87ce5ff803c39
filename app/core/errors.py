"""Errors in the API's two shapes: `{"detail": "message"}`, and for 422 FastAPI's list form.

A 422 always carries the list form (`[{loc, msg, type}]`), whether pydantic or a route found the
problem, so a client parses one shape per status and the OpenAPI schema holds for both.
"""

from __future__ import annotations

from fastapi import HTTPException


def unprocessable(location: tuple[str, ...], message: str) -> HTTPException:
    """A 422 for one field, e.g. `unprocessable(("body", "model"), "unknown model 'x'")`."""
    return HTTPException(
        422, detail=[{"loc": list(location), "msg": message, "type": "value_error"}]
    )
