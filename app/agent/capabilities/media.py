"""Media in the outgoing request, decided per serving model (docs/wire.md §3).

The stored rows and the run's history hold references only (`[{path, mime, size}]` on a user
request's attachments and on a `read_file` return). This capability turns them into what the
serving model gets, in `prepare_model_request` on a copy of the request (pydantic-ai keeps such
changes out of the run's history, so nothing here is ever stored):

- Only the current question carries bytes: its user message's attachments and the tool media of
  its rounds. Every older attachment is a text note, and older tool media stay the neutral note
  their tool message already is, so an earlier question is never billed again.
- A medium goes in natively when the model's capabilities admit its sniffed type, it fits the
  provider's per-file cap (an image over it is scaled down until it fits) and the request's
  budget (at most 4 media per message, 48 MiB per request, 24 MiB on Anthropic). Otherwise an
  attachment becomes `[attached file: <path> (<mime>, <size> bytes)]`, so the model can still
  open it with `read_file`.
- Tool media go into one user message right after the tool results of their round, each medium
  preceded by its label (`... Not provided by the user. [hearth/tool-media]`), so the model can
  tell them from what the user sent. A medium that cannot be read or decoded goes with neither
  bytes nor label.

Bytes are read again, contained in the user's file root and checked on the open descriptor, when
a request is built; each file is read once per turn.
"""

from __future__ import annotations

import asyncio
import io
import os
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext

from app.files.media import CAPABILITY_OF, admitted
from app.files.roots import OutsideRoot, resolve_inside
from app.llm.dtl import MEDIA_KEY, MESSAGE_ID_KEY
from app.llm.media_policy import Policy
from app.tools.deps import TurnDeps

MiB = 1024 * 1024
MAX_MEDIA_PER_MESSAGE = 4
LABEL_TAG = "[hearth/tool-media]"


@dataclass(slots=True)
class _Budget:
    left: int


def attachment_note(medium: dict[str, Any]) -> str:
    return f"[attached file: {medium['path']} ({medium['mime']}, {medium['size']} bytes)]"


def media_label(index: int, total: int, tool: str, call_id: str, medium: dict[str, Any]) -> str:
    return (
        f"Media {index} of {total} from {tool} (call {call_id}): {medium['path']} "
        f"({medium['mime']}, {medium['size']} bytes). Not provided by the user. {LABEL_TAG}"
    )


