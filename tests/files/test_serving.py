"""The /data containment helpers: a path swapped for a link after the check is still refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import app.api.data as data
from app.api.data import NotServable, open_inside
from app.files.roots import user_root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = user_root(tmp_path / "data", "u")
    (root / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    return root


def test_opens_a_regular_file_inside(root: Path) -> None:
    handle, info = open_inside(root, "a.txt")
    with handle:
        assert handle.read() == b"inside"
        assert info.st_size == 6


def test_a_link_swapped_in_after_the_check_is_refused(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check saw a regular file; by the time it is opened, the path is a link that leads out.
    os.symlink(tmp_path / "secret.txt", root / "swapped.txt")
    monkeypatch.setattr(data, "resolve_inside", lambda _root, _relative: root / "swapped.txt")
    with pytest.raises(NotServable):
        open_inside(root, "swapped.txt")


def test_the_opened_file_is_what_gets_served_even_if_its_path_changes(
    root: Path, tmp_path: Path
) -> None:
    handle, _ = open_inside(root, "a.txt")
    with handle:
        (root / "a.txt").unlink()
        os.symlink(tmp_path / "secret.txt", root / "a.txt")
        # The response reads through this entry, which is the file that was checked.
        assert Path(f"/proc/self/fd/{handle.fileno()}").read_bytes() == b"inside"


@pytest.mark.parametrize("relative", ["../secret.txt", "/etc/passwd", ".", "missing", "a\x00"])
def test_outside_missing_or_not_a_file(root: Path, relative: str) -> None:
    with pytest.raises(NotServable):
        open_inside(root, relative)
