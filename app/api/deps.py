"""Dependencies every route shares: the services, the database, the signed-in user.

A request holds at most one pooled connection: authentication reads the session on it with one
Core statement (on PostgreSQL alone, with no transaction around it: `statements_alone`), and a
route that needs the ORM gets a session bound to that same connection, in a transaction.
Authentication and the CSRF check are one dependency, so a route that needs a user can't
forget the CSRF check on a state-changing method.

A request with `Authorization: Bearer …` is authenticated by that API key alone, whatever
cookies it carries: a bad key is a 401 even beside a good cookie, so a script never silently
acts as whoever's browser it runs in. A key is not a browser's ambient credential, so it needs
no CSRF header. `PersonAuth` is for what only a signed-in person may do (make keys, change the
password): a key there is a 403.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.auth.keys import resolve_key
from app.auth.sessions import Alongside, Authenticated, resolve_session
from app.auth.tokens import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE
from app.core.db.engine import session_on, statements_alone
from app.core.errors import Forbidden, Unauthorized
from app.observability.logs import bind_chat, bind_user
from app.services import Services

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_connection(request: Request) -> AsyncIterator[AsyncConnection]:
    async with request.app.state.services.engine.connect() as connection:
        await statements_alone(connection)
        yield connection


# Scope "function": the connection goes back to the pool when the route function returns, not
# when the response has been sent, so a turn streamed for minutes holds no database connection.
Connection = Annotated[AsyncConnection, Depends(get_connection, scope="function")]


async def get_db(connection: Connection) -> AsyncIterator[AsyncSession]:
    async with session_on(connection) as session:  # it owns (and commits) its transaction
        yield session


DbSession = Annotated[AsyncSession, Depends(get_db, scope="function")]


BEARER = "bearer "


async def require_auth(request: Request, connection: Connection) -> Authenticated:
    return await authenticate(request, connection)


async def authenticate(
    request: Request,
    connection: AsyncConnection,
    alongside: Alongside | None = None,
    values: Mapping[str, Any] | None = None,
) -> Authenticated:
    """What `Auth` does, for a route that reads its user itself: with the row `alongside` asks
    for (`values` bound in its condition) read in the same statement."""
    auth = await _authenticate(request, connection, alongside, values)
    # Every log line of the request from here on (a turn it starts too) names the user and chat.
    bind_user(auth.user.id)
    if chat_id := request.path_params.get("chat_id"):
        bind_chat(chat_id)
    return auth


async def _authenticate(
    request: Request,
    connection: AsyncConnection,
    alongside: Alongside | None,
    values: Mapping[str, Any] | None,
) -> Authenticated:
    services: Services = request.app.state.services
    authorization = request.headers.get("authorization")
    if authorization is not None:
        if authorization[: len(BEARER)].lower() != BEARER:
            raise Unauthorized("the Authorization header takes an API key: Bearer hth_…")
        key = authorization[len(BEARER) :].strip()
        by_key = await resolve_key(connection, key, services.clock.now(), alongside, values)
        if by_key is None:
            raise Unauthorized("unknown, revoked or expired API key")
        return by_key
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise Unauthorized("not signed in")
    auth = await resolve_session(
        connection,
        services.codec,
        cookie,
        services.clock.now(),
        services.session_policy,
        alongside,
        values,
    )
    if auth is None:
        raise Unauthorized("session expired or signed out; sign in again")
    if request.method not in SAFE_METHODS and not services.codec.csrf_ok(
        auth.token, request.headers.get(CSRF_HEADER), request.cookies.get(CSRF_COOKIE)
    ):
        raise Forbidden(f"missing or wrong {CSRF_HEADER} header")
    return auth


Auth = Annotated[Authenticated, Depends(require_auth)]


async def require_person(auth: Auth) -> Authenticated:
    if auth.by_key:
        raise Forbidden("an API key cannot do this; sign in")
    return auth


PersonAuth = Annotated[Authenticated, Depends(require_person)]