class MediaRouter(AbstractCapability[TurnDeps]):
    def __init__(self, root: Path, question_id: int) -> None:
        self.root = root
        self.question_id = question_id
        """The user message that started the question in progress: its turn is the current one."""
        self._read: dict[tuple[str, int], bytes | None] = {}

    async def prepare_model_request(
        self, ctx: RunContext[TurnDeps], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = request_context.messages
        if not any(_carries_media(m) for m in messages):
            return request_context
        policy = Policy.of(request_context.model)
        start = next(
            (
                i
                for i, m in enumerate(messages)
                if isinstance(m, ModelRequest)
                and (m.metadata or {}).get(MESSAGE_ID_KEY) == self.question_id
            ),
            len(messages),
        )
        budget = _Budget(policy.request_bytes)
        routed: list[ModelMessage] = []
        for index, message in enumerate(messages):
            if isinstance(message, ModelRequest) and _carries_media(message):
                message = await self._route(message, index >= start, policy, budget)
            routed.append(message)
        return replace(request_context, messages=routed)

    async def _route(
        self, request: ModelRequest, current: bool, policy: Policy, budget: _Budget
    ) -> ModelRequest:
        parts = list(request.parts)
        attachments = (request.metadata or {}).get(MEDIA_KEY) or []
        if attachments:
            for i, part in enumerate(parts):
                if isinstance(part, UserPromptPart):
                    content = await self._attachments(part, attachments, current, policy, budget)
                    parts[i] = replace(part, content=content)
                    break
        if current:
            shown = await self._tool_media(parts, policy, budget)
            if shown:
                parts.append(UserPromptPart(content=shown))
        return replace(request, parts=parts)

    async def _attachments(
        self,
        part: UserPromptPart,
        attachments: list[dict[str, Any]],
        current: bool,
        policy: Policy,
        budget: _Budget,
    ) -> list[UserContent]:
        content: list[UserContent] = []
        if isinstance(part.content, str):
            if part.content:
                content.append(part.content)
        else:
            content.extend(part.content)
        inlined = 0
        for medium in attachments:
            loaded = None
            if current and inlined < MAX_MEDIA_PER_MESSAGE:
                loaded = await self._medium(medium, policy, budget)
            if loaded is None:
                content.append(attachment_note(medium))
            else:
                content.append(loaded)
                inlined += 1
        return content

    async def _tool_media(
        self, parts: list[Any], policy: Policy, budget: _Budget
    ) -> list[UserContent]:
        found: list[tuple[ToolReturnPart, dict[str, Any], BinaryContent]] = []
        for part in parts:
            if not isinstance(part, ToolReturnPart) or not isinstance(part.metadata, dict):
                continue
            for medium in part.metadata.get(MEDIA_KEY) or []:
                if len(found) == MAX_MEDIA_PER_MESSAGE:
                    break
                loaded = await self._medium(medium, policy, budget)
                if loaded is not None:
                    found.append((part, medium, loaded))
        shown: list[UserContent] = []
        for index, (part, medium, loaded) in enumerate(found, start=1):
            label = media_label(index, len(found), part.tool_name, part.tool_call_id, medium)
            shown.extend([label, loaded])
        return shown

    async def _medium(
        self, medium: dict[str, Any], policy: Policy, budget: _Budget
    ) -> BinaryContent | None:
        """The medium as the model gets it, or None when it may not or cannot go in."""
        mime = str(medium.get("mime", ""))
        if not admitted(mime, policy.capabilities):
            return None
        capability = CAPABILITY_OF[mime]
        cap = policy.caps[capability]
        key = (str(medium.get("path", "")), cap)
        if key not in self._read:
            self._read[key] = await asyncio.to_thread(
                _load, self.root, key[0], mime, capability, cap
            )
        data = self._read[key]
        if data is None or len(data) > budget.left:
            return None
        budget.left -= len(data)
        media_type = "image/png" if mime == "image/gif" and data[:4] == b"\x89PNG" else mime
        return BinaryContent(data=data, media_type=media_type, identifier=Path(key[0]).name)


def _carries_media(message: ModelMessage) -> bool:
    if not isinstance(message, ModelRequest):
        return False
    if (message.metadata or {}).get(MEDIA_KEY):
        return True
    return any(
        isinstance(p, ToolReturnPart) and isinstance(p.metadata, dict) and p.metadata.get(MEDIA_KEY)
        for p in message.parts
    )


def _load(root: Path, path: str, mime: str, capability: str, cap: int) -> bytes | None:
    """The bytes to send: read contained, images checked (and scaled down to fit the cap)."""
    try:
        target = resolve_inside(root, path)
        with target.open("rb") as handle:
            real = Path(os.path.realpath(f"/proc/self/fd/{handle.fileno()}"))
            if real != root and root not in real.parents:
                return None
            size = os.fstat(handle.fileno()).st_size
            if capability != "vision" and size > cap:
                return None
            if size > max(cap, 64 * MiB):
                return None  # an image this large is not worth decoding to scale it
            data = handle.read()
    except (OSError, OutsideRoot):
        return None
    if capability == "vision":
        return _fit_image(data, mime, cap)
    return data


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def without_broken_ancillary_chunks(data: bytes) -> bytes | None:
    """A PNG less its ancillary chunks whose checksum is wrong, as libpng reads it (it warns and
    skips them); None when it is no PNG, is cut short, or a critical chunk is broken.

    Pillow refuses such a file outright, and real servers send them (the reference MCP server's
    own logo carries a colour profile with a bad checksum), so hearth sends what a browser shows.
    """
    if not data.startswith(PNG_SIGNATURE):
        return None
    kept = [PNG_SIGNATURE]
    at = len(PNG_SIGNATURE)
    dropped = False
    while at < len(data):
        if at + 12 > len(data):
            return None
        length = int.from_bytes(data[at : at + 4], "big")
        end = at + 12 + length
        if end > len(data):
            return None
        kind = data[at + 4 : at + 8]
        crc = int.from_bytes(data[end - 4 : end], "big")
        if zlib.crc32(data[at + 4 : end - 4]) == crc:
            kept.append(data[at:end])
        elif kind[0] & 0x20:  # lowercase first letter: ancillary
            dropped = True
        else:
            return None
        at = end
        if kind == b"IEND":
            break
    return b"".join(kept) if dropped else None


def _fit_image(data: bytes, mime: str, cap: int) -> bytes | None:
    """The image if it decodes and fits, else scaled down until it does; None if it can't."""
    from PIL import Image, UnidentifiedImageError

    try:
        try:
            with Image.open(io.BytesIO(data)) as probe:
                probe.verify()
        except (UnidentifiedImageError, SyntaxError, OSError):
            repaired = without_broken_ancillary_chunks(data) if mime == "image/png" else None
            if repaired is None:
                return None
            data = repaired
            with Image.open(io.BytesIO(data)) as probe:
                probe.verify()
        if len(data) <= cap:
            return data
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            fmt = {"image/jpeg": "JPEG", "image/webp": "WEBP"}.get(mime, "PNG")
            image: Image.Image = opened
            if fmt == "JPEG" and image.mode not in ("RGB", "L"):
                image = image.convert("RGB")
            scale = (cap / len(data)) ** 0.5
            for _ in range(12):
                scale *= 0.9
                width = max(1, int(image.width * scale))
                height = max(1, int(image.height * scale))
                out = io.BytesIO()
                image.resize((width, height), Image.Resampling.LANCZOS).save(out, format=fmt)
                if out.tell() <= cap:
                    return out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None
    return None
