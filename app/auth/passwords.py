"""Argon2id password hashing, run off the event loop a few at a time, and the password policy.

Hashing is deliberately slow (tens of milliseconds of CPU and 64 MiB of memory each), so it runs
in a pool of its own of `SLOTS` threads (about one per core): at most that many hash or verify at
once in a process, and the rest wait their turn in the pool's queue. Without that bound a burst of
sign-ups or sign-ins ran one hash per request in parallel, each holding its 64 MiB, and the
process grew by gigabytes while every request got slower. Queued callers wait; none is refused.
The pool's threads run at a lower CPU priority (nice 5; Linux lets a thread lower its own), so
the event loop, and every other request with it, comes first while a burst is hashed; not the
lowest, so other busy processes on the machine slow sign-ins down but never starve them.

Logins for unknown emails still verify against a fixed hash, so the answer takes as long
whether or not the account exists.

The policy refuses passwords that are only whitespace and the most common passwords, from the
frequency list that zxcvbn ships (30,000 passwords seen in real leaks), compared ignoring case
and surrounding whitespace. The list is a maintained package's, not one written here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

T = TypeVar("T")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


SLOTS = max(1, _cores())
"""How many hashes or verifications run at once in this process."""

_hasher = PasswordHasher()
_DUMMY_HASH = _hasher.hash("hearth-timing-equaliser")


def _lower_priority() -> None:
    with contextlib.suppress(AttributeError, OSError):  # elsewhere than Linux: as it is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 5)


_pool = ThreadPoolExecutor(SLOTS, "hearth-password", initializer=_lower_priority)


async def _in_pool(function: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(_pool, function, *args)


def _hash(password: str) -> str:
    return _hasher.hash(password)


def _verify(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    return await _in_pool(_hash, password)


async def verify_password(stored: str | None, password: str) -> bool:
    """True when `password` matches `stored`; `None` (no such user) costs the same and fails."""
    if stored is None:
        await _in_pool(_verify, _DUMMY_HASH, password + "\x00")
        return False
    return await _in_pool(_verify, stored, password)


@cache
def _common_passwords() -> frozenset[str]:
    from zxcvbn.frequency_lists import FREQUENCY_LISTS

    return frozenset(FREQUENCY_LISTS["passwords"])


def password_problem(password: str) -> str | None:
    """Why `password` may not be chosen, or None when it may (length is checked by the schema)."""
    stripped = password.strip()
    if not stripped:
        return "a password cannot be only whitespace"
    if stripped.lower() in _common_passwords():
        return "this password is one of the most common passwords; choose another"
    return None
