"""The client address: whose forwarding headers count, and how a chain of proxies is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app import cli
from app.auth.addresses import address_key, forwarded_hops, resolve
from app.auth.throttle import SLOWDOWN_CAP, SLOWDOWN_STEP, slowdown
from app.settings import Settings

PROXY = ["10.0.0.1"]


@pytest.mark.parametrize(
    ("peer", "headers", "proxies", "client"),
    [
        # Nobody trusted: the socket peer, whatever the headers say.
        ("127.0.0.1", {"x-forwarded-for": "203.0.113.9"}, [], "127.0.0.1"),
        ("10.0.0.1", {"forwarded": "for=203.0.113.9"}, [], "10.0.0.1"),
        # A trusted proxy names the client.
        ("10.0.0.1", {"x-forwarded-for": "203.0.113.9"}, PROXY, "203.0.113.9"),
        ("10.0.0.1", {"x-forwarded-for": "203.0.113.9:5555"}, PROXY, "203.0.113.9"),
        ("10.0.0.1", {"forwarded": 'for="[2001:db8::1]:4711";proto=https'}, PROXY, "2001:db8::1"),
        ("10.0.0.1", {"forwarded": "for=192.0.2.1, for=203.0.113.9"}, PROXY, "203.0.113.9"),
        # What the client wrote itself, left of the first untrusted hop, is never read.
        ("10.0.0.1", {"x-forwarded-for": "6.6.6.6, 203.0.113.9"}, PROXY, "203.0.113.9"),
        # A chain of trusted proxies is walked through.
        (
            "10.0.0.1",
            {"x-forwarded-for": "203.0.113.9, 10.0.0.2"},
            ["10.0.0.0/24"],
            "203.0.113.9",
        ),
        # An untrusted peer's headers count for nothing, even naming a trusted proxy.
        ("192.0.2.50", {"x-forwarded-for": "10.0.0.1"}, PROXY, "192.0.2.50"),
        # A hop the proxy could not name leaves the proxy as the client.
        ("10.0.0.1", {"forwarded": "for=unknown"}, PROXY, "10.0.0.1"),
        ("10.0.0.1", {"x-forwarded-for": "not an address"}, PROXY, "10.0.0.1"),
        ("10.0.0.1", {}, PROXY, "10.0.0.1"),
        # X-Forwarded-For is preferred when both are present.
        (
            "10.0.0.1",
            {"x-forwarded-for": "203.0.113.9", "forwarded": "for=192.0.2.1"},
            PROXY,
            "203.0.113.9",
        ),
        # IPv4 mapped into IPv6 is the IPv4 address.
        ("::ffff:10.0.0.1", {"x-forwarded-for": "::ffff:203.0.113.9"}, PROXY, "203.0.113.9"),
        (None, {}, PROXY, "unknown"),
    ],
)
def test_resolve(
    peer: str | None, headers: dict[str, str], proxies: list[str], client: str
) -> None:
    assert resolve(peer, forwarded_hops(headers.items()), proxies) == client


def test_ipv6_clients_count_by_their_64() -> None:
    assert address_key("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:2::99") == address_key("2001:db8:1:2:ffff::1")
    assert address_key("203.0.113.9") == "203.0.113.9"
    assert address_key("unknown") == "unknown"


def test_trusted_proxies_must_be_addresses() -> None:
    settings = Settings(_env_file=None, trusted_proxies="10.0.0.1, 10.1.0.0/16 ,::1")  # type: ignore[arg-type]
    assert settings.trusted_proxies == ["10.0.0.1", "10.1.0.0/16", "::1"]
    with pytest.raises(ValidationError):
        Settings(_env_file=None, trusted_proxies="proxy.internal")  # type: ignore[arg-type]


def test_serve_leaves_forwarding_headers_to_the_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: calls.append(kwargs))
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'h.db'}",
        data_dir=tmp_path,
        secret_key="k" * 32,
        auto_migrate=False,
    )
    cli._serve(settings, "127.0.0.1", 8000, 1)
    cli._serve(settings, "127.0.0.1", 8000, 2)
    assert [call["proxy_headers"] for call in calls] == [False, False]


def test_slowdown_grows_with_failures_and_is_capped() -> None:
    assert slowdown(4, 5) == 0
    assert slowdown(5, 5) == SLOWDOWN_STEP
    assert slowdown(6, 5) == 2 * SLOWDOWN_STEP
    assert slowdown(10_000, 5) == SLOWDOWN_CAP
