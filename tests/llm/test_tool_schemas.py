"""A tool's provider-fit schema is walked once and handed out again, as the library makes it,
through the copies pydantic-ai gives each request."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.output import OutputObjectDefinition
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from app.llm.wire import tool_schemas
from app.llm.wire.anthropic import HearthAnthropicModel
from app.llm.wire.openai import HearthOpenAIChatModel
from app.llm.wire.openai_client import HearthAsyncOpenAI
from tests.fakes.providers import FakeOpenAI, Reply, ToolCall
from tests.support import TLS

WALKS: list[dict[str, Any]] = []


class CountingTransformer(OpenAIJsonSchemaTransformer):
    """OpenAI's strict-mode transformer, counting the schemas it walks."""

    def walk(self) -> dict[str, Any]:
        WALKS.append(self.schema)
        return super().walk()


def schema(field: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            field: {"type": "string", "description": "a path"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": [field],
        "additionalProperties": False,
    }


def openai_model(
    transformer: type[OpenAIJsonSchemaTransformer] | None = CountingTransformer,
) -> HearthOpenAIChatModel:
    profile: Any = {"json_schema_transformer": transformer}
    return HearthOpenAIChatModel("gpt", provider=OpenAIProvider(api_key="k"), profile=profile)


def library_fit(model: Model, params: ModelRequestParameters) -> ModelRequestParameters:
    """What pydantic-ai itself makes of the parameters (its method, without the mixin)."""
    return Model.customize_request_parameters(model, params)


def parameters(*tools: ToolDefinition, output: OutputObjectDefinition | None = None) -> Any:
    return ModelRequestParameters(function_tools=list(tools), output_object=output)


@pytest.fixture(autouse=True)
def no_walks() -> None:
    WALKS.clear()


def test_the_second_request_walks_nothing_and_sends_what_the_library_makes() -> None:
    model = openai_model()
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"))
    listed = ToolDefinition(name="list_files", parameters_json_schema=schema("folder"))
    expected = library_fit(model, parameters(read, listed))
    WALKS.clear()

    first = model.customize_request_parameters(parameters(read, listed))
    assert len(WALKS) == 2
    # The next request's tools are new definitions (a `prepare` replaces its description)
    # over the same schema objects: nothing is walked again.
    described = replace(read, description="Reads a file. It can view images.")
    second = model.customize_request_parameters(parameters(described, listed))
    assert len(WALKS) == 2

    assert first.function_tools == expected.function_tools
    assert second.function_tools[1] == expected.function_tools[1]
    assert second.function_tools[0] == replace(
        expected.function_tools[0], description="Reads a file. It can view images."
    )
    # Strict mode was decided by the walk, and kept with it.
    assert [t.strict for t in second.function_tools] == [t.strict for t in expected.function_tools]
    assert read.strict is None and second.function_tools[0].strict is False
    kept = second.function_tools[0].parameters_json_schema
    assert kept is first.function_tools[0].parameters_json_schema


def test_a_strict_tool_gets_the_rewritten_schema_every_time() -> None:
    model = openai_model()
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"), strict=True)
    expected = library_fit(model, parameters(read)).function_tools
    assert expected[0].parameters_json_schema != read.parameters_json_schema  # rewritten
    for _ in range(3):
        assert model.customize_request_parameters(parameters(read)).function_tools == expected
    assert len(WALKS) == 2  # the library's, then the first request's


def test_an_equal_schema_is_not_walked_again_and_a_changed_one_is() -> None:
    model = openai_model()
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"))
    other = replace(read, parameters_json_schema=schema("file"))
    expected = library_fit(model, parameters(other)).function_tools
    WALKS.clear()
    first = model.customize_request_parameters(parameters(read))
    # The library hands every request a fresh copy of each schema: equal content, no walk.
    again = model.customize_request_parameters(
        parameters(replace(read, parameters_json_schema=schema("path")))
    )
    assert len(WALKS) == 1
    assert again.function_tools == first.function_tools
    # A catalogue whose tool changed brings another schema under the same name: walked.
    changed = model.customize_request_parameters(parameters(other))
    assert len(WALKS) == 2
    assert changed.function_tools == expected
    strict = model.customize_request_parameters(parameters(replace(read, strict=False)))
    assert len(WALKS) == 3
    assert strict.function_tools[0].strict is False


def test_a_schema_changed_in_place_after_its_walk_is_walked_again() -> None:
    """The cache holds its own copy of what it walked, not the caller's object."""
    model = openai_model()
    source = schema("path")
    read = ToolDefinition(name="read_file", parameters_json_schema=source)
    model.customize_request_parameters(parameters(read))
    source["properties"]["path"]["description"] = "another"
    fitted = model.customize_request_parameters(parameters(read))
    assert len(WALKS) == 2
    assert fitted.function_tools == library_fit(model, parameters(read)).function_tools


class Shaping(AbstractCapability[None]):
    """A capability that prepares each request, as the turn's do: the library then copies every
    tool's schema for each request (`copy_tool_definitions`)."""

    async def prepare_model_request(
        self, ctx: RunContext[None], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return request_context


async def test_runs_through_the_library_walk_each_tool_once() -> None:
    """Two runs, the first of two requests, through pydantic-ai's own copies: one walk a tool."""

    def list_files(path: str) -> str:
        """List files."""
        return f"{path}: a.txt"

    def read_file(path: str, limit: int | None = None) -> str:
        """Read a file."""
        return "text"

    async with FakeOpenAI() as fake:
        fake.script(Reply(tool_calls=[ToolCall("list_files", {"path": "."})]), Reply("One."))
        fake.script(Reply("Two."))
        http = httpx2.AsyncClient(verify=TLS)
        try:
            client = HearthAsyncOpenAI(
                base_url=fake.base_url, api_key="k", max_retries=0, http_client=http
            )
            profile: Any = {"json_schema_transformer": CountingTransformer}
            model = HearthOpenAIChatModel(
                "gpt-4.1", provider=OpenAIProvider(openai_client=client), profile=profile
            )
            agent = Agent(model, tools=[list_files, read_file], capabilities=[Shaping()])
            assert (await agent.run("Which files?")).output == "One."
            assert (await agent.run("And now?")).output == "Two."
        finally:
            await http.aclose()
        requests = fake.model_requests
    assert len(requests) == 3
    assert len(WALKS) == 2  # one a tool, though three requests each had their own copies
    stock = OpenAIChatModel("gpt-4.1", provider=OpenAIProvider(api_key="k"), profile=profile)
    expected = library_fit(
        stock,
        parameters(
            *[tool.tool_def for tool in agent._function_toolset.tools.values()],
        ),
    )
    sent = [
        {"name": t.name, "parameters": t.parameters_json_schema, "strict": t.strict}
        for t in expected.function_tools
    ]
    for request in requests:
        tools = [
            {
                "name": tool["function"]["name"],
                "parameters": tool["function"]["parameters"],
                "strict": tool["function"].get("strict", False),
            }
            for tool in request.body["tools"]
        ]
        assert tools == sent


def test_the_output_object_is_still_the_librarys_to_fit() -> None:
    model = openai_model()
    output = OutputObjectDefinition(json_schema=schema("answer"), name="final")
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"))
    fitted = model.customize_request_parameters(parameters(read, output=output))
    assert fitted.output_object == library_fit(model, parameters(read, output=output)).output_object
    assert fitted.output_object is not None
    assert output.json_schema in WALKS  # walked by the library's own transformer
    assert output.strict is None and fitted.output_object.strict is not None


def test_the_oldest_walks_go_past_the_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_schemas, "SIZE", 2)
    model = openai_model()
    tools = [ToolDefinition(name=f"t{i}", parameters_json_schema=schema("p")) for i in range(3)]
    for tool in tools:
        model.customize_request_parameters(parameters(tool))
    assert len(model._walked or {}) == 2
    model.customize_request_parameters(parameters(tools[0]))  # evicted: walked again
    assert len(WALKS) == 4
    model.customize_request_parameters(parameters(tools[2]))  # kept
    assert len(WALKS) == 4


def test_a_model_without_a_transformer_is_left_to_the_library() -> None:
    model = openai_model(None)
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"))
    assert model.customize_request_parameters(parameters(read)).function_tools == [read]
    assert WALKS == []


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_both_model_classes_keep_their_walks(kind: str) -> None:
    model: OpenAIChatModel | AnthropicModel
    if kind == "openai":
        model = HearthOpenAIChatModel("gpt", provider=OpenAIProvider(api_key="k"))
    else:
        model = HearthAnthropicModel("claude", provider=AnthropicProvider(api_key="k"))
    read = ToolDefinition(name="read_file", parameters_json_schema=schema("path"))
    expected = library_fit(model, parameters(read))
    assert model.customize_request_parameters(parameters(read)) == expected
    assert model.customize_request_parameters(parameters(read)) == expected
    assert len(model._walked or {}) == 1
