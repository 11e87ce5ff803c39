"""The media a model may be shown (docs/wire.md §3): which capability admits which sniffed type, and
the words hearth uses for them.

One table, read by `read_file` (is this file a medium?), by its per-model description (what
can this model view?) and by the request-time media router (may this model get these bytes?).
"""

from __future__ import annotations

from collections.abc import Collection

CAPABILITY_OF: dict[str, str] = {
    "image/png": "vision",
    "image/jpeg": "vision",
    "image/gif": "vision",
    "image/webp": "vision",
    "application/pdf": "document",
    "video/mp4": "video",
    "video/3gpp": "video",
    "video/quicktime": "video",
    "video/webm": "video",
    "video/x-msvideo": "video",
    "video/x-flv": "video",
    "video/mpeg": "video",
}
"""Sniffed type -> the model capability that admits it."""

_VIEWABLE = (
    ("vision", "images (PNG, JPEG, GIF, WebP)"),
    ("document", "PDF documents"),
    ("video", "videos (MP4, 3GPP, QuickTime, WebM, AVI, FLV, MPEG)"),
)


def is_medium(mime: str) -> bool:
    return mime in CAPABILITY_OF


def admitted(mime: str, capabilities: Collection[str]) -> bool:
    """Whether a model with `capabilities` may be shown a file of type `mime`."""
    capability = CAPABILITY_OF.get(mime)
    return capability is not None and capability in capabilities


def viewable_sentence(capabilities: Collection[str]) -> str:
    """The sentence `read_file`'s description ends with; '' for a model that views nothing."""
    kinds = [words for capability, words in _VIEWABLE if capability in capabilities]
    if not kinds:
        return ""
    listed = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
    return f"You can view {listed} directly: read_file shows them to you."


def media_note(path: str, mime: str, size: int) -> str:
    """What `read_file` answers for a medium (the medium itself follows when the model can)."""
    return (
        f"{path} is a {mime} file of {size} bytes; it is shown to you directly when the "
        "current model can read that format"
    )
