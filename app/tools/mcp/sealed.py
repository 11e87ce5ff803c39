"""Credentials sealed at rest: AES-256-GCM under a key derived from hearth's secret key.

A copy of the database alone opens no user's MCP account. The key is derived (HKDF-SHA256, its
own label) rather than the secret key itself, so the cookie-signing key and this one never meet;
each value has a fresh 96-bit nonce, and the row it belongs to (user and server) is bound in as
associated data, so a sealed token moved to another user's row does not open.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VERSION = b"\x01"
NONCE_BYTES = 12


class Unsealable(Exception):
    """A sealed value that does not open with this key for this row (changed key or bytes)."""


class Sealer:
    def __init__(self, secret_key: str) -> None:
        key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"hearth mcp credentials v1"
        ).derive(secret_key.encode())
        self._aead = AESGCM(key)

    def seal(self, plain: bytes, bound_to: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return VERSION + nonce + self._aead.encrypt(nonce, plain, bound_to.encode())

    def open(self, sealed: bytes, bound_to: str) -> bytes:
        if len(sealed) < 1 + NONCE_BYTES or sealed[:1] != VERSION:
            raise Unsealable("not a sealed value of this version")
        nonce, body = sealed[1 : 1 + NONCE_BYTES], sealed[1 + NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, body, bound_to.encode())
        except InvalidTag:
            raise Unsealable("the value does not open with this key for this row") from None
