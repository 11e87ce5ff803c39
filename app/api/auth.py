"""Sign-up, sign-in, sign-out and the current user.

Sign-up and sign-in are the two routes anyone can call, and each costs an Argon2 hash, so both
pass the throttle (app.auth.throttle) before any password work: the attempt is counted first,
then the password is hashed or checked, in a queue of a few at a time (app.auth.passwords).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import select

from app.api.deps import Auth, DbSession, ServicesDep
from app.auth import throttle
from app.auth.addresses import client_address
from app.auth.passwords import hash_password, verify_password
from app.auth.sessions import SessionUser, open_session, revoke_session
from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.core.errors import Forbidden, TooManyRequests, Unauthorized
from app.core.http.json import json_response
from app.core.http.schemas import error_responses
from app.models import User
from app.services import Services
from app.users.schemas import LoginIn, RegisterIn, SignedInOut
from app.users.service import EmailTaken, create_user

router = APIRouter(prefix="/api/auth", tags=["auth"])


def too_many(message: str, throttled: throttle.Throttled) -> TooManyRequests:
    return TooManyRequests(message, throttled.retry_after)


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
    if not services.settings.allow_registration:
        raise Forbidden("registration is closed")
    now = services.clock.now()
    limit = throttle.signup_limit(client_address(request), services.settings)
    try:
        await throttle.admit(db, [limit], now)
    except throttle.Throttled as exc:
        raise too_many("too many sign-ups from this address; try again later", exc) from exc
    if await db.scalar(select(User.id).where(User.email == body.email)) is not None:
        raise EmailTaken  # before the hash: a taken address costs no Argon2 work
    user = await create_user(
        db,
        email=body.email,
        password_hash=await hash_password(body.password),
        display_name=body.display_name,
        now=now,
    )
    token = await open_session(db, services.codec, user, now, services.session_policy)
    await db.commit()
    return signed_in(services, user, token, 201)


@router.post("/login", response_model=SignedInOut, responses=error_responses(401, 429))
async def login(body: LoginIn, request: Request, services: ServicesDep, db: DbSession) -> Response:
    """Sign in with email and password; sets the session and CSRF cookies."""
    settings = services.settings
    now = services.clock.now()
    address = client_address(request)
    limits = throttle.login_limits(body.email, address, settings)
    try:
        attempt = await throttle.admit(db, limits, now)
    except throttle.Throttled as exc:
        raise too_many("too many failed sign-ins; try again later", exc) from exc
    email_key = throttle.email_key(body.email)
    delay = throttle.slowdown(
        await throttle.failures(db, email_key, now), settings.login_max_failures
    )
    if delay:
        await throttle.pause(delay)
    user = await db.scalar(select(User).where(User.email == body.email))
    if not await verify_password(user.password_hash if user else None, body.password):
        # The attempt's own rows stay: they were counted as failures from the start.
        throttle.record_failure(db, email_key, now)
        await db.commit()
        raise Unauthorized("wrong email or password")
    assert user is not None
    pair, per_address = (limit.key for limit in limits)
    await throttle.clear(db, pair)
    await throttle.forget(db, [attempt[per_address]])
    token = await open_session(db, services.codec, user, now, services.session_policy)
    await db.commit()
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
