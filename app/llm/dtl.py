"""What the provider-specific request shapers need to know, carried on pydantic-ai's own objects.

Deferred tool loading is rendered by the model that serves a request (docs/wire.md §2), so each
model class reads the same neutral facts and shapes its own wire:

- a catalogue tool's `ToolDefinition.metadata` names its group (`GROUP_KEY`), so a model can
  tell always-on tools from catalogue tools;
- the `ToolReturnPart` of the call that activated groups carries their names in its metadata
  (`ACTIVATED_KEY`): the anchor of an activation, set live by `activate_tools` and again by the
  message builder from the `activated_tools` rows, so a reset removes it from later requests;
- a tool return that produced media (`read_file` on an image, say) carries their references,
  `[{path, mime, size}]`, in its metadata (`MEDIA_KEY`); a user request carries its
  attachments the same way; the media router turns them into parts or notes per model;
- the dynamic tail (date and time, budget notices) is a `SystemPromptPart` marked with
  `TAIL_REF` at the very end of the outgoing request, placed by `RequestShape`; each provider
  renders it after the conversation.

Metadata never reaches a provider by itself: pydantic-ai sends neither field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, ToolReturnPart
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.tools import ToolDefinition

from app.llm.config import DtlMode

GROUP_KEY = "hearth_group"
ACTIVATED_KEY = "hearth_activated"
MEDIA_KEY = "hearth_media"
MESSAGE_ID_KEY = "hearth_message_id"
"""On a user request: the id of its stored message, which names the question it starts."""
TAIL_REF = "hearth.tail"


def group_of(tool: ToolDefinition) -> str | None:
    """The catalogue group a tool belongs to; None for the always-on tools."""
    return (tool.metadata or {}).get(GROUP_KEY)


def activated_by(part: ToolReturnPart) -> list[str]:
    """The groups whose activation is anchored at this tool return (empty for most returns)."""
    metadata = part.metadata if isinstance(part.metadata, dict) else {}
    groups = metadata.get(ACTIVATED_KEY)
    return [str(g) for g in groups] if isinstance(groups, list) else []


def tools_by_group(tools: Iterable[ToolDefinition]) -> dict[str, list[ToolDefinition]]:
    """Catalogue tools per group, in declaration (catalogue) order."""
    grouped: dict[str, list[ToolDefinition]] = {}
    for tool in tools:
        group = group_of(tool)
        if group is not None:
            grouped.setdefault(group, []).append(tool)
    return grouped


def is_tail(part: object) -> TypeGuard[SystemPromptPart]:
    return isinstance(part, SystemPromptPart) and part.dynamic_ref == TAIL_REF


def with_tail(messages: Sequence[ModelMessage], text: str) -> list[ModelMessage]:
    """A new message list whose last request ends with the tail; nothing is edited in place."""
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        message = out[index]
        if isinstance(message, ModelRequest):
            tail = SystemPromptPart(content=text, dynamic_ref=TAIL_REF)
            out[index] = replace(message, parts=[*message.parts, tail])
            break
    return out


def split_tail(messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], str | None]:
    """The messages without the tail (new objects where it was removed), and the tail's text."""
    out: list[ModelMessage] = []
    tail: str | None = None
    for message in messages:
        if isinstance(message, ModelRequest) and any(is_tail(p) for p in message.parts):
            tail = "\n\n".join(p.content for p in message.parts if is_tail(p))
            kept = [p for p in message.parts if not is_tail(p)]
            if not kept:
                continue
            message = replace(message, parts=kept)
        out.append(message)
    return out, tail


class HearthProfile(ModelProfile, total=False):
    """pydantic-ai's model profile with the DTL mode the model's provider renders (docs/wire.md
    §2). Profiles merge by dict spread, so the key survives the provider's defaults."""

    dtl_mode: DtlMode


def profile_dtl_mode(profile: ModelProfile) -> DtlMode:
    mode = profile.get("dtl_mode", "none")
    return mode if mode in ("anthropic_tool_reference", "kimi_system_tools") else "none"


def dtl_mode_of(model: Any) -> str:
    """The DTL mode of the model serving a request (through any wrapper), `none` by default.

    A provider's model class renders only its own mode (`HearthAnthropicModel.dtl_mode`); a
    model without DTL support (the demo) reads `none`."""
    while model is not None:
        mode = getattr(model, "dtl_mode", None)
        if isinstance(mode, str):
            return mode
        model = getattr(model, "wrapped", None)
    return "none"
