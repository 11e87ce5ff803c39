"""The one place hearth reads the time, so tests can move it instead of sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ShiftedClock(Clock):
    """Wall-clock time moved by an offset that tests control (idle expiry, throttle windows)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)

    def reset(self) -> None:
        self.offset = timedelta()
