"""Which model may see which medium: the capability gating table of docs/wire.md §3."""

from __future__ import annotations

import pytest

from app.files.media import admitted, viewable_sentence

TYPES = {
    "image/png": "vision",
    "image/jpeg": "vision",
    "image/gif": "vision",
    "image/webp": "vision",
    "application/pdf": "document",
    "video/mp4": "video",
    "video/webm": "video",
    "video/quicktime": "video",
    "image/svg+xml": None,
    "text/plain": None,
    "application/octet-stream": None,
}


@pytest.mark.parametrize(
    "capabilities", [(), ("vision",), ("document",), ("video",), ("vision", "document", "video")]
)
def test_each_capability_unlocks_only_its_own_formats(capabilities: tuple[str, ...]) -> None:
    for mime, needed in TYPES.items():
        assert admitted(mime, capabilities) is (needed is not None and needed in capabilities), (
            mime,
            capabilities,
        )


def test_the_sentence_names_what_can_be_viewed() -> None:
    assert viewable_sentence(()) == ""
    assert viewable_sentence(("document",)) == (
        "You can view PDF documents directly: read_file shows them to you."
    )
    assert viewable_sentence(("vision", "video")) == (
        "You can view images (PNG, JPEG, GIF, WebP) and videos (MP4, 3GPP, QuickTime, WebM, AVI, "
        "FLV, MPEG) directly: read_file shows them to you."
    )
