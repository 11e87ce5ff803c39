"""Argon2id password hashing, run off the event loop.

Hashing is deliberately slow (tens of milliseconds of CPU), so it runs in a worker thread.
Logins for unknown emails still verify against a fixed hash, so the answer takes as long
whether or not the account exists.
"""

from __future__ import annotations

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
_DUMMY_HASH = _hasher.hash("hearth-timing-equaliser")


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(_hasher.hash, password)


def _verify(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(stored: str | None, password: str) -> bool:
    """True when `password` matches `stored`; `None` (no such user) costs the same and fails."""
    if stored is None:
        await anyio.to_thread.run_sync(_verify, _DUMMY_HASH, password + "\x00")
        return False
    return await anyio.to_thread.run_sync(_verify, stored, password)
