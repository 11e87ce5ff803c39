"""The one place hearth reads the time, so tests can move it instead of sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock(Clock):
    """A clock that moves only when told to (tests, benchmarks)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> None:
        self._now += timedelta(**delta)
