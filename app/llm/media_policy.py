"""What media one serving model may be sent (docs/wire.md §3), read from the model itself.

The model's profile was built from hearth's configured capabilities (`capability_profile`), so
the profile's input flags are the capabilities; the provider decides the per-file caps and the
per-request budget. Both the request-time media router and `read_file`'s per-model description
ask this one place.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pydantic_ai.models import Model

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Policy:
    """What one serving model may be sent."""

    capabilities: frozenset[str]
    caps: dict[str, int]
    request_bytes: int

    @classmethod
    def of(cls, model: Model) -> Policy:
        profile = model.profile
        capabilities = {
            capability
            for capability, flag in (
                ("vision", "supports_image_input"),
                ("document", "supports_document_input"),
                ("video", "supports_video_input"),
            )
            if profile.get(flag, False)
        }
        if _is_anthropic(model):
            capabilities.discard("video")  # Anthropic takes no video: the note stays
            caps = {"vision": 3840 * 1024, "document": 20 * MiB, "video": 32 * MiB}
            return cls(frozenset(capabilities), caps, 24 * MiB)
        caps = {"vision": 10 * MiB, "document": 32 * MiB, "video": 32 * MiB}
        return cls(frozenset(capabilities), caps, 48 * MiB)


def _is_anthropic(model: Model) -> bool:
    anthropic = sys.modules.get("pydantic_ai.models.anthropic")
    if anthropic is None:
        return False  # no Anthropic model exists before its module is loaded: don't load it
    current: object = model
    while current is not None:
        if isinstance(current, anthropic.AnthropicModel):
            return True
        current = getattr(current, "wrapped", None)
    return False
