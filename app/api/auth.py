"""Sign-up, sign-in, sign-out and the current user: the cookies here, the rest in
`app.users.service` (throttling, password work, sessions)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.deps import Auth, DbSession, ServicesDep
from app.auth.addresses import client_address
from app.auth.sessions import SessionUser, revoke_session
from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.core.http.json import json_response
from app.core.http.schemas import error_responses
from app.models import User
from app.services import Services
from app.users import service as accounts
from app.users.schemas import LoginIn, RegisterIn, SignedInOut

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
    )
    return signed_in(services, user, token, 201)


@router.post("/login", response_model=SignedInOut, responses=error_responses(401, 429))
async def login(body: LoginIn, request: Request, services: ServicesDep, db: DbSession) -> Response:
    """Sign in with email and password; sets the session and CSRF cookies."""
    user, token = await accounts.sign_in(
        services, db, client_address(request), email=body.email, password=body.password
    )
    return signed_in(services, user, token, 200)


@router.post("/logout", status_code=204, responses=error_responses(401, 403))
async def logout(auth: Auth, services: ServicesDep, db: DbSession) -> Response:
    """End this session; its cookie is refused from now on."""
    await revoke_session(db, auth.session_id, services.clock.now())
    await db.commit()
    response = Response(status_code=204)
    settings = services.settings
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(
            name, path="/", secure=settings.cookie_secure, samesite=settings.cookie_samesite
        )
    return response


@router.get("/me", response_model=SignedInOut, responses=error_responses(401))
async def me(auth: Auth, request: Request) -> Response:
    """The signed-in user."""
    codec = request.app.state.services.codec
    return json_response({**user_dict(auth.user), "csrf_token": codec.csrf_for(auth.token)})
