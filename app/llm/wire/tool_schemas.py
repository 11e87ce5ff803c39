"""Each tool's JSON schema made fit for its provider once, not on every request.

Before each request pydantic-ai runs every tool's parameter schema through the profile's
transformer (`Model.customize_request_parameters`): OpenAI's strict-mode rewrite, say, which
walks the whole schema. The schemas are the same from request to request (the built-in tools'
are made once with the agent, a catalogue tool's come with its pinned catalogue), so the walk
was the same work every time: 57 us per tool on the benchmark machine, 0.23 ms for the four
built-in tools on the way to each first token (`bench/turn_overhead.py` a), more with every
activated group.

`SchemasOnce` keeps the walked schema beside a copy of the schema it came from, under the
tool's name (with the transformer and strictness), and hands it out again while the tool's
schema is equal to that copy. Equality, not identity: a capability with
`prepare_model_request` (the turn's have three) makes pydantic-ai give every request fresh
copies of the tools' schemas (`copy_tool_definitions`), so a schema object is never seen twice
and a cache keyed by it walked every tool on every request; comparing two small dicts is done in
C, a few µs against the walk's 57. The copy is the cache's own, so what a hook might later do
to the schema it was handed changes nothing here. The oldest entries go past `SIZE`. The walk
itself is the library's (`_customize_tool_def`), errors and all.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import replace
from typing import Any, cast

from pydantic_ai._json_schema import JsonSchemaTransformer
from pydantic_ai.models import Model, ModelRequestParameters, _customize_tool_def
from pydantic_ai.tools import ToolDefinition

SIZE = 1024
"""Walked schemas kept per model: the built-in tools and a few hundred catalogue tools."""

_Key = tuple[str, bool | None, type[JsonSchemaTransformer]]


class SchemasOnce:
    """A model mixin: `customize_request_parameters` with each tool's walk kept."""

    _walked: OrderedDict[_Key, tuple[dict[str, Any], dict[str, Any], bool | None]] | None = None

    def customize_request_parameters(
        self, model_request_parameters: ModelRequestParameters
    ) -> ModelRequestParameters:
        transformer = cast(Model, self).profile.get("json_schema_transformer")
        customize = super().customize_request_parameters  # type: ignore[misc]
        if transformer is None:
            return customize(model_request_parameters)  # type: ignore[no-any-return]
        params = model_request_parameters
        # The library's own customisation, for what it covers beside the tools (the output
        # object), then the tools from what was kept.
        bare = replace(params, function_tools=[], output_tools=[])
        rest: ModelRequestParameters = customize(bare)
        return replace(
            rest,
            function_tools=[self._fitted(transformer, tool) for tool in params.function_tools],
            output_tools=[self._fitted(transformer, tool) for tool in params.output_tools],
        )

    def _fitted(
        self, transformer: type[JsonSchemaTransformer], tool: ToolDefinition
    ) -> ToolDefinition:
        walked = self._walked
        if walked is None:
            walked = self._walked = OrderedDict()
        source = tool.parameters_json_schema
        key = (tool.name, tool.strict, transformer)
        kept = walked.get(key)
        if kept is not None and kept[0] == source:
            walked.move_to_end(key)
            return replace(tool, parameters_json_schema=kept[1], strict=kept[2])
        fitted = _customize_tool_def(transformer, tool)
        walked[key] = (copy.deepcopy(source), fitted.parameters_json_schema, fitted.strict)
        if len(walked) > SIZE:
            walked.popitem(last=False)
        return fitted
