"""Sign-up, sign-in, sign-out, the current user, the password and the sessions list: the cookies
here, the rest in `app.users.service` (throttling, password work) and `app.users.keys` (lists).

What only a person may do (a password change, signing out this session) takes `PersonAuth`: an
API key there is a 403. Listing and revoking sessions is open to keys, as any other read or
write of the user's own things is.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response

from app.api.deps import Auth, Connection, DbSession, PersonAuth, ServicesDep
from app.auth.addresses import client_address
from app.auth.sessions import SessionUser, revoke_session, revoke_sessions
from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.core.http.json import json_response
from app.core.http.schemas import error_responses
from app.models import User
from app.services import Services
from app.users import keys as lists
from app.users import service as accounts
from app.users.schemas import LoginIn, PasswordChangeIn, RegisterIn, SessionOut, SignedInOut

router = APIRouter(prefix="/api/auth", tags=["auth"])


def user_dict(user: User | SessionUser) -> dict[str, object]:
    return {
        "id": user.id,
        "email": user.email,
        "display_name": user.display_name,
        "is_admin": user.is_admin,
        "created_at": user.created_at,
    }


def signed_in(services: Services, user: User, token: str, status_code: int) -> Response:
    csrf = services.codec.csrf_for(token)
    response = json_response({**user_dict(user), "csrf_token": csrf}, status_code)
    settings = services.settings
    max_age = int(services.session_policy.lifetime.total_seconds())
    for name, value, httponly in (
        (SESSION_COOKIE, services.codec.sign(token), True),
        (CSRF_COOKIE, csrf, False),
    ):
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            secure=settings.cookie_secure,
            samesite=settings.cookie_samesite,
            httponly=httponly,
        )
    return response


@router.post(
    "/register",
    status_code=201,
    response_model=SignedInOut,
    responses=error_responses(403, 409, 429),
)
async def register(
    body: RegisterIn, request: Request, services: ServicesDep, db: DbSession
) -> Response:
    """Create an account and sign it in."""
    user, token = await accounts.sign_up(
        services,
        db,
        client_address(request),
        email=body.email,
        password=body.password,
        display_name=body.display_name,
        user_agent=request.headers.get("user-agent"),
    )
    return signed_in(services, user, token, 201)


@router.post("/login", response_model=SignedInOut, responses=error_responses(401, 429))
async def login(body: LoginIn, request: Request, services: ServicesDep, db: DbSession) -> Response:
    """Sign in with email and password; sets the session and CSRF cookies."""
    user, token = await accounts.sign_in(
        services,
        db,
        client_address(request),
        email=body.email,
        password=body.password,
        user_agent=request.headers.get("user-agent"),
    )
    return signed_in(services, user, token, 200)


def signed_out(services: Services) -> Response:
    response = Response(status_code=204)
    settings = services.settings
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(
            name, path="/", secure=settings.cookie_secure, samesite=settings.cookie_samesite
        )
    return response


@router.post("/logout", status_code=204, responses=error_responses(401, 403))
async def logout(auth: PersonAuth, services: ServicesDep, db: DbSession) -> Response:
    """End this session; its cookie is refused from now on."""
    assert auth.session_id is not None
    await revoke_session(db, auth.session_id, services.clock.now())
    await db.commit()
    return signed_out(services)


@router.post("/logout-all", status_code=204, responses=error_responses(401, 403))
async def logout_all(auth: Auth, services: ServicesDep, db: DbSession) -> Response:
    """End every session of the user, this one included (API keys stay: delete them apart)."""
    await revoke_sessions(db, auth.user.id, services.clock.now())
    await db.commit()
    return signed_out(services)


@router.post("/password", status_code=204, responses=error_responses(401, 403, 429))
async def change_password(
    body: PasswordChangeIn,
    auth: PersonAuth,
    request: Request,
    services: ServicesDep,
    db: DbSession,
) -> Response:
    """Change the password; every other session of the user is signed out, this one stays."""
    assert auth.session_id is not None
    await accounts.change_password(
        services,
        db,
        client_address(request),
        email=auth.user.email,
        current=body.current_password,
        new=body.new_password,
        keep_session=auth.session_id,
    )
    return Response(status_code=204)


@router.get("/sessions", response_model=list[SessionOut], responses=error_responses(401))
async def list_sessions(auth: Auth, services: ServicesDep, connection: Connection) -> Response:
    """The user's live sessions, most recently seen first; `current` marks this request's."""
    rows = await lists.list_sessions(
        connection, auth.user.id, services.clock.now(), services.session_policy, auth.session_id
    )
    return json_response(rows)


@router.delete("/sessions/{session_id}", status_code=204, responses=error_responses(401, 403, 404))
async def revoke_one_session(
    session_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Sign one session out (this one too: its cookies are then cleared)."""
    await lists.revoke_one_session(
        db, auth.user.id, session_id, services.clock.now(), services.session_policy
    )
    if session_id == auth.session_id:
        return signed_out(services)
    return Response(status_code=204)


@router.get("/me", response_model=SignedInOut, responses=error_responses(401))
async def me(auth: Auth, request: Request) -> Response:
    """The signed-in user."""
    codec = request.app.state.services.codec
    return json_response({**user_dict(auth.user), "csrf_token": codec.csrf_for(auth.token)})
