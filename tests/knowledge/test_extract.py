"""Reading documents within limits: each bound fails the whole document with a reason a person
can act on, and no library's own message reaches that reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.knowledge.extract import (
    CHARS_PER_BYTE,
    MAX_TEXT_BYTES,
    PDF,
    IngestFailed,
    Limits,
    extract,
)
from tests.knowledge.documents import dense_page, pdf, shared_stream_pdf


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def failure(path: Path, mime: str, limits: Limits | None = None) -> str:
    with pytest.raises(IngestFailed) as caught:
        extract(path, path.name, mime, limits)
    return str(caught.value)


def test_one_content_stream_on_a_hundred_pages_is_not_indexed(tmp_path: Path) -> None:
    data = shared_stream_pdf(dense_page(160), pages=100)
    path = write(tmp_path, "echo.pdf", data)
    reason = failure(path, PDF)
    assert reason.startswith(f"the file gives over {CHARS_PER_BYTE} times its size in text")
    assert f"from {len(data):,} bytes" in reason
    # The same page once is an ordinary document.
    assert extract(write(tmp_path, "once.pdf", shared_stream_pdf(dense_page(160), 1)), "", PDF)


def test_a_pdf_over_the_page_limit_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, "long.pdf", pdf("One.", "Two.", "Three."))
    assert failure(path, PDF, Limits(pages=2)) == (
        "the PDF has 3 pages; a PDF of over 2 pages is not indexed"
    )
    assert [c.page for c in extract(path, "long.pdf", PDF, Limits(pages=3))] == [1, 2, 3]


def test_a_document_over_the_passage_limit_is_not_indexed(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.md", b"# A\n\nOne.\n\n# B\n\nTwo.\n\n# C\n\nThree.\n")
    assert failure(path, "text/markdown", Limits(chunks=2)).startswith(
        "the document is too long: it gives over 2 passages"
    )
    assert len(extract(path, "notes.md", "text/markdown", Limits(chunks=3))) == 3


def test_a_text_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", b"word " * 300)
    assert failure(path, "text/plain", Limits(text_bytes=1024)) == (
        "the text is over 1,024 bytes; split it into smaller files"
    )
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as sparse:
        sparse.truncate(MAX_TEXT_BYTES + 1)  # refused by its size: never read
    assert failure(huge, "text/plain") == "the text is over 16 MiB; split it into smaller files"


def test_a_nul_byte_anywhere_makes_a_file_not_text(tmp_path: Path) -> None:
    path = write(tmp_path, "log.txt", b"plain text line\n" * 600 + b"\x00tail\n")
    assert failure(path, "text/plain") == "the file holds NUL bytes; it is not a text document"


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n",
        b"%PDF-1.7\n" + b"\xff" * 300,
        b"%PDF-1.4\n1 0 obj<< /Type /Catalog /Pages 2 0 R >>endobj\n"
        b"2 0 obj<< /Type /Pages /Kids [2 0 R] /Count 1 >>endobj\n"
        b"trailer<< /Root 1 0 R >>\n%%EOF\n",
    ],
)
def test_an_unreadable_pdf_says_so_without_the_parser_s_words(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path, "broken.pdf", data)
    with pytest.raises(IngestFailed) as caught:
        extract(path, path.name, PDF)
    assert str(caught.value) in ("the PDF cannot be read", "the PDF has no text layer (a scan?)")
    if str(caught.value) == "the PDF cannot be read":
        assert caught.value.detail  # what pypdf said, for the log
