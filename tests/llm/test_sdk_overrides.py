"""Every private SDK method hearth overrides, pinned: its signature and the effect hearth needs.

hearth subclasses SDK classes and overrides their private methods (app/llm/wire/openai_client.py,
openai_wire.py, anthropic_wire.py). Private names carry no compatibility promise, and
pyproject.toml's `~=` bounds let a new patch release in, so for each override this file checks:

- **signature**: the SDK class still defines the method, with the parameters (names, kinds, and
  which have defaults) and the sync/async shape the override was written against, and the
  override still accepts every argument the SDK's method takes;
- **behaviour**: a request driven through the real SDK path (the model `build_model` builds, the
  provider SDK's client, HTTP to a fake provider) carries what only the override puts there, so
  an SDK that stops calling the method, or calls it with other arguments, fails naming it. The
  client override is watched by two probe subclasses around it, one on each side, since its
  effect (validation instead of `construct_type`) builds equal chunks.

The private SDK names the overrides call or mutate (rather than override) get the same signature
pin, and a completeness check finds every name hearth's SDK subclasses define that the SDK also
defines: an override added without a pin here fails, and so does an SDK release that starts
using a name hearth's own helpers already have (which would silently override it).

That the SDKs are declared dependencies at all is tests/test_dependencies.py's concern.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletionChunk
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, create_async_httpx2_client
from pydantic_ai.models import anthropic as pai_anthropic
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from app.llm.config import ProviderConfig
from app.llm.dtl import ACTIVATED_KEY, GROUP_KEY, TAIL_REF
from app.llm.factory import MAX_RETRIES, build_model, model_settings
from app.llm.registry import ModelRegistry
from app.llm.wire.anthropic import HearthAnthropicModel
from app.llm.wire.openai import HearthOpenAIChatModel
from app.llm.wire.openai_client import HearthAsyncOpenAI
from tests.fakes.providers import FakeAnthropic, FakeOpenAI, FakeProviderServer, Reply

# --- what was overridden, and the SDK signature it was written against ----------------------


@dataclass(frozen=True)
class Pin:
    """A private SDK method hearth overrides or calls, as it was when hearth was written.

    `signature` lists the parameters as Python writes them, without annotations: names, kinds
    (`/`, `*`, `*args`, `**kwargs`) and `=...` for a parameter with a default. `shape` is `def`,
    `async def` or `async generator`. `hearth` is the overriding class (None: only called).
    """

    label: str
    sdk: type
    name: str
    signature: str
    shape: str
    hearth: type | None = None


OVERRIDES = [
    Pin(
        "openai.AsyncOpenAI._process_response_data",
        AsyncOpenAI,
        "_process_response_data",
        "(self, *, data, cast_to, response)",
        "def",
        HearthAsyncOpenAI,
    ),
    Pin(
        "pydantic_ai.models.openai.OpenAIChatModel._get_tool_choice",
        OpenAIChatModel,
        "_get_tool_choice",
        "(self, model_settings, model_request_parameters)",
        "def",
        HearthOpenAIChatModel,
    ),
    Pin(
        "pydantic_ai.models.openai.OpenAIChatModel._map_messages",
        OpenAIChatModel,
        "_map_messages",
        "(self, messages, model_request_parameters, *, model_settings=...)",
        "async def",
        HearthOpenAIChatModel,
    ),
    Pin(
        "pydantic_ai.models.openai.OpenAIChatModel._map_user_message",
        OpenAIChatModel,
        "_map_user_message",
        "(self, message)",
        "async generator",
        HearthOpenAIChatModel,
    ),
    Pin(
        "pydantic_ai.models.openai.OpenAIChatModel._map_binary_content_item",
        OpenAIChatModel,
        "_map_binary_content_item",
        "(self, item)",
        "async def",
        HearthOpenAIChatModel,
    ),
    Pin(
        "pydantic_ai.models.anthropic.AnthropicModel._prepare_messages_create",
        AnthropicModel,
        "_prepare_messages_create",
        "(self, messages, model_settings, model_request_parameters, *, compaction=...)",
        "async def",
        HearthAnthropicModel,
    ),
]

UNSUPPORTED_FILE_INPUTS = "pydantic_ai.models.openai.OpenAIChatModel._unsupported_file_inputs"
"""A class attribute override: hearth empties it so that video goes out (as `video_url`)."""
SDK_UNSUPPORTED_FILE_INPUTS = frozenset({"video"})

CALLED = [
    # `HearthOpenAIChatModel._declare` maps the tools of a system-tools message with it.
    Pin(
        "pydantic_ai.models.openai.OpenAIChatModel._map_tool_definition",
        OpenAIChatModel,
        "_map_tool_definition",
        "(self, f, model_settings)",
        "def",
    ),
    # `_Completions.create` posts through `AsyncCompletions._post`, which is the client's `post`.
    Pin(
        "openai.AsyncOpenAI.post",
        AsyncOpenAI,
        "post",
        "(self, path, *, cast_to, body=..., content=..., files=..., options=..., stream=..., "
        "stream_cls=...)",
        "async def",
    ),
]

PREPARED = "pydantic_ai.models.anthropic._PreparedMessagesCreate"
PREPARED_FIELDS = {"system_prompt", "anthropic_messages", "tools"}
"""What `HearthAnthropicModel._prepare_messages_create` reads and rewrites on the SDK's result."""

