"""The MCP servers file (`config/mcp.yaml`): its schema and its loading.

Parsing is as strict as the providers file (unknown keys are errors, a server is either a
command or a URL, never both) because a misspelt key would otherwise start a server without the
setting the operator meant, and a bad file must stop start-up with a message naming the file,
the entry and the problem. An empty `servers: []` is valid: hearth runs without MCP servers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.core.config_files import load_config_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerConfig(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """The group name; the server's tools are exposed as `mcp__<name>__<tool>`."""
    description: str = Field(min_length=1)
    command: list[str] | None = Field(default=None, min_length=1)
    """A stdio server: the program and its arguments."""
    url: str | None = None
    """A streamable HTTP server."""
    requires_approval: bool = False
    headers: dict[str, str] = Field(default_factory=dict)
    """Headers sent with every request to a streamable HTTP server; `${NAME}` as in `env`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for a stdio server, over a small safe default (PATH, HOME, ...); a
    `${NAME}` in a value is hearth's own variable NAME, read when the server starts."""
    timeout_seconds: float = Field(default=30, gt=0)
    """How long one tool call may take."""
    init_timeout_seconds: float = Field(default=10, gt=0)
    """How long the server may take to start and answer the MCP handshake."""
    auth: Literal["oauth"] | None = None
    """`oauth`: each user connects the server with their own account (OAuth 2.1); its calls run
    on a session with that user's token. Only for a `url` server."""
    client_id: str | None = Field(default=None, min_length=1)
    """A client registered with the server's authorization server beforehand; without it hearth
    registers itself (dynamic client registration) or uses `client_metadata_url`."""
    client_secret: str | None = Field(default=None, min_length=1)
    """The registered client's secret, usually `${NAME}` (never logged)."""
    client_metadata_url: str | None = None
    """An https URL (with a path) where hearth's client metadata document is published: used as
    the client id where the authorization server accepts such documents."""
    allow_sampling: bool = False
    """Whether the server may ask for completions by the chat's model (`sampling/createMessage`);
    without it hearth does not offer sampling and the SDK refuses such a request."""

    @field_validator("command")
    @classmethod
    def _no_empty_arguments(cls, command: list[str] | None) -> list[str] | None:
        if command is not None and not command[0].strip():
            raise ValueError("the program (first item) must not be empty")
        return command

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL with a host")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and self.env:
            raise ValueError("'env' applies only to a server started with 'command'")
        if self.command is not None and self.headers:
            raise ValueError("'headers' applies only to a server reached by 'url'")
        if self.auth is None and (self.client_id or self.client_secret or self.client_metadata_url):
            raise ValueError(
                "'client_id', 'client_secret' and 'client_metadata_url' need 'auth: oauth'"
            )
        if self.auth is not None and self.url is None:
            raise ValueError("'auth' applies only to a server reached by 'url'")
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("'client_secret' needs 'client_id'")
        if self.client_metadata_url is not None:
            parts = urlsplit(self.client_metadata_url)
            if parts.scheme != "https" or parts.path in ("", "/"):
                raise ValueError("'client_metadata_url' must be an https:// URL with a path")
        return self


class McpConfig(_Strict):
    servers: list[McpServerConfig]

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: list[McpServerConfig]) -> list[McpServerConfig]:
        first: dict[str, int] = {}
        for index, server in enumerate(servers):
            if server.name in first:
                raise ValueError(
                    f"servers[{index}] (server {server.name!r}) has the same name as "
                    f"servers[{first[server.name]}]"
                )
            first[server.name] = index
        return servers


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingVariable(Exception):
    """A `${NAME}` of the file names a variable hearth's environment does not have."""


def expand(value: str, environ: Mapping[str, str]) -> str:
    """`value` with each `${NAME}` replaced by the variable's value (which is never logged)."""

    def variable(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in environ:
            raise MissingVariable(f"the environment variable {name} is not set")
        return environ[name]

    return _VARIABLE.sub(variable, value)


def load_mcp_config(path: Path) -> McpConfig:
    """Read and check the MCP servers file; any problem is a `ConfigError`."""
    return load_config_file(path, McpConfig, "servers", "server", "name")
