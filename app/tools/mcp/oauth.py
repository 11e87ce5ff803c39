"""Each user's own account on an MCP server that signs people in (`auth: oauth`).

The OAuth 2.1 client is the MCP SDK's (`OAuthClientProvider`, an httpx auth flow): it does the
discovery (Protected Resource Metadata from the server's `WWW-Authenticate` or its well-known
URLs, then Authorization Server Metadata in the order RFC 8414 and OpenID Connect give), the
client (a configured `client_id`, a client metadata document, or dynamic registration), PKCE
(S256), the `resource` parameter (RFC 8707), scope selection and step-up, and refresh. hearth
gives it three things:

- **storage** (`Connections`): a row per user and server, the tokens and the client sealed with
  a key derived from the secret key (`sealed`); the authorization server's metadata and the
  tokens' expiry are kept beside them, so after a restart a refresh goes to the server that
  issued the tokens, before they have run out (`restore`);
- **the redirect** (`Connector`): connecting runs the SDK's flow in a task of its own; when the
  flow wants the user's browser at the authorization endpoint, the URL is handed to the request
  that asked to connect (a 302), and the flow waits until the callback request brings the code
  back, for the same user and `state`;
- **no redirect inside a call**: a call whose token is gone for good (refused refresh, revoked)
  cannot send anyone anywhere, so the flow fails at once and the user is told to connect again.

The flow waiting for its callback lives in the process that started it; a callback that reaches
another worker leaves the code on the user's row, where the waiting flow finds it within half a
second (`SignInFlow.wait`), so any worker may answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import AuthorizationCodeResult
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.clock import Clock
from app.core.db.retry import transaction
from app.models import McpConnection
from app.tools.mcp.config import McpServerConfig, expand
from app.tools.mcp.sealed import Sealer, Unsealable

log = logging.getLogger("hearth.mcp")

CALLBACK_SECONDS = 600.0
"""How long a started connection waits for the user to come back from the authorization server."""
REVOKE_SECONDS = 10.0
RELAY_SECONDS = 0.5
"""How often a flow waiting for its callback looks for one another worker took."""


class NeedsConnection(Exception):
    """The user has no usable credentials for the server: they must connect it (again)."""


class ConnectFailed(Exception):
    """Connecting did not work; the message says why, in words for the user."""


@dataclass(frozen=True, slots=True)
class Stored:
    tokens: OAuthToken | None
    expires_at: float | None
    client: OAuthClientInformationFull | None
    metadata: dict[str, Any]


class Connections:
    """The users' credentials for OAuth servers, one row per user and server."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], sealer: Sealer, clock: Clock):
        self.sessions = sessions
        self.sealer = sealer
        self.clock = clock

    @staticmethod
    def _bound(user_id: uuid.UUID, server: str) -> str:
        return f"{user_id}/{server}"

    async def read(self, user_id: uuid.UUID, server: str) -> Stored | None:
        async def read(db: AsyncSession) -> McpConnection | None:
            return await db.scalar(
                select(McpConnection).where(
                    McpConnection.user_id == user_id, McpConnection.server == server
                )
            )

        row = await transaction(self.sessions, read, what="reading an MCP connection")
        if row is None:
            return None
        bound = self._bound(user_id, server)
        tokens = expires_at = client = None
        try:
            if row.tokens is not None:
                kept = json.loads(self.sealer.open(row.tokens, bound))
                tokens = OAuthToken.model_validate(kept["token"])
                expires_at = kept.get("expires_at")
            if row.client is not None:
                client = OAuthClientInformationFull.model_validate_json(
                    self.sealer.open(row.client, bound)
                )
        except (Unsealable, ValueError, KeyError):
            log.warning("the MCP credentials of a user for %r do not open; ignored", server)
            tokens = expires_at = client = None
        return Stored(tokens, expires_at, client, row.metadata_ or {})

    async def connected(self, user_id: uuid.UUID, server: str) -> bool:
        stored = await self.read(user_id, server)
        return stored is not None and stored.tokens is not None

    async def servers(self, user_id: uuid.UUID) -> set[str]:
        """The servers the user has tokens for."""

        async def read(db: AsyncSession) -> set[str]:
            rows = await db.scalars(
                select(McpConnection.server).where(
                    McpConnection.user_id == user_id, McpConnection.tokens.is_not(None)
                )
            )
            return set(rows)

        return await transaction(self.sessions, read, what="reading MCP connections")

    async def write(
        self,
        user_id: uuid.UUID,
        server: str,
        *,
        tokens: OAuthToken | None = None,
        client: OAuthClientInformationFull | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Set what is given on the user's row for the server (made when missing)."""
        bound = self._bound(user_id, server)
        now = self.clock.now()
        sealed_tokens = sealed_client = None
        if tokens is not None:
            expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
            kept = {"token": tokens.model_dump(mode="json"), "expires_at": expires_at}
            sealed_tokens = self.sealer.seal(json.dumps(kept).encode(), bound)
        if client is not None:
            sealed_client = self.sealer.seal(client.model_dump_json().encode(), bound)

        async def write(db: AsyncSession) -> None:
            row = await db.scalar(
                select(McpConnection)
                .where(McpConnection.user_id == user_id, McpConnection.server == server)
                .with_for_update()
            )
            if row is None:
                row = McpConnection(user_id=user_id, server=server, created_at=now)
                db.add(row)
            if sealed_tokens is not None:
                row.tokens = sealed_tokens
            if sealed_client is not None:
                row.client = sealed_client
            if metadata is not None:
                row.metadata_ = {**(row.metadata_ or {}), **metadata}
            row.updated_at = now

        await transaction(self.sessions, write, what="storing an MCP connection")

    async def remove(self, user_id: uuid.UUID, server: str) -> Stored | None:
        """Forget the user's credentials for the server; what they were, for revoking them."""
        stored = await self.read(user_id, server)

        async def remove(db: AsyncSession) -> None:
            await db.execute(
                delete(McpConnection).where(
                    McpConnection.user_id == user_id, McpConnection.server == server
                )
            )

        await transaction(self.sessions, remove, what="removing an MCP connection")
        return stored

    async def waiting_for(self, user_id: uuid.UUID, state: str) -> str | None:
        """The server whose sign-in of this user waits for `state`, wherever it runs."""

        async def read(db: AsyncSession) -> str | None:
            rows = await db.execute(
                select(McpConnection.server, McpConnection.metadata_).where(
                    McpConnection.user_id == user_id
                )
            )
            for server, metadata in rows:
                if isinstance(metadata, dict) and metadata.get("waiting") == state:
                    return str(server)
            return None

        return await transaction(self.sessions, read, what="reading MCP connections")

    def storage(self, user_id: uuid.UUID, server: str) -> _Storage:
        return _Storage(self, user_id, server)


@dataclass(eq=False)
class _Storage:
    """The SDK's `TokenStorage` over one user's row."""

    connections: Connections
    user_id: uuid.UUID
    server: str

    async def get_tokens(self) -> OAuthToken | None:
        stored = await self.connections.read(self.user_id, self.server)
        return stored.tokens if stored else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self.connections.write(self.user_id, self.server, tokens=tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        stored = await self.connections.read(self.user_id, self.server)
        return stored.client if stored else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self.connections.write(self.user_id, self.server, client=client_info)


def client_metadata(redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        client_name="hearth",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )


async def _no_redirect(url: str) -> None:
    raise NeedsConnection("the server asks the user to sign in again")


async def _no_callback() -> AuthorizationCodeResult:
    raise NeedsConnection("the server asks the user to sign in again")


async def provider_for(
    config: McpServerConfig,
    connections: Connections,
    user_id: uuid.UUID,
    *,
    redirect_uri: str | None = None,
    redirect_handler: Callable[[str], Awaitable[None]] = _no_redirect,
    callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] = _no_callback,
) -> OAuthClientProvider:
    """The user's OAuth client for the server. Without handlers it never sends anyone to sign
    in: a flow that needs the user fails with `NeedsConnection`."""
    stored = await connections.read(user_id, config.name)
    if redirect_uri is None:
        redirect_uri = (stored.metadata if stored else {}).get(
            "redirect_uri"
        ) or "http://localhost/"
    if config.client_id is not None and (stored is None or stored.client is None):
        secret = expand(config.client_secret, _environ()) if config.client_secret else None
        await connections.write(
            user_id,
            config.name,
            client=OAuthClientInformationFull(
                client_id=config.client_id,
                client_secret=secret,
                redirect_uris=[redirect_uri],  # type: ignore[list-item]
                token_endpoint_auth_method="client_secret_basic" if secret else "none",
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            ),
        )
    assert config.url is not None
    provider = OAuthClientProvider(
        server_url=config.url,
        client_metadata=client_metadata(redirect_uri),
        storage=connections.storage(user_id, config.name),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=config.client_metadata_url,
    )
    if stored is not None:
        restore(provider, stored)
    return provider


def restore(provider: OAuthClientProvider, stored: Stored) -> None:
    """What the SDK's storage does not keep, set on the provider's context (which its first
    flow leaves alone): the tokens' expiry, so a token that ran out while hearth was down is
    refreshed before it is sent, and the discovered metadata, so the refresh goes to the
    server that issued it rather than to the resource's own origin."""
    context = provider.context
    context.token_expiry_time = stored.expires_at
    with contextlib.suppress(ValueError):
        if stored.metadata.get("authorization_server"):
            context.oauth_metadata = OAuthMetadata.model_validate(
                stored.metadata["authorization_server"]
            )
        if stored.metadata.get("resource"):
            context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                stored.metadata["resource"]
            )


