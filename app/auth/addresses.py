"""The client's address, the one place that decides it.

Throttling keys on the address a request came from, so whoever can choose that address can
dodge every limit. The socket peer is the client unless the peer is one of the operator's
trusted proxies (`HEARTH_TRUSTED_PROXIES`); only then are `X-Forwarded-For` or `Forwarded`
(RFC 7239) read, right to left, skipping hops that are themselves trusted proxies: the first
untrusted hop is the client. Hops further left were written by that client and are never read.
A hop a trusted proxy could not name (`unknown`, an obfuscated `_token`, garbage) leaves the
proxy that reported it as the client, so a bad header never makes up an address.

`X-Forwarded-For` is read when present, `Forwarded` otherwise: a proxy in front of hearth must
set (not pass through) the one it uses. uvicorn's own proxy handling (which believes loopback
by default) is off under `hearth serve`, so the peer seen here is the real socket peer; another
ASGI server in front of `app.main:app` must leave the peer alone too.

For keys, an IPv6 client stands for its whole /64: one subscriber usually holds a /64, and
per-address limits that a fresh address dodges would limit nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from functools import lru_cache

from starlette.requests import Request

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

UNKNOWN = "unknown"
"""The address of a request without a socket peer (an in-process ASGI client)."""


def parse_address(value: str) -> IPAddress | None:
    """An address as a header or a socket names it (`1.2.3.4`, `1.2.3.4:80`, `[::1]:80`)."""
    value = value.strip().strip('"')
    if value.startswith("["):
        value = value[1:].split("]", 1)[0]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]  # IPv4 with a port
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@lru_cache(maxsize=8)
def trusted_networks(proxies: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """The trusted proxies as networks: a bare address is a network of one."""
    return tuple(ipaddress.ip_network(proxy.strip(), strict=False) for proxy in proxies)


def _trusted(address: IPAddress, networks: Sequence[IPNetwork]) -> bool:
    return any(address in network for network in networks)


def _forwarded_for(header: str) -> list[str]:
    """The `for=` value of each element of a `Forwarded` header, in order."""
    hops: list[str] = []
    for element in header.split(","):
        for pair in element.split(";"):
            name, _, value = pair.strip().partition("=")
            if name.strip().lower() == "for":
                hops.append(value.strip())
    return hops


def forwarded_hops(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The client chain that proxies reported, nearest the client first."""
    forwarded_for: list[str] = []
    forwarded: list[str] = []
    for name, value in headers:
        if name == "x-forwarded-for":
            forwarded_for.extend(part.strip() for part in value.split(","))
        elif name == "forwarded":
            forwarded.extend(_forwarded_for(value))
    return forwarded_for or forwarded


def resolve(peer: str | None, hops: list[str], proxies: Sequence[str]) -> str:
    """The client's address given the socket peer, the reported hops and the trusted proxies."""
    current = parse_address(peer) if peer else None
    if current is None:
        return peer or UNKNOWN
    networks = trusted_networks(tuple(proxies))
    for hop in reversed(hops):
        if not _trusted(current, networks):
            break
        reported = parse_address(hop)
        if reported is None:
            break
        current = reported
    return str(current)


def client_address(request: Request) -> str:
    """The address a request came from, for throttling and logs."""
    peer = request.client.host if request.client else None
    proxies: Sequence[str] = request.app.state.services.settings.trusted_proxies
    hops = forwarded_hops(request.headers.items()) if proxies else []
    return resolve(peer, hops, proxies)


def address_key(address: str) -> str:
    """The address as throttling counts it: IPv4 as is, IPv6 by its /64."""
    parsed = parse_address(address)
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return address
