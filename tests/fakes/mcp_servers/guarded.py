"""An MCP server behind OAuth 2.1, with its own authorization server, for the per-user tests.

`python guarded.py PORT [FD]` serves, at `http://127.0.0.1:PORT` (on the listening socket FD when
given: a test binds the port and hands the socket over, so no other process can take the port
between the two):

- `/mcp`: the weather tools over streamable HTTP, for a valid Bearer token only; anything else
  gets 401 with `WWW-Authenticate: Bearer resource_metadata=...` (RFC 9728);
- the Protected Resource Metadata and the Authorization Server Metadata (RFC 8414);
- `/register` (RFC 7591), `/authorize` (which signs the user in at once and sends the browser
  back with a code), `/token` (PKCE S256 checked; authorization code and refresh grants),
  `/revoke` (RFC 7009);
- `/log`: what it was asked, as JSON, for the tests to read.

`TOKEN_SECONDS` sets the access tokens' lifetime (default 3600); `TOKEN_FAILS=1` makes the token
endpoint answer 500, as a broken authorization server does; `ALERTS_SCOPE=<scope>` makes a call
of the `alerts` tool need a token with that scope, answered 403 `insufficient_scope` otherwise
(a step-up).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import sys
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from tests.fakes.mcp_servers.weather import server as weather

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8931
BASE = f"http://127.0.0.1:{PORT}"
TOKEN_SECONDS = int(os.environ.get("TOKEN_SECONDS", "3600"))
ALERTS_SCOPE = os.environ.get("ALERTS_SCOPE")

clients: dict[str, dict[str, Any]] = {}
codes: dict[str, dict[str, Any]] = {}
access: dict[str, str] = {}
"""access token -> the scope it was granted."""
refresh: set[str] = set()
log: list[dict[str, Any]] = []


async def resource_metadata(request: Request) -> JSONResponse:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})


async def server_metadata(request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "registration_endpoint": f"{BASE}/register",
            "revocation_endpoint": f"{BASE}/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        }
    )


async def register(request: Request) -> JSONResponse:
    asked = await request.json()
    client_id, secret = f"client-{secrets.token_hex(4)}", secrets.token_hex(8)
    clients[client_id] = {"secret": secret, "redirect_uris": asked.get("redirect_uris", [])}
    log.append({"event": "register", "client_id": client_id})
    return JSONResponse(
        {
            **asked,
            "client_id": client_id,
            "client_secret": secret,
            "token_endpoint_auth_method": "client_secret_post",
        },
        status_code=201,
    )


async def authorize(request: Request) -> Response:
    query = request.query_params
    client = clients.get(query.get("client_id", ""))
    if client is None or query.get("redirect_uri") not in client["redirect_uris"]:
        return JSONResponse({"error": "invalid_client"}, status_code=400)
    code = secrets.token_hex(8)
    codes[code] = {
        "client_id": query["client_id"],
        "challenge": query.get("code_challenge"),
        "redirect_uri": query["redirect_uri"],
        "scope": query.get("scope", ""),
    }
    log.append(
        {"event": "authorize", "scope": query.get("scope"), "resource": query.get("resource")}
    )
    return RedirectResponse(f"{query['redirect_uri']}?code={code}&state={query['state']}", 302)


renewals: dict[str, str] = {}
"""refresh token -> the scope it renews."""


def issue(scope: str) -> JSONResponse:
    token, renewal = f"at-{secrets.token_hex(8)}", f"rt-{secrets.token_hex(8)}"
    access[token] = scope
    refresh.add(renewal)
    renewals[renewal] = scope
    return JSONResponse(
        {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": TOKEN_SECONDS,
            "refresh_token": renewal,
            "scope": scope,
        }
    )


async def token(request: Request) -> Response:
    form = await request.form()
    grant = form.get("grant_type")
    log.append({"event": "token", "grant_type": grant})
    if os.environ.get("TOKEN_FAILS") == "1":
        return JSONResponse({"error": "server_error"}, status_code=500)
    client = clients.get(str(form.get("client_id", "")))
    if client is None or form.get("client_secret") != client["secret"]:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    if grant == "authorization_code":
        issued = codes.pop(str(form.get("code", "")), None)
        verifier = str(form.get("code_verifier", ""))
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if issued is None or issued["challenge"] != challenge:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return issue(issued["scope"])
    if grant == "refresh_token":
        old = str(form.get("refresh_token", ""))
        if old not in refresh:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        refresh.discard(old)
        return issue(renewals.pop(old, ""))
    return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)


async def revoke(request: Request) -> Response:
    form = await request.form()
    revoked = str(form.get("token", ""))
    access.pop(revoked, None)
    refresh.discard(revoked)
    log.append({"event": "revoke", "hint": form.get("token_type_hint")})
    return Response(status_code=200)


async def show_log(request: Request) -> JSONResponse:
    return JSONResponse(log)


def guarded(app: Any) -> Any:
    """`app`, for requests with a Bearer token this server issued and has not revoked."""
    challenge = (
        f'Bearer error="invalid_token", '
        f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
    ).encode()

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        given = headers.get(b"authorization", b"").decode()
        token = given.removeprefix("Bearer ")
        if scope["type"] == "http" and token in access and ALERTS_SCOPE:
            body, receive = await buffered(receive)
            calls_alerts = b'"tools/call"' in body and b'"alerts"' in body
            if calls_alerts and ALERTS_SCOPE not in access[token].split():
                log.append({"event": "step-up"})
                wanted = f'Bearer error="insufficient_scope", scope="{ALERTS_SCOPE}"'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"www-authenticate", wanted.encode())],
                    }
                )
                await send({"type": "http.response.body", "body": b"more scope needed"})
                return
        if scope["type"] == "http" and token not in access:
            log.append({"event": "refused", "token": bool(given)})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"www-authenticate", challenge)],
                }
            )
            await send({"type": "http.response.body", "body": b"sign in first"})
            return
        await app(scope, receive, send)

    return serve


async def buffered(receive: Any) -> tuple[bytes, Any]:
    """The request's whole body, and a `receive` that hands it on again."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, again


mcp_app = weather.streamable_http_app(host="127.0.0.1")
app = Starlette(
    routes=[
        Route("/.well-known/oauth-protected-resource/mcp", resource_metadata),
        Route("/.well-known/oauth-authorization-server", server_metadata),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/revoke", revoke, methods=["POST"]),
        Route("/log", show_log),
        Mount("/", app=guarded(mcp_app)),
    ],
    lifespan=lambda _: mcp_app.router.lifespan_context(mcp_app),
)

if __name__ == "__main__":
    if len(sys.argv) > 2:
        uvicorn.run(app, fd=int(sys.argv[2]), log_level="warning")
    else:
        uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