PUBLIC_OVERRIDES = {
    "app.llm.wire.openai_client._Completions.create",
    "app.llm.wire.openai_client._Chat.completions",
    "app.llm.wire.openai_client.HearthAsyncOpenAI.chat",
    "app.llm.wire.openai_client.HearthAsyncOpenAI.user_agent",
}
"""Public SDK names hearth overrides, covered elsewhere: tests/llm/test_openai_client.py compares
hearth's client with the stock one on the wire, tests/llm/test_factory.py checks `user_agent`."""

HEARTH_MODULES = ["app.llm.wire.openai_client", "app.llm.wire.openai", "app.llm.wire.anthropic"]


class _AnyDefault:
    def __repr__(self) -> str:
        return "..."


def written(function: Callable[..., Any]) -> str:
    """A signature as `Pin.signature` records it."""
    signature = inspect.signature(function)
    parameters = [
        p.replace(
            annotation=inspect.Parameter.empty,
            default=inspect.Parameter.empty if p.default is p.empty else _AnyDefault(),
        )
        for p in signature.parameters.values()
    ]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


def shape(function: Callable[..., Any]) -> str:
    if inspect.isasyncgenfunction(function):
        return "async generator"
    return "async def" if inspect.iscoroutinefunction(function) else "def"


def sdk_method(pin: Pin) -> Callable[..., Any]:
    method = getattr(pin.sdk, pin.name, None)
    assert callable(method), f"{pin.label} is gone: the SDK no longer defines it"
    return method


def check_signature(pin: Pin) -> None:
    method = sdk_method(pin)
    got = written(method)
    assert got == pin.signature, (
        f"{pin.label} changed signature: expected {pin.signature}, got {got}"
    )
    assert shape(method) == pin.shape, f"{pin.label} changed from {pin.shape} to {shape(method)}"


def sdk_call(method: Callable[..., Any]) -> tuple[list[str], dict[str, str]]:
    """Arguments for every parameter of `method`: positional ones by position."""
    args: list[str] = []
    kwargs: dict[str, str] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            args.append(parameter.name)
        elif parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = parameter.name
    return args, kwargs


@pytest.mark.parametrize("pin", OVERRIDES, ids=[pin.label for pin in OVERRIDES])
def test_overridden_method_keeps_its_signature(pin: Pin) -> None:
    check_signature(pin)
    assert pin.hearth is not None
    override = vars(pin.hearth).get(pin.name)
    assert override is not None, (
        f"{pin.label}: {pin.hearth.__qualname__} no longer overrides it (drop its pin here)"
    )
    assert shape(override) == pin.shape, (
        f"{pin.label}: the override is {shape(override)}, the SDK's method {pin.shape}"
    )
    args, kwargs = sdk_call(sdk_method(pin))
    try:
        inspect.signature(override).bind(*args, **kwargs)
    except TypeError as exc:
        raise AssertionError(
            f"{pin.label}: {pin.hearth.__qualname__}.{pin.name}{written(override)} does not "
            f"accept the SDK's arguments {pin.signature}: {exc}"
        ) from None


@pytest.mark.parametrize("pin", CALLED, ids=[pin.label for pin in CALLED])
def test_called_sdk_method_keeps_its_signature(pin: Pin) -> None:
    check_signature(pin)


