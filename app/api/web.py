"""The browser client: `app/web/` served as it is, `/` for the page and `/web/*` for its files.

The client is plain ES modules with no build step, so serving it is serving files. Starlette's
`StaticFiles` does that (ETag, If-None-Match, Range) and this module only adds the headers a page
that shows model output needs: a Content-Security-Policy that allows no inline script, no other
origin and no framing, `nosniff`, and `no-cache` so a new release is picked up at the next load
(revalidated by ETag, so an unchanged file costs a 304). Only `/` and `/web/*` are served: a
catch-all would answer unknown `/api` paths with the page instead of a 404.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        "media-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.api_route("/", methods=["GET", "HEAD"])
async def page() -> Response:
    return FileResponse(WEB_DIR / "index.html", headers=PAGE_HEADERS)


class ClientFiles(StaticFiles):
    """The client's modules and stylesheet, with the page's headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(PAGE_HEADERS)
        return response


def client_files() -> ClientFiles:
    return ClientFiles(directory=WEB_DIR)
