"""`sniff` on real signatures: docs/wire.md §3's formats exactly, SVG, filetype's, text, rest."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.files.sniff import SNIFF_BYTES, _is_svg, sniff, sniff_fd

PAD = b"\x00" * 32


def ftyp(brand: bytes, *compatible: bytes) -> bytes:
    """An ISO base media `ftyp` box: size, `ftyp`, major brand, minor version, brands."""
    body = b"ftyp" + brand + b"\x00\x00\x02\x00" + b"".join(compatible)
    return (len(body) + 4).to_bytes(4, "big") + body + b"\x00\x00\x00\x08free" + PAD


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + PAD, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + PAD, "image/jpeg"),
        (b"\xff\xd8\xff\xe1\x00\x18Exif\x00\x00" + PAD, "image/jpeg"),
        (b"GIF87a\x01\x00\x01\x00" + PAD, "image/gif"),
        (b"GIF89a\x01\x00\x01\x00" + PAD, "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 " + PAD, "image/webp"),
        (ftyp(b"isom", b"isom", b"iso2", b"avc1", b"mp41"), "video/mp4"),
        (ftyp(b"mp42", b"mp42", b"isom"), "video/mp4"),
        (ftyp(b"iso5", b"iso5", b"dash"), "video/mp4"),
        (ftyp(b"M4V ", b"M4V ", b"mp42"), "video/mp4"),
        (ftyp(b"3gp5", b"3gp5", b"isom"), "video/3gpp"),
        (ftyp(b"3gp4"), "video/3gpp"),
        (ftyp(b"qt  ", b"qt  "), "video/quicktime"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01webm" + PAD, "video/webm"),
        (b"RIFF\x24\x00\x00\x00AVI LIST" + PAD, "video/x-msvideo"),
        (b"FLV\x01\x05\x00\x00\x00\x09" + PAD, "video/x-flv"),
        (b"\x00\x00\x01\xba\x44\x00\x04\x00" + PAD, "video/mpeg"),
        (b"\x00\x00\x01\xb3\x14\x00\xf0\x13" + PAD, "video/mpeg"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "application/pdf"),
        (b"%PDF-2.0\n", "application/pdf"),
    ],
)
def test_wire_signatures(head: bytes, mime: str) -> None:
    assert sniff(head) == mime


@pytest.mark.parametrize(
    "head",
    [
        b'<svg xmlns="http://www.w3.org/2000/svg"/>',
        b"<svg>\n</svg>",
        b"  \n\t<svg\nwidth='1'>",
        b'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg">',
        b"\xef\xbb\xbf<?xml version='1.0'?><svg/>",
        b'<?xml version="1.0" standalone="no"?>\n<!-- Created with Inkscape -->\n'
        b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        b'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg version="1.1">',
        b'<!DOCTYPE svg [ <!ENTITY e "x"> ]>\n<svg>&e;</svg>',
        b"<?xml-stylesheet href='a.css'?>\n<svg>",
    ],
)
def test_svg_is_recognised_after_an_optional_prolog(head: bytes) -> None:
    assert sniff(head) == "image/svg+xml"


@pytest.mark.parametrize(
    "head",
    [b"<html><svg></svg></html>", b"hello <svg>", b"<svgz>", b"<SVG>", b"<!-- <svg> -->"],
)
def test_text_that_merely_mentions_svg_is_text(head: bytes) -> None:
    assert sniff(head) == "text/plain"


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + PAD, "application/zip"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + PAD, "application/gzip"),
        (b"SQLite format 3\x00" + PAD, "application/x-sqlite3"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt " + PAD, "audio/x-wav"),
        (ftyp(b"M4A ", b"M4A ", b"isom"), "audio/mp4"),
        (ftyp(b"heic", b"mif1", b"heic"), "image/heic"),
        (b"BM\x36\x00\x0c\x00\x00\x00\x00\x00\x36\x00\x00\x00" + PAD, "image/bmp"),
    ],
)
def test_other_formats_come_from_filetype(head: bytes, mime: str) -> None:
    assert sniff(head) == mime


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"plain ascii\n",
        "Grüße, 世界 🌍\n".encode(),
        b"a" * (SNIFF_BYTES - 1) + "é".encode(),  # cut in the middle of its last character
        b"x" * (SNIFF_BYTES - 2) + "🌍".encode(),
        b"\xef\xbb\xbfwith a BOM",
        b"<!doctype html><script>alert(1)</script>",
    ],
)
def test_utf8_without_nul_is_text(head: bytes) -> None:
    assert sniff(head) == "text/plain"


@pytest.mark.parametrize(
    "head",
    [
        b"caf\xe9 au lait",  # Latin-1, not UTF-8
        b"text with a \x00 NUL",
        b"\xc3\x28 invalid continuation",
        b"\x00\x9f\x92\x96\x00\x01\x02\x03",
        b"\xff\xfeU\x00T\x00F\x00-\x001\x006\x00",
    ],
)
def test_anything_else_is_octet_stream(head: bytes) -> None:
    assert sniff(head) == "application/octet-stream"


def test_only_the_head_counts() -> None:
    assert sniff(b"a" * SNIFF_BYTES + b"\x00\xff") == "text/plain"
    assert sniff(b"a" * 100 + b"%PDF-1.7\n") == "text/plain"  # signatures count at the start


def test_sniff_fd_reads_the_head(tmp_path: Path) -> None:
    png = tmp_path / "picture.txt"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + PAD)
    fd = os.open(png, os.O_RDONLY)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        assert sniff_fd(fd) == "image/png"
        assert os.lseek(fd, 0, os.SEEK_CUR) == 5  # the position is left where it was
    finally:
        os.close(fd)


# The pattern SVG detection used before it became a linear walk, with each prolog item made
# atomic: a comment, processing instruction or doctype ends where XML ends it (the first `-->`,
# `?>`, `]>`) and is never stretched to a later one, which is what made the old pattern
# backtrack exponentially on an unclosed comment after many closed ones. The walk must agree
# with it on inputs small enough for a backtracking engine.
_REFERENCE_SVG = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*"
    rb"(?:<\?xml\b[^>]*\?>\s*)?"
    rb"(?:(?:(?><!--.*?-->)|(?><\?.*?\?>)|(?><!DOCTYPE\b[^\[>]*(?:\[.*?\])?\s*>))\s*)*"
    rb"<svg[\s>/]",
    re.DOTALL,
)

_PROLOG_PIECES = [
    b"<!--",
    b"-->",
    b"<!---->",
    b"<?",
    b"?>",
    b"<?xml version='1.0'?>",
    b"<!DOCTYPE",
    b"<!DOCTYPE svg",
    b"[",
    b"]",
    b">",
    b" ",
    b"\n",
    b"x",
    b"<svg",
    b"<svg>",
    b"<svg/",
    b"\xef\xbb\xbf",
]


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.lists(st.sampled_from(_PROLOG_PIECES), max_size=9))
def test_svg_detection_agrees_with_the_reference_pattern(pieces: list[bytes]) -> None:
    head = b"".join(pieces)
    assert _is_svg(head) == bool(_REFERENCE_SVG.match(head))


def _sniff_bounded(head: bytes) -> str:
    """`sniff(head)`, or a failure when it has not answered after a very generous bound.

    A hang guard, not a speed claim: the walk takes well under a millisecond on these inputs,
    the old pattern longer than the age of the universe (bench/adversarial.py measures the
    real figures). The daemon thread lets a hung sniff fail the test instead of hanging it.
    """
    answers: list[str] = []
    worker = threading.Thread(target=lambda: answers.append(sniff(head)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    if not answers:
        pytest.fail("sniff did not answer: super-linear on this input")
    return answers[0]


@pytest.mark.parametrize(
    "head",
    [
        b"<!---->" * 26 + b"<!--",  # 186 bytes that froze the old pattern for 7 s
        b"<!---->" * 1170 + b"<!--",
        b"<?" * 4096,
        b"<!DOCTYPE [" + b"]" * 8000,
        b"<!DOCTYPE [" + b"] " * 4000,
        b"<?a?>" * 1638 + b"<svg",
        b"\xef\xbb\xbf" + b" " * 8000,
    ],
)
def test_adversarial_prologs_are_sniffed_as_text(head: bytes) -> None:
    assert _sniff_bounded(head) == "text/plain"


def test_a_long_prolog_before_svg_is_still_svg() -> None:
    head = b"<!-- a -->\n" * 700 + b"<svg>"
    assert len(head) < SNIFF_BYTES
    assert _sniff_bounded(head) == "image/svg+xml"
