"""Connecting a user's own account to an MCP server that signs people in (`auth: oauth`).

`connect` sends the browser to the server's authorization server; the authorization server
sends it back to `callback` with a code, which finishes the connection for the same user only;
`connection` (DELETE) forgets the tokens, revoking them where the server offers it.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import RedirectResponse

from app.api.deps import Auth, ServicesDep
from app.core.errors import NotFound, UpstreamFailed
from app.core.http.schemas import error_responses
from app.services import Services
from app.tools.mcp.oauth import ConnectFailed, Connector

router = APIRouter(prefix="/api/mcp", tags=["tools"])

GROUP = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")


def _connector(services: Services, group: str | None = None) -> Connector:
    connector, mcp = services.connector, services.mcp
    if connector is None or mcp is None:
        raise NotFound("no MCP server is configured")
    if group is not None:
        found = mcp.group(group)
        if found is None or not found.per_user:
            raise NotFound(f"no MCP server {group!r} is connected by its users")
    return connector


@router.get(
    "/oauth/callback",
    response_class=RedirectResponse,
    status_code=302,
    responses=error_responses(401, 404, 502),
    name="mcp_oauth_callback",
)
async def oauth_callback(
    auth: Auth,
    services: ServicesDep,
    state: str = Query(min_length=1, max_length=500),
    code: str | None = Query(default=None, max_length=4000),
    error: str | None = Query(default=None, max_length=500),
) -> RedirectResponse:
    """Where the authorization server sends the user back: the connection is finished."""
    connector = _connector(services)
    try:
        group = await connector.finish(auth.user.id, state, code, error)
    except LookupError:
        raise NotFound("no connection of yours waits for this answer") from None
    except ConnectFailed as exc:
        raise UpstreamFailed(str(exc)) from None
    return RedirectResponse(f"/?connected={quote(group)}", status_code=302)


@router.get(
    "/{group}/connect",
    response_class=RedirectResponse,
    status_code=302,
    responses=error_responses(401, 404, 502),
)
async def connect(
    request: Request, auth: Auth, services: ServicesDep, group: str = GROUP
) -> RedirectResponse:
    """Connect your own account: a redirect to the server's authorization server."""
    connector = _connector(services, group)
    mcp = services.mcp
    assert mcp is not None
    redirect_uri = str(request.url_for("mcp_oauth_callback"))
    try:
        url = await connector.begin(auth.user.id, group, redirect_uri, mcp.connect)
    except ConnectFailed as exc:
        raise UpstreamFailed(str(exc)) from None
    return RedirectResponse(url or f"/?connected={quote(group)}", status_code=302)


@router.delete("/{group}/connection", status_code=204, responses=error_responses(401, 403, 404))
async def disconnect(auth: Auth, services: ServicesDep, group: str = GROUP) -> Response:
    """Forget your account's tokens for the server (revoked where it offers revocation)."""
    connector = _connector(services, group)
    mcp = services.mcp
    assert mcp is not None
    await mcp.disconnect(group, auth.user.id)
    if not await connector.disconnect(auth.user.id, group):
        raise NotFound(f"MCP server {group!r} is not connected")
    return Response(status_code=204)
