"""OpenAI-compatible requests (OpenAI, Moonshot/Kimi, LM Studio, Ollama, OpenRouter) as docs/wire.md
§2 and §2c specify.

pydantic-ai maps the history to Chat Completions messages; this subclass changes two things:

- in `kimi_system_tools` mode the catalogue tools stay out of the top-level `tools`, and the
  tools a call activated are declared by a `{"role": "system", "tools": [...]}` message (no
  `content` key) right after the tool results of the assistant message that activated them
  (and after that round's media message). It is only ever placed after its anchor, so every
  request's messages before it stay byte-identical. The library's own reveal appends a
  different system message at the end of the request (docs/wire.md §5), hence the override of the
  per-request mapping (`_map_user_message`, the step that renders one `ModelRequest`);
- the dynamic tail is a final `system` message, after the conversation (every mode);
- a PDF goes as a `file` part named as the user's file (the library names it `filename.pdf`),
  and a video as Moonshot's `video_url` part (the library has none), docs/wire.md §3.

The tool definitions a request carries are known to `_map_messages` but not to the per-request
step, so they travel in a context variable for the duration of one mapping (a model instance
is shared by concurrent turns; the variable is per task).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from openai.types import chat
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from app.llm.config import DtlMode
from app.llm.dtl import (
    ACTIVATED_KEY,
    activated_by,
    group_of,
    is_tail,
    profile_dtl_mode,
    tools_by_group,
)
from app.llm.wire.tool_schemas import SchemasOnce


@dataclass(frozen=True, slots=True)
class _Mapping:
    groups: dict[str, list[ToolDefinition]]
    settings: ModelSettings


_MAPPING: ContextVar[_Mapping | None] = ContextVar("hearth_openai_mapping", default=None)


class HearthOpenAIChatModel(SchemasOnce, OpenAIChatModel):
    # Video goes as `video_url` below, so the profile may say so when the model has `video`.
    _unsupported_file_inputs = frozenset()

    @property
    def dtl_mode(self) -> DtlMode:
        """The profile's DTL mode when it is Kimi's system tools, `none` otherwise."""
        mode = profile_dtl_mode(self.profile)
        return "kimi_system_tools" if mode == "kimi_system_tools" else "none"

    def _get_tool_choice(self, model_settings: Any, model_request_parameters: Any) -> Any:
        tools, choice = super()._get_tool_choice(model_settings, model_request_parameters)
        if self.dtl_mode != "kimi_system_tools":
            return tools, choice
        catalogue = {
            t.name for t in model_request_parameters.function_tools if group_of(t) is not None
        }
        tools = [t for t in tools if t["function"]["name"] not in catalogue]
        return tools, (choice if tools else None)

    async def _map_messages(
        self,
        messages: Sequence[ModelMessage],
        model_request_parameters: ModelRequestParameters,
        *,
        model_settings: ModelSettings | None = None,
    ) -> list[chat.ChatCompletionMessageParam]:
        groups = tools_by_group(model_request_parameters.function_tools)
        mapping = _Mapping(groups, model_settings or {})
        token = _MAPPING.set(mapping)
        try:
            mapped = await super()._map_messages(
                messages, model_request_parameters, model_settings=model_settings
            )
            if self.dtl_mode == "kimi_system_tools":
                self._declare_moved(messages, mapped)
            return mapped
        finally:
            _MAPPING.reset(token)

    def _declare_moved(self, messages: Sequence[ModelMessage], mapped: list[Any]) -> None:
        """Activations a summary moved onto the first surviving message are declared right after
        the system blocks (instructions, then the summary), before that message."""
        moved = [
            str(group)
            for message in messages
            if isinstance(message, ModelRequest)
            for group in (message.metadata or {}).get(ACTIVATED_KEY) or ()
        ]
        declared = self._declare(moved) if moved else None
        if declared is None:
            return
        at = 0
        while at < len(mapped) and mapped[at].get("role") == "system" and "content" in mapped[at]:
            at += 1
        mapped.insert(at, declared)

    async def _map_user_message(
        self, message: ModelRequest
    ) -> AsyncIterable[chat.ChatCompletionMessageParam]:
        tails = [p for p in message.parts if is_tail(p)]
        kept = [p for p in message.parts if not is_tail(p)]
        if kept:
            async for item in super()._map_user_message(replace(message, parts=kept)):
                yield item
        if self.dtl_mode == "kimi_system_tools":
            declared = self._system_tools(kept)
            if declared:
                yield declared
        for tail in tails:
            yield chat.ChatCompletionSystemMessageParam(role="system", content=tail.content)

    async def _map_binary_content_item(self, item: BinaryContent) -> Any:
        if item.is_document and item.media_type == "application/pdf":
            name = item.identifier if item.identifier.endswith(".pdf") else "document.pdf"
            return {"type": "file", "file": {"filename": name, "file_data": item.data_uri}}
        if item.is_video:
            return {"type": "video_url", "video_url": {"url": item.data_uri}}
        return await super()._map_binary_content_item(item)

    def _system_tools(self, parts: Sequence[Any]) -> Any | None:
        """The system-tools message for the groups activated in this round."""
        groups = [
            group
            for part in parts
            if isinstance(part, ToolReturnPart)
            for group in activated_by(part)
        ]
        return self._declare(groups)

    def _declare(self, groups: Sequence[str]) -> Any | None:
        """`{"role": "system", "tools": [...]}` for `groups`, deduplicated by tool name."""
        mapping = _MAPPING.get()
        if mapping is None:
            return None
        tools: dict[str, Any] = {}
        for group in groups:
            for tool in mapping.groups.get(group, ()):
                tools.setdefault(tool.name, self._map_tool_definition(tool, mapping.settings))
        if not tools:
            return None
        return {"role": "system", "tools": list(tools.values())}
