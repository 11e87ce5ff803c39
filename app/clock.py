"""The one place hearth reads the time, so tests can move it instead of sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class Clock:
    """Wall-clock time in UTC, and a monotonic clock for measuring and spacing out."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go back: durations, waits between tries."""
        return time.monotonic()
