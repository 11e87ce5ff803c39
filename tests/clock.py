"""A clock the tests move forward instead of sleeping (idle expiry, throttle windows, backoff)."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.clock import Clock


class ShiftedClock(Clock):
    """The real clock moved on by whatever the test has advanced it.

    `advance` moves the wall clock and the monotonic clock together. `reset` (between tests)
    takes the wall clock back to real time; the monotonic clock keeps its lead, since going back
    would break what it promises (and stall whatever waits on it until real time caught up).
    """

    def __init__(self) -> None:
        self.offset = timedelta()
        self._monotonic_offset = 0.0

    def now(self) -> datetime:
        return super().now() + self.offset

    def monotonic(self) -> float:
        return super().monotonic() + self._monotonic_offset

    def advance(self, **delta: float) -> None:
        step = timedelta(**delta)
        if step < timedelta():
            raise ValueError("a clock only moves forward")
        self.offset += step
        self._monotonic_offset += step.total_seconds()

    def reset(self) -> None:
        self.offset = timedelta()