def test_overridden_attribute_keeps_its_meaning() -> None:
    label = UNSUPPORTED_FILE_INPUTS
    name = label.rsplit(".", 1)[1]
    assert name in vars(Model), f"{label}: pydantic_ai.models.Model no longer declares it"
    got = vars(OpenAIChatModel).get(name)
    assert got == SDK_UNSUPPORTED_FILE_INPUTS, (
        f"{label} changed: expected {set(SDK_UNSUPPORTED_FILE_INPUTS)}, got {got!r}; hearth's "
        "empty set now also switches on what else the SDK's class leaves out"
    )
    assert vars(HearthOpenAIChatModel).get(name) == frozenset(), (
        f"{label}: HearthOpenAIChatModel no longer empties it (drop its pin here)"
    )


def test_private_sdk_names_the_overrides_use() -> None:
    prepared = getattr(pai_anthropic, PREPARED.rsplit(".", 1)[1], None)
    assert prepared is not None and dataclasses.is_dataclass(prepared), f"{PREPARED} is gone"
    fields = {f.name for f in dataclasses.fields(prepared)}
    assert fields >= PREPARED_FIELDS, f"{PREPARED} lost fields {PREPARED_FIELDS - fields}"
    params = getattr(prepared, "__dataclass_params__", None)
    assert params is not None and not params.frozen, (
        f"{PREPARED} is frozen: _prepare_messages_create assigns its system_prompt"
    )
    client = AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    completions = AsyncCompletions(client)
    assert getattr(completions, "_post", None) == client.post, (
        "openai.resources.chat.completions.AsyncCompletions._post is no longer the client's "
        "post: app.llm.wire.openai_client._Completions.create posts through it"
    )
    assert getattr(AsyncChat(client), "_client", None) is client, (
        "openai.resources.chat.AsyncChat._client is gone: app.llm.wire.openai_client._Chat reads it"
    )
    assert isinstance(getattr(client, "_version", None), str), (
        "openai.AsyncOpenAI._version is gone: HearthAsyncOpenAI.user_agent reads it"
    )


def sdk_names_overridden() -> set[str]:
    """`module.Class.name` for each name a class of HEARTH_MODULES defines that a third-party
    base also defines (dunders and the ABC cache left out)."""
    found: set[str] = set()
    for module_name in HEARTH_MODULES:
        module = importlib.import_module(module_name)
        for class_name, cls in vars(module).items():
            if not inspect.isclass(cls) or cls.__module__ != module_name:
                continue
            sdk_bases = [b for b in cls.__mro__[1:] if not b.__module__.startswith("app.")]
            for name in vars(cls):
                if name.startswith("__") or name == "_abc_impl":
                    continue
                if any(name in vars(base) for base in sdk_bases if base is not object):
                    found.add(f"{module_name}.{class_name}.{name}")
    return found


def test_every_sdk_name_hearth_overrides_is_pinned() -> None:
    pinned = {
        f"{pin.hearth.__module__}.{pin.hearth.__qualname__}.{pin.name}"
        for pin in OVERRIDES
        if pin.hearth is not None
    }
    attribute = UNSUPPORTED_FILE_INPUTS.rsplit(".", 1)[1]
    pinned.add(f"app.llm.wire.openai.HearthOpenAIChatModel.{attribute}")
    pinned |= PUBLIC_OVERRIDES
    found = sdk_names_overridden()
    assert found - pinned == set(), (
        f"these override SDK names but are not pinned in this file: {sorted(found - pinned)} "
        "(an SDK release that adds a name one of hearth's helpers has shows up here too)"
    )
    assert pinned - found == set(), (
        f"pinned but no longer an override of an SDK name: {sorted(pinned - found)} (hearth "
        "dropped the override, or the SDK dropped or renamed the name)"
    )
    assert set(BEHAVIOURS) == {pin.label for pin in OVERRIDES} | {UNSUPPORTED_FILE_INPUTS}


# --- behaviour: the real SDK path against the fake providers --------------------------------

TAIL = "[hearth/context] Monday 09:00"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"


def tool(name: str, group: str | None = None) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} tool",
        parameters_json_schema={"type": "object", "properties": {}},
        metadata={GROUP_KEY: group} if group else None,
    )


