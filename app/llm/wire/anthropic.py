"""Anthropic requests shaped as docs/wire.md §2 and §2c specify.

pydantic-ai maps the history to Messages API parameters; this subclass takes its finished
parameters and applies hearth's layout in one place (`_prepare_messages_create`, the single
step every request, streamed or not, goes through), because the library's own deferred-tool
rendering differs from the wire hearth promises (docs/wire.md §5: it invents a `search_tools`
exchange and adds a server-side search tool):

- the dynamic tail becomes the last text block of the last user message, after the
  conversation, so nothing that changes per request sits before it;
- in `anthropic_tool_reference` mode every catalogue tool is declared with
  `defer_loading: true` on every request (the array is byte-identical from request to request),
  the activating call's `tool_result` is made of `tool_reference` blocks, and prompt caching is
  on: breakpoints on the last always-on tool, the static system block and the last block before
  the tail (three of Anthropic's four);
- in `none` mode the catalogue tools of groups not yet activated are left out (the toolset
  already does that) and no breakpoint is set: caching is on exactly in the deferred mode.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.anthropic import AnthropicModel

from app.llm.config import DtlMode
from app.llm.dtl import (
    ACTIVATED_KEY,
    activated_by,
    group_of,
    profile_dtl_mode,
    split_tail,
    tools_by_group,
)
from app.llm.wire.tool_schemas import SchemasOnce

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


class HearthAnthropicModel(SchemasOnce, AnthropicModel):
    @property
    def dtl_mode(self) -> DtlMode:
        """The profile's DTL mode when it is Anthropic's own, `none` otherwise."""
        mode = profile_dtl_mode(self.profile)
        return "anthropic_tool_reference" if mode == "anthropic_tool_reference" else "none"

    async def _prepare_messages_create(
        self,
        messages: list[ModelMessage],
        model_settings: Any,
        model_request_parameters: ModelRequestParameters,
        **kwargs: Any,
    ) -> Any:
        messages, tail = split_tail(messages)
        prepared = await super()._prepare_messages_create(
            messages, model_settings, model_request_parameters, **kwargs
        )
        if self.dtl_mode == "anthropic_tool_reference":
            moved = _moved_groups(messages)
            _defer_catalogue_tools(prepared.tools, model_request_parameters, moved)
            _reference_activated_tools(
                prepared.anthropic_messages, messages, model_request_parameters
            )
            prepared.system_prompt = _cached_system(prepared.system_prompt)
            _mark_last_block(prepared.anthropic_messages)
        if tail:
            _append_tail(prepared.anthropic_messages, tail)
        return prepared


def _moved_groups(messages: list[ModelMessage]) -> set[str]:
    """Groups whose activation a summary moved onto a surviving user message."""
    moved: set[str] = set()
    for message in messages:
        if isinstance(message, ModelRequest):
            groups = (message.metadata or {}).get(ACTIVATED_KEY)
            if isinstance(groups, list):
                moved.update(str(group) for group in groups)
    return moved


def _defer_catalogue_tools(
    tools: list[Any], parameters: ModelRequestParameters, moved: set[str]
) -> None:
    """Catalogue tools deferred; those of activations a summary moved are declared outright
    (their `tool_reference` went with the covered messages), so the array changes once, at the
    summary, and is byte-stable again after it."""
    catalogue = {
        t.name
        for t in parameters.function_tools
        if group_of(t) is not None and group_of(t) not in moved
    }
    last_always_on: dict[str, Any] | None = None
    for tool in tools:
        if tool.get("name") in catalogue:
            tool["defer_loading"] = True
            tool.pop("cache_control", None)
        else:
            last_always_on = tool
    if last_always_on is not None:
        last_always_on["cache_control"] = dict(EPHEMERAL)


def _reference_activated_tools(
    mapped: list[Any], messages: list[ModelMessage], parameters: ModelRequestParameters
) -> None:
    """The activating call's `tool_result` content becomes one `tool_reference` per tool."""
    grouped = tools_by_group(parameters.function_tools)
    references: dict[str, list[str]] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and (groups := activated_by(part)):
                names = [t.name for g in groups for t in grouped.get(g, ())]
                if names:
                    references[part.tool_call_id] = list(dict.fromkeys(names))
    if not references:
        return
    for message in mapped:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") in references:
                block["content"] = [
                    {"type": "tool_reference", "tool_name": name}
                    for name in references[block["tool_use_id"]]
                ]


def _cached_system(system: str | list[Any]) -> list[Any]:
    """The system parameter as blocks, the static block (the first) carrying the breakpoint."""
    blocks: list[Any] = [{"type": "text", "text": system}] if isinstance(system, str) else system
    if blocks:
        blocks[0]["cache_control"] = dict(EPHEMERAL)
    return blocks


def _mark_last_block(mapped: list[Any]) -> None:
    """The conversation so far is read back from cache by the next request."""
    if not mapped:
        return
    content = mapped[-1].get("content")
    if isinstance(content, str):
        mapped[-1]["content"] = content = [{"type": "text", "text": content}]
    if content:
        content[-1]["cache_control"] = dict(EPHEMERAL)


def _append_tail(mapped: list[Any], tail: str) -> None:
    block = {"type": "text", "text": tail}
    if mapped and mapped[-1].get("role") == "user":
        content = mapped[-1].get("content")
        if isinstance(content, str):
            mapped[-1]["content"] = [{"type": "text", "text": content}, block]
        else:
            content.append(block)
    else:
        mapped.append({"role": "user", "content": [block]})
