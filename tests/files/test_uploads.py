"""Upload storage: safe filenames, and files that are complete or not there at all."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from app.files.uploads import IncomingFile, TooLarge, remove_upload, safe_filename


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("/abs/path/a.txt", "a.txt"),
        ("C:\\Users\\me\\b.txt", "b.txt"),
        ("mixed/sep\\arators/c.txt", "c.txt"),
        ("dir/", "file"),
        ("new\nline\r\t.txt", "newline.txt"),
        ("nul\x00byte.txt", "nulbyte.txt"),
        ("del\x7fand\x9fc1.txt", "delandc1.txt"),
        ("evil\u202etxt.exe", "eviltxt.exe"),
        (".bashrc", "bashrc"),
        ("...", "file"),
        (". . .x", "x"),
        ("  spaced name.md  ", "spaced name.md"),
        ("", "file"),
        (" \t ", "file"),
        (".", "file"),
        ("..", "file"),
        ("naïve café.txt", "naïve café.txt"),
        ("inner . dots..txt", "inner . dots..txt"),
    ],
)
def test_safe_filename(name: str, safe: str) -> None:
    assert safe_filename(name) == safe


def test_long_names_keep_their_extension_within_255_bytes() -> None:
    name = safe_filename("a" * 400 + ".pdf")
    assert name == "a" * 251 + ".pdf"
    multibyte = safe_filename("日" * 200 + ".txt")
    assert multibyte.endswith("日.txt") and len(multibyte.encode()) <= 255
    multibyte.encode().decode()  # never cut inside a character
    no_extension = safe_filename("b" * 300)
    assert no_extension == "b" * 255
    long_extension = safe_filename("c." + "d" * 300)
    assert len(long_extension.encode()) == 255 and long_extension.startswith("c.")


def test_an_incoming_file_appears_under_its_name_only_when_finished(tmp_path: Path) -> None:
    incoming = IncomingFile(tmp_path, "../Report.txt", limit=100)
    incoming.write(b"hello ")
    incoming.write(b"world")
    assert [p.name.startswith(".partial-") for p in incoming.folder.iterdir()] == [True]
    incoming.finish()
    assert [p.name for p in incoming.folder.iterdir()] == ["Report.txt"]
    assert (tmp_path / incoming.path).read_bytes() == b"hello world"
    assert incoming.path == f"uploads/{incoming.id}/Report.txt"
    assert (incoming.size, incoming.mime) == (11, "text/plain")
    assert incoming.sha256 == hashlib.sha256(b"hello world").hexdigest()
    remove_upload(tmp_path, incoming.id)
    assert not incoming.folder.exists()
    remove_upload(tmp_path, uuid.uuid4())  # nothing there: no error


def test_the_limit_applies_while_writing(tmp_path: Path) -> None:
    incoming = IncomingFile(tmp_path, "big.bin", limit=10)
    incoming.write(b"0123456789")
    with pytest.raises(TooLarge):
        incoming.write(b"x")
    assert incoming.size == 10
    incoming.discard()
    assert not incoming.folder.exists()