def discovered(provider: OAuthClientProvider) -> dict[str, Any]:
    """What the provider discovered, to keep beside the tokens."""
    context = provider.context
    found: dict[str, Any] = {}
    if context.oauth_metadata is not None:
        found["authorization_server"] = context.oauth_metadata.model_dump(mode="json")
    if context.protected_resource_metadata is not None:
        found["resource"] = context.protected_resource_metadata.model_dump(mode="json")
    return found


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


# -- connecting -------------------------------------------------------------------------------


@dataclass(eq=False)
class SignInFlow:
    """One user's trip to the authorization server: where they were sent, the code they bring
    back, and (for a connection) the task that finishes it."""

    user_id: uuid.UUID
    server: str
    redirected: asyncio.Future[str] = field(default_factory=asyncio.Future)
    code: asyncio.Future[AuthorizationCodeResult] = field(default_factory=asyncio.Future)
    task: asyncio.Task[None] | None = None
    forget: Callable[[], None] = lambda: None
    """Drops the flow from the connector's table once it is over."""
    state: str = ""
    connections: Connections | None = None
    """Where a callback that reached another worker leaves the code (`Connector.finish`)."""

    async def redirect(self, url: str) -> None:
        if not self.redirected.done():
            self.redirected.set_result(url)

    async def callback(self) -> AuthorizationCodeResult:
        return await self.wait(CALLBACK_SECONDS)

    async def wait(self, timeout: float) -> AuthorizationCodeResult:  # noqa: ASYNC109
        """The code the user brought back, here or through another worker (`RELAY_SECONDS`)."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout
        while (remaining := ends - loop.time()) > 0:
            await asyncio.wait([self.code], timeout=min(RELAY_SECONDS, remaining))
            if self.code.done():
                await self._done()
                return self.code.result()
            if self.connections is None or not self.state:
                continue
            stored = await self.connections.read(self.user_id, self.server)
            relayed = (stored.metadata if stored else {}).get("callback") or {}
            if relayed.get("state") == self.state:
                await self._done()
                if not relayed.get("code"):
                    raise ConnectFailed(
                        f"the authorization server did not authorize: {relayed.get('error')}"
                    )
                return AuthorizationCodeResult(code=relayed["code"], state=self.state)
        await self._done()
        raise TimeoutError("the user did not come back from the authorization server in time")

    async def _done(self) -> None:
        """The state answers nothing any more, here or on another worker."""
        self.forget()
        if self.connections is not None and self.state:
            await self.connections.write(
                self.user_id, self.server, metadata={"waiting": None, "callback": None}
            )


Connect = Callable[[str, uuid.UUID, OAuthClientProvider], Awaitable[None]]
"""(server, user, the user's provider) -> once the user's session is open (`McpGroups.connect`)."""


class Connector:
    """Connections being made: each waits for its user's browser to come back with a code."""

    def __init__(self, connections: Connections, configs: dict[str, McpServerConfig]) -> None:
        self.connections = connections
        self.configs = configs
        self._flows: dict[str, SignInFlow] = {}
        """state -> the flow that sent the user with it."""

    async def begin(
        self, user_id: uuid.UUID, server: str, redirect_uri: str, connect: Connect
    ) -> str | None:
        """Where to send the user's browser, or None when the server took the stored
        credentials as they are (nothing to do). `ConnectFailed` says why it cannot start."""
        config = self.configs.get(server)
        if config is None or config.auth != "oauth":
            raise ConnectFailed(f"there is no MCP server {server!r} that users connect")
        flow = SignInFlow(user_id, server)
        await self.connections.write(user_id, server, metadata={"redirect_uri": redirect_uri})
        provider = await provider_for(
            config,
            self.connections,
            user_id,
            redirect_uri=redirect_uri,
            redirect_handler=flow.redirect,
            callback_handler=flow.callback,
        )

        async def run() -> None:
            await connect(server, user_id, provider)
            await self.connections.write(user_id, server, metadata=discovered(provider))

        flow.task = asyncio.create_task(run(), name=f"mcp-connect-{server}")
        waiting: list[asyncio.Future[Any]] = [flow.task, flow.redirected]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not flow.redirected.done():  # the flow ended without sending the user anywhere
            flow.redirected.cancel()
            self._raise_failure(flow.task, server)
            return None
        url = flow.redirected.result()
        await self._register(flow, _state_of(url))
        flow.task.add_done_callback(lambda _: flow.forget())
        return url

    async def expect(self, user_id: uuid.UUID, server: str, url: str) -> SignInFlow:
        """A sign-in a server asks for in the middle of a call, sent to `url`: the callback with
        its `state` (from the same user) hands the code to the call that waits for it."""
        flow = SignInFlow(user_id, server)
        flow.redirected.set_result(url)
        await self._register(flow, _state_of(url))
        return flow

    async def _register(self, flow: SignInFlow, state: str) -> None:
        """Known here by `state`, and on the user's row for a callback that reaches another
        worker."""
        flow.state, flow.connections = state, self.connections
        self._flows[state] = flow

        def forget() -> None:
            self._flows.pop(state, None)

        flow.forget = forget
        await self.connections.write(
            flow.user_id, flow.server, metadata={"waiting": state, "callback": None}
        )

    async def finish(
        self, user_id: uuid.UUID, state: str, code: str | None, error: str | None
    ) -> str:
        """Hand the code back to the flow that sent this user with `state`; the server's name
        once the user's session works. `LookupError` for a state that is not this user's."""
        flow = self._flows.get(state)
        if flow is None:
            return await self._relay(user_id, state, code, error)
        if flow.user_id != user_id or flow.code.done():
            raise LookupError("no connection of yours waits for this answer")
        task = flow.task
        if task is None:  # a sign-in in the middle of a call: the call takes it from here
            if error is not None or not code:
                flow.code.set_exception(ConnectFailed(f"the authorization server said {error!r}"))
                raise ConnectFailed(
                    f"the authorization server did not authorize: {error or 'no code'}"
                )
            flow.code.set_result(AuthorizationCodeResult(code=code, state=state))
            return flow.server
        if error is not None or not code:
            flow.code.set_exception(ConnectFailed(f"the authorization server said {error!r}"))
            with contextlib.suppress(BaseException):
                await task
            raise ConnectFailed(f"the authorization server did not authorize: {error or 'no code'}")
        flow.code.set_result(AuthorizationCodeResult(code=code, state=state))
        await asyncio.wait([task], timeout=60)
        self._raise_failure(task, flow.server)
        return flow.server

    async def _relay(
        self, user_id: uuid.UUID, state: str, code: str | None, error: str | None
    ) -> str:
        """A callback for a flow another worker runs: left on the user's row, where that flow
        looks (`SignInFlow.wait`); the server's name once it has taken it."""
        server = await self.connections.waiting_for(user_id, state)
        if server is None:
            raise LookupError("no connection of yours waits for this answer")
        relayed = {"state": state, "code": code, "error": error}
        await self.connections.write(user_id, server, metadata={"callback": relayed})
        if error is not None or not code:
            raise ConnectFailed(f"the authorization server did not authorize: {error or 'no code'}")
        return server

    @staticmethod
    def _raise_failure(task: asyncio.Task[None], server: str) -> None:
        if not task.done():
            task.cancel()
            raise ConnectFailed(f"MCP server {server!r} did not answer in time")
        if task.cancelled():
            raise ConnectFailed(f"connecting MCP server {server!r} was cancelled")
        problem = task.exception()
        if problem is not None:
            leaf = problem
            while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
                leaf = leaf.exceptions[0]
            log.warning("connecting MCP server %r failed: %s", server, leaf)
            raise ConnectFailed(f"connecting MCP server {server!r} failed: {leaf}") from None

    async def disconnect(self, user_id: uuid.UUID, server: str) -> bool:
        """Forget the user's tokens, revoking them where the server offers it (RFC 7009)."""
        stored = await self.connections.remove(user_id, server)
        if stored is None:
            return False
        if stored.tokens is not None:
            await _revoke(stored)
        return True


def _state_of(url: str) -> str:
    return parse_qs(urlsplit(url).query).get("state", [""])[0]


async def _revoke(stored: Stored) -> None:
    endpoint = (stored.metadata.get("authorization_server") or {}).get("revocation_endpoint")
    if not endpoint or stored.tokens is None:
        return
    client = stored.client
    data: dict[str, str] = {}
    auth: httpx2.BasicAuth | None = None
    if client is not None:
        if client.token_endpoint_auth_method == "client_secret_basic" and client.client_secret:
            auth = httpx2.BasicAuth(client.client_id or "", client.client_secret)
        else:
            data["client_id"] = client.client_id or ""
            if client.client_secret:
                data["client_secret"] = client.client_secret
    tokens = [
        (stored.tokens.refresh_token, "refresh_token"),
        (stored.tokens.access_token, "access_token"),
    ]
    async with httpx2.AsyncClient(timeout=REVOKE_SECONDS) as http:
        for token, hint in tokens:
            if not token:
                continue
            try:
                form = {**data, "token": token, "token_type_hint": hint}
                if auth is not None:
                    await http.post(endpoint, data=form, auth=auth)
                else:
                    await http.post(endpoint, data=form)
            except httpx2.HTTPError as exc:
                log.warning("revoking a token at %s failed: %s", endpoint, exc)