ALWAYS_ON = [tool("list_files"), tool("activate_tools")]
WEATHER = [tool("forecast", "weather"), tool("alerts", "weather")]


def tail() -> SystemPromptPart:
    return SystemPromptPart(content=TAIL, dynamic_ref=TAIL_REF)


def activation_turn() -> list[ModelMessage]:
    """A user question, the call that activates `weather`, and its anchored result."""
    result = ToolReturnPart(
        "activate_tools", "activated", tool_call_id="c1", metadata={ACTIVATED_KEY: ["weather"]}
    )
    return [
        ModelRequest(parts=[UserPromptPart("Weather in Oslo?")], instructions="Be brief."),
        ModelResponse(parts=[ToolCallPart("activate_tools", {"groups": ["weather"]}, "c1")]),
        ModelRequest(parts=[result, tail()], instructions="Be brief."),
    ]


@dataclass
class Providers:
    fakes: dict[str, FakeProviderServer]
    registry: ModelRegistry
    built: list[Model]

    def model(self, model_id: str) -> Model:
        info = self.registry.get(model_id)
        assert info is not None
        model = build_model(info, self.registry)
        self.built.append(model)
        return model

    async def body(
        self, model_id: str, messages: list[ModelMessage], tools: list[ToolDefinition]
    ) -> dict[str, Any]:
        """The body the provider received for one request of `model_id`."""
        model = self.model(model_id)
        info = self.registry.get(model_id)
        assert info is not None
        fake = self.fakes[info.provider.id]
        fake.script(Reply(text="Done."))
        parameters = ModelRequestParameters(function_tools=tools)
        response = await model.request(messages, model_settings(info), parameters)
        assert response.parts == [TextPart("Done.")]
        record = fake.model_requests[-1]
        assert record.validation_error is None, record.validation_error
        body: dict[str, Any] = record.body
        return body


@pytest.fixture(scope="module")
async def providers() -> AsyncIterator[Providers]:
    fakes: dict[str, FakeProviderServer] = {
        "oai": FakeOpenAI("openai"),
        "kimi": FakeOpenAI("moonshot"),
        "anth": FakeAnthropic(),
    }
    await asyncio.gather(*(fake.start() for fake in fakes.values()))
    configs = [
        ProviderConfig.model_validate(
            {
                "id": "oai",
                "kind": "openai",
                "base_url": fakes["oai"].base_url,
                "api_key_env": "K",
                "models": [{"id": "gpt-4.1", "capabilities": ["vision", "document"]}],
            }
        ),
        ProviderConfig.model_validate(
            {
                "id": "kimi",
                "kind": "moonshot",
                "base_url": fakes["kimi"].base_url,
                "api_key_env": "K",
                "models": [{"id": "k3", "capabilities": ["document", "video", "tool_search"]}],
            }
        ),
        ProviderConfig.model_validate(
            {
                "id": "anth",
                "kind": "anthropic",
                "base_url": fakes["anth"].base_url,
                "api_key_env": "K",
                "models": [{"id": "claude", "capabilities": ["tool_search"]}],
            }
        ),
    ]
    built: list[Model] = []
    try:
        yield Providers(fakes, ModelRegistry(configs, env={"K": "key"}), built)
    finally:
        for model in built:
            await model.client.close()  # type: ignore[attr-defined]
        await asyncio.gather(*(fake.stop() for fake in fakes.values()))


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [f"{m['role']}+tools" if "tools" in m else m["role"] for m in messages]


def declared(message: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in message.get("tools", [])]


