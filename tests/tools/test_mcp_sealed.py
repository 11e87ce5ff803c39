"""Credentials sealed at rest: they open only with the same secret key, for the same row."""

from __future__ import annotations

import pytest

from app.tools.mcp.sealed import Sealer, Unsealable


def test_a_sealed_value_opens_for_its_row_with_its_key_only() -> None:
    sealer = Sealer("the secret key")
    sealed = sealer.seal(b'{"access_token": "at-1"}', "user-a/github")
    assert b"at-1" not in sealed
    assert sealer.open(sealed, "user-a/github") == b'{"access_token": "at-1"}'
    assert sealer.seal(b"same", "r") != sealer.seal(b"same", "r")  # a fresh nonce each time
    with pytest.raises(Unsealable):
        sealer.open(sealed, "user-b/github")  # moved to another user's row
    with pytest.raises(Unsealable):
        Sealer("another key").open(sealed, "user-a/github")
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(Unsealable):
        sealer.open(flipped, "user-a/github")
    for broken in (b"", b"\x02" + sealed[1:], sealed[:5]):
        with pytest.raises(Unsealable):
            sealer.open(broken, "user-a/github")
