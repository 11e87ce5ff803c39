"""API keys: `POST /api/keys` makes one (the key is in that answer only), `GET` lists them,
`DELETE` revokes one. Only a signed-in person makes keys, so a leaked key cannot breed keys
that outlive its own revocation; listing and revoking are open to keys too (a script may retire
itself)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from app.api.deps import Auth, Connection, DbSession, PersonAuth, ServicesDep
from app.core.http.json import json_response
from app.core.http.schemas import error_responses
from app.users import keys
from app.users.schemas import KeyCreatedOut, KeyIn, KeyOut

router = APIRouter(prefix="/api/keys", tags=["keys"])


@router.post(
    "", status_code=201, response_model=KeyCreatedOut, responses=error_responses(401, 403, 409)
)
async def create_key(
    body: KeyIn, auth: PersonAuth, services: ServicesDep, db: DbSession
) -> Response:
    """A new API key; `key` is shown here once and stored only as a hash."""
    created = await keys.create_key(
        db, auth.user.id, body.name, services.clock.now(), body.expires_in_days
    )
    return json_response(created, 201)


@router.get("", response_model=list[KeyOut], responses=error_responses(401))
async def list_keys(auth: Auth, services: ServicesDep, connection: Connection) -> Response:
    """The user's keys that still work, newest first, without the keys themselves."""
    return json_response(await keys.list_keys(connection, auth.user.id, services.clock.now()))


@router.delete("/{key_id}", status_code=204, responses=error_responses(401, 403, 404))
async def revoke_key(
    key_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Revoke a key: the next request with it is a 401."""
    await keys.revoke_key(db, auth.user.id, key_id, services.clock.now())
    return Response(status_code=204)
