"""`list_files` and the containment check under it: nothing outside the user's root, ever."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pydantic_ai import ModelRetry

from app.files.roots import OutsideRoot, resolve_inside, user_root
from app.tools.files import _list


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = user_root(tmp_path / "data", uuid.uuid4())
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("# A\n")
    (root / "notes.txt").write_text("hello")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.pem").write_text("no")
    os.symlink(outside, root / "escape")
    os.symlink(root / "docs", root / "docs-link")
    return root


def test_lists_folders_first_with_sizes(root: Path) -> None:
    listing = _list(root, ".")
    assert listing.splitlines() == [
        ". holds 3 entries:",
        "docs/",
        "docs-link/",
        "notes.txt (5 bytes)",
    ]
    assert _list(root, "docs") == "docs holds 1 entry:\ndocs/a.md (4 bytes)"


@pytest.mark.parametrize(
    "path",
    ["..", "../..", "docs/../..", "/etc", "/", "escape", "escape/key.pem", "a\x00b", "~/x"],
)
def test_anything_outside_is_refused(root: Path, path: str) -> None:
    with pytest.raises(ModelRetry):
        _list(root, path)


def test_missing_and_file_paths_are_clear_errors(root: Path) -> None:
    with pytest.raises(ModelRetry, match="does not exist"):
        _list(root, "nope")
    with pytest.raises(ModelRetry, match="is a file"):
        _list(root, "notes.txt")


def test_resolve_inside_follows_links_then_checks(root: Path) -> None:
    assert resolve_inside(root, "docs-link/a.md") == root / "docs" / "a.md"
    with pytest.raises(OutsideRoot):
        resolve_inside(root, "escape/key.pem")
    assert resolve_inside(root, ".") == root
