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


def test_read_file_numbers_lines_and_pages(root: Path) -> None:
    from app.tools.files import _read

    (root / "long.txt").write_text("\n".join(f"line {n}" for n in range(1, 2501)))
    first = _read(root, "long.txt", 1, None)
    assert first.splitlines()[0] == "     1\tline 1"
    assert first.splitlines()[1999] == "  2000\tline 2000"
    assert first.endswith("[500 more lines; read on with start_line=2001]")
    assert _read(root, "long.txt", 2499, None).splitlines() == [
        "  2499\tline 2499",
        "  2500\tline 2500",
    ]
    assert _read(root, "docs/a.md", 1, 1) == "     1\t# A"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("escape/key.pem", "outside"),
        ("../secret/key.pem", "'..'"),
        ("docs", "is a folder"),
        ("missing.txt", "does not exist"),
        ("bin.dat", "binary"),
        ("latin.txt", "not UTF-8"),
    ],
)
def test_read_file_refuses_clearly(root: Path, path: str, message: str) -> None:
    from app.tools.files import _read

    (root / "bin.dat").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (root / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ModelRetry, match=message):
        _read(root, path, 1, None)


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),
        (b"%PDF-1.7\n" + bytes(64), "application/pdf"),
        (b"\x00\x00\x00\x18ftypmp42" + bytes(64), "video/mp4"),
    ],
)
def test_read_file_answers_a_medium_with_a_note_and_a_reference(
    root: Path, head: bytes, mime: str
) -> None:
    from pydantic_ai import ToolReturn

    from app.llm.dtl import MEDIA_KEY
    from app.tools.files import _read

    # Named as text, sniffed as what it is; read through a link inside the root.
    (root / "docs" / "chart.txt").write_bytes(head)
    os.symlink(root / "docs" / "chart.txt", root / "alias")
    result = _read(root, "alias", 1, None)
    assert isinstance(result, ToolReturn)
    size = len(head)
    assert result.return_value == (
        f"docs/chart.txt is a {mime} file of {size} bytes; it is shown to you directly when "
        "the current model can read that format"
    )
    assert result.metadata == {MEDIA_KEY: [{"path": "docs/chart.txt", "mime": mime, "size": size}]}