async def process_response_data(providers: Providers) -> None:
    label = "openai.AsyncOpenAI._process_response_data"

    class SdkConstruction(AsyncOpenAI):
        """Between hearth's override and the SDK's method: what reaches the SDK's own way."""

        lenient: list[type]

        def _process_response_data(
            self, *, data: object, cast_to: type[Any], response: httpx2.Response
        ) -> Any:
            self.lenient.append(cast_to)
            return super()._process_response_data(data=data, cast_to=cast_to, response=response)

    class Probe(HearthAsyncOpenAI, SdkConstruction):
        """In front of hearth's override: what the SDK hands to it."""

        calls: list[tuple[type, type]]

        def _process_response_data(
            self, *, data: object, cast_to: type[Any], response: httpx2.Response
        ) -> Any:
            self.calls.append((cast_to, type(data)))
            return super()._process_response_data(data=data, cast_to=cast_to, response=response)

    assert Probe.__mro__[1:3] == (HearthAsyncOpenAI, SdkConstruction)
    fake = providers.fakes["oai"]
    client = Probe(
        api_key="key",
        base_url=fake.base_url,
        max_retries=MAX_RETRIES,
        http_client=create_async_httpx2_client(),
    )
    client.calls, client.lenient = [], []
    model = HearthOpenAIChatModel("gpt-4.1", provider=OpenAIProvider(openai_client=client))
    providers.built.append(model)
    fake.script(Reply(text="Streamed in small pieces.", chunk_chars=4))
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Say something.")])]
    async with model.request_stream(messages, None, ModelRequestParameters()) as stream:
        async for _ in stream:
            pass
    assert stream.get().parts == [TextPart("Streamed in small pieces.")]
    chunks = [kind for cast_to, kind in client.calls if cast_to is ChatCompletionChunk]
    assert len(chunks) >= 7, (
        f"{label} is no longer called for each streamed chunk: the SDK made {client.calls}"
    )
    assert set(chunks) == {dict}, f"{label} is handed chunks as {set(chunks)}, not JSON dicts"
    assert ChatCompletionChunk not in client.lenient, (
        f"{label}: valid chunks went the SDK's construct_type way, not hearth's validation"
    )


async def get_tool_choice(providers: Providers) -> None:
    label = "pydantic_ai.models.openai.OpenAIChatModel._get_tool_choice"
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Weather?")])]
    body = await providers.body("kimi/k3", messages, [*ALWAYS_ON, *WEATHER])
    names = [t["function"]["name"] for t in body.get("tools", [])]
    assert names == ["list_files", "activate_tools"], (
        f"{label} no longer keeps catalogue tools out of the top-level tools: sent {names}"
    )
    assert body.get("tool_choice") == "auto", f"{label}: tool_choice {body.get('tool_choice')!r}"
    body = await providers.body("kimi/k3", messages, WEATHER)
    assert "tools" not in body and "tool_choice" not in body, (
        f"{label}: with only catalogue tools, sent tools {body.get('tools')!r} and tool_choice "
        f"{body.get('tool_choice')!r}"
    )


async def map_messages(providers: Providers) -> None:
    label = "pydantic_ai.models.openai.OpenAIChatModel._map_messages"
    moved = ModelRequest(
        parts=[UserPromptPart("And tomorrow?")],
        instructions="Be brief.",
        metadata={ACTIVATED_KEY: ["weather"]},  # a summary moved the activation here
    )
    body = await providers.body("kimi/k3", [moved], [*ALWAYS_ON, *WEATHER])
    sent = body["messages"]
    assert roles(sent) == ["system", "system+tools", "user"], (
        f"{label} no longer declares moved activations after the system blocks: {sent}"
    )
    assert sent[0]["content"] == "Be brief."
    assert declared(sent[1]) == ["forecast", "alerts"], f"{label}: declared {sent[1]}"


async def map_user_message(providers: Providers) -> None:
    label = "pydantic_ai.models.openai.OpenAIChatModel._map_user_message"
    # A tool result with an image: the SDK maps the image to a user message after the tool
    # message; the tail goes after that too, not between them where the SDK would put it.
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Show the chart.")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "chart.png"}, "c1")]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    "read_file",
                    ["chart.png:", BinaryContent(PNG, media_type="image/png")],
                    tool_call_id="c1",
                ),
                tail(),
            ]
        ),
    ]
    body = await providers.body("oai/gpt-4.1", messages, ALWAYS_ON)
    sent = body["messages"]
    assert roles(sent)[-3:] == ["tool", "user", "system"], (
        f"{label} no longer puts the tail after the conversation: {roles(sent)}"
    )
    assert sent[-1] == {"role": "system", "content": TAIL}, f"{label}: last {sent[-1]}"
    assert "image_url" in [p["type"] for p in sent[-2]["content"]], f"{label}: {sent[-2]}"
    # Kimi: the activated tools are declared right after the activating call's result.
    body = await providers.body("kimi/k3", activation_turn(), [*ALWAYS_ON, *WEATHER])
    sent = body["messages"]
    assert roles(sent) == ["system", "user", "assistant", "tool", "system+tools", "system"], (
        f"{label} no longer declares activated tools after their tool result: {sent}"
    )
    assert declared(sent[4]) == ["forecast", "alerts"], f"{label}: declared {sent[4]}"
    assert sent[5] == {"role": "system", "content": TAIL}, f"{label}: last {sent[5]}"


