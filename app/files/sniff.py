"""A file's type, from its first bytes only: never its name, never what a client claims.

The formats a model may see (WIRE.md §3) are matched here by their exact signatures first, so
what decides whether a file reaches a model never depends on a library's heuristics. SVG is
recognised next, because it is text that a browser would run as a document. Everything else
goes to `filetype`; what is left is `text/plain` when it decodes as UTF-8 without a NUL, else
`application/octet-stream`.
"""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path

import filetype

SNIFF_BYTES = 8192
"""How many leading bytes a caller reads for `sniff` (`filetype` looks at no more either)."""

OCTET_STREAM = "application/octet-stream"
TEXT = "text/plain"

_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"FLV\x01", "video/x-flv"),
    (b"\x00\x00\x01\xba", "video/mpeg"),
    (b"\x00\x00\x01\xb3", "video/mpeg"),
    (b"%PDF-", "application/pdf"),
)
_RIFF_FORMS = {b"WEBP": "image/webp", b"AVI ": "video/x-msvideo"}

# ISO base media brands (the four bytes after `ftyp`) that mean a video container. Other
# brands (M4A audio, HEIC and AVIF images, JPEG 2000, ...) are left to `filetype`.
_QUICKTIME_BRANDS = frozenset({b"qt  "})
_3GPP_BRAND_PREFIXES = (b"3gp", b"3gg", b"3ge", b"3gs")
_MP4_BRANDS = frozenset(
    {b"isom", b"mp41", b"mp42", b"mp71", b"avc1", b"av01", b"dash", b"mmp4", b"f4v "}
    | {b"iso" + bytes([digit]) for digit in b"23456789"}
    | {b"M4V ", b"M4VH", b"M4VP", b"MSNV", b"NDAS", b"XAVC"}
)

# An optional BOM and XML prolog (declaration, comments, processing instructions, a doctype
# with or without an internal subset), then the root element `<svg`.
_SVG = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*"
    rb"(?:<\?xml\b[^>]*\?>\s*)?"
    rb"(?:(?:<!--.*?-->|<\?.*?\?>|<!DOCTYPE\b[^\[>]*(?:\[.*?\])?\s*>)\s*)*"
    rb"<svg[\s>/]",
    re.DOTALL,
)


def _ftyp(head: bytes) -> str | None:
    if head[4:8] != b"ftyp":
        return None
    brand = head[8:12]
    if brand in _QUICKTIME_BRANDS:
        return "video/quicktime"
    if brand.startswith(_3GPP_BRAND_PREFIXES):
        return "video/3gpp"
    if brand in _MP4_BRANDS:
        return "video/mp4"
    return None


def _signature(head: bytes) -> str | None:
    for prefix, mime in _PREFIXES:
        if head.startswith(prefix):
            return mime
    if head[:4] == b"RIFF" and head[8:12] in _RIFF_FORMS:
        return _RIFF_FORMS[head[8:12]]
    return _ftyp(head)


def _is_utf8_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        # Not final: a multi-byte character cut at the end of the head is no reason to refuse.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def sniff(head: bytes) -> str:
    """The MIME type of a file whose first bytes (up to SNIFF_BYTES of them) are `head`."""
    head = head[:SNIFF_BYTES]
    known = _signature(head)
    if known is not None:
        return known
    if _SVG.match(head):
        return "image/svg+xml"
    guessed = filetype.guess_mime(head) if head else None
    if guessed:
        return guessed
    return TEXT if _is_utf8_text(head) else OCTET_STREAM


def sniff_fd(fd: int) -> str:
    """The type of the open file `fd`, read at offset 0 without moving its position."""
    return sniff(os.pread(fd, SNIFF_BYTES, 0))


def sniff_path(path: Path) -> str:
    """The type of the file at `path`."""
    with path.open("rb") as handle:
        return sniff(handle.read(SNIFF_BYTES))
