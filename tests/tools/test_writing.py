"""`write_file` and its preview: contained, never under uploads/, atomic."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pydantic_ai import ModelRetry

from app.files.roots import user_root
from app.tools.writing import MAX_WRITE_BYTES, _write, preview


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = user_root(tmp_path / "data", uuid.uuid4())
    (root / "uploads" / "1").mkdir(parents=True)
    (root / "uploads" / "1" / "report.pdf").write_bytes(b"%PDF-1.7")
    (root / "plan.md").write_text("old\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, root / "escape")
    os.symlink(root / "uploads", root / "up-link")
    return root


def test_creates_folders_and_replaces_atomically(root: Path) -> None:
    assert _write(root, "notes/day/1.md", "hi") == "notes/day/1.md created (2 bytes)."
    assert (root / "notes" / "day" / "1.md").read_text() == "hi"
    assert _write(root, "plan.md", "new\n") == "plan.md replaced (4 bytes)."
    assert (root / "plan.md").read_text() == "new\n"
    assert not [p for p in root.rglob(".hearth-write-*")]  # no temporary file is left


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../x.txt", "'..'"),
        ("/etc/passwd", "absolute"),
        ("escape/x.txt", "outside"),
        ("uploads/1/report.pdf", "uploads/"),
        ("uploads/new.txt", "uploads/"),
        ("up-link/1/report.pdf", "uploads/"),
        (".", "not the top folder"),
        ("notes\x00.txt", "NUL"),
    ],
)
def test_refused_writes_change_nothing(root: Path, path: str, message: str) -> None:
    with pytest.raises(ModelRetry, match=message):
        _write(root, path, "x")
    assert preview(root, path, "x") is None
    assert (root / "uploads" / "1" / "report.pdf").read_bytes() == b"%PDF-1.7"
    assert not (root.parent.parent / "elsewhere" / "x.txt").exists()


def test_a_folder_or_a_huge_body_is_refused(root: Path) -> None:
    (root / "docs").mkdir()
    with pytest.raises(ModelRetry, match="is a folder"):
        _write(root, "docs", "x")
    with pytest.raises(ModelRetry, match="at most"):
        _write(root, "big.txt", "x" * (MAX_WRITE_BYTES + 1))
    assert not (root / "big.txt").exists()


def test_preview_shows_the_file_before_and_after(root: Path) -> None:
    assert preview(root, "plan.md", "new\n") == ("old\n", "new\n")
    assert preview(root, "fresh.txt", "a") == ("", "a")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert preview(root, "blob.bin", "text") == ("[binary file, 3 bytes]", "text")