async def map_binary_content_item(providers: Providers) -> None:
    label = "pydantic_ai.models.openai.OpenAIChatModel._map_binary_content_item"
    prompt = UserPromptPart(
        [
            "Compare these.",
            BinaryContent(PDF, media_type="application/pdf", identifier="q3-report.pdf"),
            BinaryContent(MP4, media_type="video/mp4"),
        ]
    )
    body = await providers.body("kimi/k3", [ModelRequest(parts=[prompt])], [])
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "file", "video_url"], (
        f"{label} no longer maps PDF and video parts: {parts}"
    )
    assert parts[1]["file"]["filename"] == "q3-report.pdf", (
        f"{label}: the PDF goes as {parts[1]['file']['filename']!r}, not the user's file name"
    )
    assert parts[1]["file"]["file_data"].startswith("data:application/pdf;base64,")
    assert parts[2]["video_url"]["url"].startswith("data:video/mp4;base64,"), f"{label}: {parts}"


async def unsupported_file_inputs(providers: Providers) -> None:
    label = UNSUPPORTED_FILE_INPUTS
    model = providers.model("kimi/k3")
    assert model.profile.get("supports_video_input") is True, (
        f"{label}: a model with hearth's `video` capability has supports_video_input "
        f"{model.profile.get('supports_video_input')!r}"
    )
    prompt = UserPromptPart(["What happens?", BinaryContent(MP4, media_type="video/mp4")])
    body = await providers.body("kimi/k3", [ModelRequest(parts=[prompt])], [])
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "video_url"], f"{label}: sent {parts}"


async def prepare_messages_create(providers: Providers) -> None:
    label = "pydantic_ai.models.anthropic.AnthropicModel._prepare_messages_create"
    body = await providers.body("anth/claude", activation_turn(), [*ALWAYS_ON, *WEATHER])
    tools = {t["name"]: t for t in body["tools"]}
    assert [t.get("defer_loading", False) for t in body["tools"]] == [False, False, True, True], (
        f"{label} no longer defers the catalogue tools: {body['tools']}"
    )
    assert tools["activate_tools"].get("cache_control") == {"type": "ephemeral"}, (
        f"{label}: no breakpoint on the last always-on tool: {body['tools']}"
    )
    assert body["system"][0] == {
        "type": "text",
        "text": "Be brief.",
        "cache_control": {"type": "ephemeral"},
    }, f"{label}: system {body['system']}"
    last = body["messages"][-1]
    assert last["role"] == "user" and last["content"][-1] == {"type": "text", "text": TAIL}, (
        f"{label} no longer puts the tail last in the last user message: {last}"
    )
    result = last["content"][0]
    assert result["type"] == "tool_result" and result["content"] == [
        {"type": "tool_reference", "tool_name": "forecast"},
        {"type": "tool_reference", "tool_name": "alerts"},
    ], f"{label}: the activating tool_result is {result}"
    assert result["cache_control"] == {"type": "ephemeral"}, f"{label}: {result}"


BEHAVIOURS: dict[str, Callable[[Providers], Awaitable[None]]] = {
    "openai.AsyncOpenAI._process_response_data": process_response_data,
    "pydantic_ai.models.openai.OpenAIChatModel._get_tool_choice": get_tool_choice,
    "pydantic_ai.models.openai.OpenAIChatModel._map_messages": map_messages,
    "pydantic_ai.models.openai.OpenAIChatModel._map_user_message": map_user_message,
    "pydantic_ai.models.openai.OpenAIChatModel._map_binary_content_item": map_binary_content_item,
    UNSUPPORTED_FILE_INPUTS: unsupported_file_inputs,
    "pydantic_ai.models.anthropic.AnthropicModel._prepare_messages_create": (
        prepare_messages_create
    ),
}


@pytest.mark.parametrize("label", list(BEHAVIOURS))
async def test_override_takes_effect_on_the_wire(label: str, providers: Providers) -> None:
    try:
        await BEHAVIOURS[label](providers)
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(f"{label}: the request through the SDK failed: {exc!r}") from exc
