"""The per-user storage quota: every file under a user's root counts, whoever wrote it.

What a user holds is measured on disk (uploads, files written by tools, media kept from tools),
not kept as a running total in the database: a total would drift from the disk with every crash
between a write and its commit, and the disk is what the quota protects. Walking a root costs a
`stat` per file, a few milliseconds for thousands of files, paid once per upload request or
write. Requests running at the same moment each see what was on disk when they began, so
together they may pass the quota by at most their own sizes; the next one is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.files.uploads import TooLarge


class OverQuota(TooLarge):
    """Storing this would take the user's files past their storage quota."""

    def __init__(self, quota: int, used: int) -> None:
        super().__init__(
            quota,
            f"your files would pass your storage quota of {human_bytes(quota)} "
            f"({human_bytes(used)} in use); delete some files and try again",
        )
        self.used = used


@dataclass(frozen=True, slots=True)
class Allowance:
    """What a user may still store: their quota and what their files took when measured."""

    quota: int
    used: int

    def check(self, adding: int) -> None:
        """OverQuota unless `adding` more bytes still fit."""
        if self.used + adding > self.quota:
            raise OverQuota(self.quota, self.used)


def allowance(root: Path, quota: int) -> Allowance:
    """The user's allowance now (blocking: it walks their files)."""
    return Allowance(quota, storage_used(root))


def storage_used(root: Path) -> int:
    """Bytes of every regular file under `root` (links not followed). Blocking."""
    total = 0
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue  # removed while we looked
        except OSError:
            continue
    return total


def human_bytes(size: int) -> str:
    """`10 GiB`, `1.5 MiB`, `300 bytes`."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            if unit == "bytes":
                return f"{size} bytes"
            return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"
        value /= 1024
    raise AssertionError("unreachable")
