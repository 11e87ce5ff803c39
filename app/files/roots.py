"""Each user's file root, and the one containment check every file access goes through.

A path from a model or a client is resolved under the root with every symlink followed, and
refused unless the result is still inside the root: `..`, absolute paths and links that lead
out all fail the same check. Callers re-check at the moment they open the file, so a link
swapped in between a check and a read can't escape either.

What the operating system says about a path (`OSError`) names the absolute host path, which no
user or model may see: `os_error_reason` words the error without it, for the caller to put
beside the path as the user gave it.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path


class OutsideRoot(ValueError):
    """A path that does not stay inside the user's file root."""


def user_root(data_dir: Path, user_id: uuid.UUID | str) -> Path:
    """The user's file root, created on first use."""
    root = (data_dir / "users" / str(user_id)).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def resolve_inside(root: Path, relative: str) -> Path:
    """`relative` resolved under `root` (links followed); OutsideRoot unless it stays inside."""
    if "\x00" in relative:
        raise OutsideRoot("path contains a NUL byte")
    candidate = Path(relative)
    if candidate.is_absolute():
        raise OutsideRoot("absolute paths are not allowed; paths are relative to your files")
    if any(part == ".." for part in candidate.parts):
        raise OutsideRoot("'..' is not allowed in paths")
    try:
        resolved = (root / candidate).resolve()
    except RuntimeError as exc:  # a loop of symbolic links (Python 3.11 reports it so)
        raise OutsideRoot("the path runs into a loop of symbolic links") from exc
    if resolved != root and root not in resolved.parents:
        raise OutsideRoot("path leads outside your files")
    return resolved


def display_path(root: Path, path: Path) -> str:
    """A path as the user and the model see it: relative to the root, `.` for the root."""
    relative = path.relative_to(root).as_posix()
    return relative or "."


_REASONS = {
    errno.ENAMETOOLONG: "the name is too long",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "it does not exist",
    errno.EEXIST: "something of that name is already there",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "the path runs into a loop of symbolic links",
    errno.ENOSPC: "no space is left on the server's disk",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the files are read-only",
}


def os_error_reason(exc: OSError) -> str:
    """What went wrong, in plain words and without any path (the exception's text has one)."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    if exc.errno is not None:
        return os.strerror(exc.errno).lower()
    return "the file could not be accessed"
