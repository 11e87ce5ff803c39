"""A file's type, from its first bytes only: never its name, never what a client claims.

The formats a model may see (docs/wire.md §3) are matched here by their exact signatures first, so
what decides whether a file reaches a model never depends on a library's heuristics. SVG is
recognised next, because it is text that a browser would run as a document. Everything else
goes to `filetype`; what is left is `text/plain` when it decodes as UTF-8 without a NUL, else
`application/octet-stream`.

All of it runs on untrusted bytes, at upload, on every download and in `read_file`, so it looks
at a bounded prefix (`SNIFF_BYTES`) with code that is linear in it: no regular expression that
can backtrack.
"""

from __future__ import annotations

import codecs
import os

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

_WHITESPACE = b" \t\n\r\f\v"
_BOM = b"\xef\xbb\xbf"
_SVG_ROOT_ENDS = frozenset(b" \t\n\r\f\v>/")


def _skip_whitespace(head: bytes, at: int) -> int:
    while at < len(head) and head[at] in _WHITESPACE:
        at += 1
    return at


def _is_svg(head: bytes) -> bool:
    """Whether `head` is an XML prolog followed by the root element `<svg`.

    The prolog is an optional BOM and XML declaration, then comments, processing instructions
    and a doctype (with or without an internal subset) in any order, each ending where XML
    ends it (the first `-->`, `?>`, or `]` then `>`). It is walked from left to right with
    `find`, each byte looked at a bounded number of times, so the cost is linear in `head`
    whatever it holds: a regular expression with a repeated group of lazy parts backtracks
    exponentially on an unclosed comment.
    """
    at = len(_BOM) if head.startswith(_BOM) else 0
    while at >= 0:
        at = _skip_whitespace(head, at)
        if head.startswith(b"<svg", at):
            return len(head) > at + 4 and head[at + 4] in _SVG_ROOT_ENDS
        if head.startswith(b"<!--", at):
            end = head.find(b"-->", at + 4)
            at = -1 if end < 0 else end + 3
        elif head.startswith(b"<?", at):
            end = head.find(b"?>", at + 2)
            at = -1 if end < 0 else end + 2
        elif head.startswith(b"<!DOCTYPE", at):
            at = _doctype_end(head, at + len(b"<!DOCTYPE"))
        else:
            return False
    return False


def _doctype_end(head: bytes, at: int) -> int:
    """Where a doctype whose name starts at `at` ends, or -1 when it does not end in `head`.

    As XML has it: anything but `[` and `>`, then an optional internal subset closed by the
    first `]` that only whitespace separates from the doctype's `>`.
    """
    follower = head[at : at + 1]
    if follower.isalnum() or follower == b"_":
        return -1  # `<!DOCTYPEx`: another word, not a doctype
    close, subset = head.find(b">", at), head.find(b"[", at)
    if subset < 0 or 0 <= close < subset:
        return -1 if close < 0 else close + 1
    end = head.find(b"]", subset + 1)
    while end >= 0:
        after = _skip_whitespace(head, end + 1)
        if head.startswith(b">", after):
            return after + 1
        end = head.find(b"]", end + 1)
    return -1


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
    if _is_svg(head):
        return "image/svg+xml"
    guessed: str | None = filetype.guess_mime(head) if head else None
    if guessed:
        return guessed
    return TEXT if _is_utf8_text(head) else OCTET_STREAM


def sniff_fd(fd: int) -> str:
    """The type of the open file `fd`, read at offset 0 without moving its position."""
    return sniff(os.pread(fd, SNIFF_BYTES, 0))
