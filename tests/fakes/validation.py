"""Request-body validation against the official SDKs' request types, with unknown keys rejected.

The SDKs describe request bodies as `TypedDict`s, and pydantic ignores extra keys in a TypedDict
unless that class says otherwise; a `ConfigDict(extra="forbid")` on a `TypeAdapter` is refused for
TypedDicts and would not reach nested ones anyway. So the validators here take pydantic's core
schema for the SDK type and rewrite it before building the validator:

* every `typed-dict` schema gets `extra_behavior="forbid"`, at every nesting level and inside every
  union member, except the few the SDK itself marks `extra="allow"` (a tool's JSON-schema
  `input_schema`, which really is open);
* `Iterable[...]` fields, which pydantic validates lazily as generators (so their items would never
  be looked at), are validated as lists;
* SDK response models that the param types also accept (`AssistantMessageParam` takes `Message`
  content blocks) only match real model instances, so a JSON dict can't slip through them with
  unknown keys;
* unions told apart by a literal `type` or `role` become tagged unions, which accept the same
  bodies but report the problem in the right member instead of a complaint from every member.

The Anthropic validator also takes `temperature`, `top_p` and `top_k`: the API still accepts them,
but SDK 2.x dropped them from its request types (pydantic-ai sends them through `extra_body`).

Moonshot (Kimi) documents three extensions of the OpenAI Chat Completions request, and
`validate_openai_request(..., moonshot=True)` accepts exactly those: a system message that carries
`tools` instead of `content` (dynamic tool loading), `reasoning_content` on assistant messages
(sent back thinking), and `video_url` content parts.
"""

import functools
from collections.abc import Hashable
from typing import Annotated, Any, Literal, Required, TypeAlias, Union

from annotated_types import MinLen
from anthropic.types import message_create_params as anthropic_params
from anthropic.types.beta import message_create_params as anthropic_beta_params
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionFunctionMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat import completion_create_params as openai_params
from pydantic import TypeAdapter
from pydantic_core import SchemaValidator, ValidationError
from typing_extensions import TypedDict

__all__ = [
    "InvalidRequestBody",
    "strict_validator",
    "validate_anthropic_request",
    "validate_openai_request",
]


class InvalidRequestBody(ValueError):
    """A request body that the provider's own request types do not accept.

    `errors` holds pydantic's error dicts; the message leads with the most telling ones (unknown
    keys, then missing keys), located by their path in the body, as the providers report them.
    """

    def __init__(self, errors: list[dict[str, Any]], body: object) -> None:
        self.errors = errors
        super().__init__(summarize_errors(errors, body))


def _rewrite(schema: Any) -> Any:
    """A copy of a core schema: unknown keys forbidden, iterables eager, models instance-only."""
    if isinstance(schema, list | tuple):
        return type(schema)(_rewrite(item) for item in schema)
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind == "model":
        # Wire JSON is dicts; an SDK response model must not accept one with extra keys.
        instance_only: dict[str, Any] = {"type": "is-instance", "cls": schema["cls"]}
        if "ref" in schema:
            instance_only["ref"] = schema["ref"]
        return instance_only
    out = {key: _rewrite(value) for key, value in schema.items()}
    if kind == "typed-dict" and out.get("extra_behavior") != "allow":
        out["extra_behavior"] = "forbid"
        if isinstance(out.get("config"), dict):
            out["config"] = {k: v for k, v in out["config"].items() if k != "extra_fields_behavior"}
    elif kind == "generator":
        out["type"] = "list"
    return out


_DISCRIMINATORS = ("type", "role")
_MISSING_TAG = "<missing>"
_NULL_TAG = "<null>"


def _tag_of(key: str) -> Any:
    def tag(value: object) -> Hashable | None:
        if not isinstance(value, dict):
            return None
        found = value.get(key, _MISSING_TAG)
        if found is None:
            return _NULL_TAG
        return found if isinstance(found, str | int | bool) else None

    tag.__name__ = key  # pydantic's error names it: "found using type()"
    return tag


class _Tagger:
    """Turns unions of TypedDicts told apart by a literal `type` or `role` into tagged unions.

    Only the member whose tag matches is then tried, so an error names the real problem (an
    unknown key in a text block) rather than every union member's complaint about it. A member
    whose discriminator is optional (an Anthropic custom tool may leave out `type`) also takes the
    bodies that leave it out.
    """

    def __init__(self, definitions: dict[str, dict[str, Any]]) -> None:
        self.definitions = definitions

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type") == "definition-ref":
            return self.definitions.get(schema["schema_ref"], schema)
        return schema

    def flatten(self, choices: list[Any]) -> list[dict[str, Any]]:
        flat: list[dict[str, Any]] = []
        for choice in choices:
            schema = choice[0] if isinstance(choice, tuple) else choice
            resolved = self.resolve(schema)
            if resolved.get("type") == "union":
                flat.extend(self.flatten(list(resolved["choices"])))
            else:
                flat.append(schema)
        return flat

    def tags(self, schema: dict[str, Any], key: str) -> list[Hashable] | None:
        resolved = self.resolve(schema)
        if resolved.get("type") != "typed-dict" or key not in resolved["fields"]:
            return None
        field = resolved["fields"][key]
        literal = field["schema"]
        tags: list[Hashable] = []
        if literal.get("type") == "nullable":
            literal = literal["schema"]
            tags.append(_NULL_TAG)
        if literal.get("type") != "literal":
            return None
        tags.extend(literal["expected"])
        if not field.get("required", True):
            tags.append(_MISSING_TAG)
        return tags

    def tag_union(self, schema: dict[str, Any]) -> dict[str, Any]:
        choices = self.flatten(list(schema["choices"]))
        wire = [c for c in choices if self.resolve(c).get("type") != "is-instance"]
        if not wire:
            return schema
        for key in _DISCRIMINATORS:
            by_tag: dict[Hashable, list[dict[str, Any]]] = {}
            for choice in wire:
                tags = self.tags(choice, key)
                if tags is None:
                    break
                for tag in tags:
                    by_tag.setdefault(tag, []).append(choice)
            else:
                tagged = {
                    tag: members[0] if len(members) == 1 else {"type": "union", "choices": members}
                    for tag, members in by_tag.items()
                }
                return {"type": "tagged-union", "choices": tagged, "discriminator": _tag_of(key)}
        return schema | {"choices": wire}

    def walk(self, schema: Any) -> Any:
        if isinstance(schema, list | tuple):
            return type(schema)(self.walk(item) for item in schema)
        if not isinstance(schema, dict):
            return schema
        out = {key: self.walk(value) for key, value in schema.items()}
        return self.tag_union(out) if out.get("type") == "union" else out


def strict_validator(tp: Any) -> SchemaValidator:
    """A validator for `tp` (typically an SDK TypedDict) that rejects unknown keys everywhere."""
    schema = _rewrite(TypeAdapter(tp).core_schema)
    definitions = {
        d["ref"]: d for d in schema.get("definitions", []) if isinstance(d, dict) and "ref" in d
    }
    return SchemaValidator(_Tagger(definitions).walk(schema))


def summarize_errors(errors: list[dict[str, Any]], body: object, limit: int = 3) -> str:
    """A short, provider-style message: `messages.0.content.0.foo: Extra inputs are not permitted`.

    Errors located inside another error's location win over it (a union of `str | list[...]`
    reports both "not a string" and the real problem inside the list), unknown keys come first.
    """
    located = [(body_path(body, error["loc"]), error) for error in errors]
    specific = [
        (path, error)
        for path, error in located
        if not any(len(other) > len(path) and other[: len(path)] == path for other, _ in located)
    ]
    rank = {"extra_forbidden": 0, "missing": 1}
    specific.sort(key=lambda item: (rank.get(item[1]["type"], 2), -len(item[0])))
    lines: list[str] = []
    for path, error in specific:
        line = f"{'.'.join(path)}: {error['msg']}" if path else error["msg"]
        if line not in lines:
            lines.append(line)
    more = len(lines) - limit
    return "; ".join(lines[:limit]) + (f" (and {more} more)" if more > 0 else "")


def body_path(body: object, loc: tuple[Any, ...]) -> list[str]:
    """The keys and indexes of `loc` that exist in `body`, leaving out union-member labels."""
    path: list[str] = []
    current = body
    tag_skipped = False
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(current, dict):
            if not tag_skipped and not last and part in _tag_values(current):
                tag_skipped = True  # a tagged-union label, not a key
                continue
            if part in current and not last:
                path.append(str(part))
                current = current[part]
                tag_skipped = False
            elif last:
                path.append(str(part))  # the missing or unknown key itself
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            path.append(str(part))
            current = current[part]
            tag_skipped = False
    return path


def _tag_values(node: dict[str, Any]) -> list[object]:
    return [node.get(key, _MISSING_TAG) for key in _DISCRIMINATORS]


def _validate(validators: tuple[SchemaValidator, SchemaValidator], body: object) -> None:
    """Validate against the streaming or the non-streaming variant, as `body["stream"]` says."""
    streaming = isinstance(body, dict) and body.get("stream") is True
    try:
        validators[1 if streaming else 0].validate_python(body, strict=True)
    except ValidationError as exc:
        errors = list(exc.errors(include_url=False, include_context=False))
        raise InvalidRequestBody(errors, body) from None


# --- Anthropic -------------------------------------------------------------------------------


class AnthropicSamplingParams(TypedDict, total=False):
    """Sampling parameters the API takes but the SDK's request types no longer declare.

    `anthropic>=1` dropped them from `messages.create()`; pydantic-ai sends them in `extra_body`.
    """

    temperature: float
    top_p: float
    top_k: int


class AnthropicCreateParamsNonStreaming(
    anthropic_params.MessageCreateParamsNonStreaming, AnthropicSamplingParams, total=False
):
    pass


class AnthropicCreateParamsStreaming(
    anthropic_params.MessageCreateParamsStreaming, AnthropicSamplingParams
):
    pass


class AnthropicBetaCreateParamsNonStreaming(
    anthropic_beta_params.MessageCreateParamsNonStreaming, AnthropicSamplingParams, total=False
):
    pass


class AnthropicBetaCreateParamsStreaming(
    anthropic_beta_params.MessageCreateParamsStreaming, AnthropicSamplingParams
):
    pass


@functools.cache
def _anthropic_validators(beta: bool) -> tuple[SchemaValidator, SchemaValidator]:
    if beta:
        return (
            strict_validator(AnthropicBetaCreateParamsNonStreaming),
            strict_validator(AnthropicBetaCreateParamsStreaming),
        )
    return (
        strict_validator(AnthropicCreateParamsNonStreaming),
        strict_validator(AnthropicCreateParamsStreaming),
    )


def validate_anthropic_request(body: dict[str, Any], *, beta: bool = False) -> None:
    """Raise `InvalidRequestBody` unless `body` is a Messages API request the SDK types accept.

    That is `anthropic.types.MessageCreateParams` (streaming or not, as `body["stream"]` says),
    plus `temperature`, `top_p` and `top_k` (see `AnthropicSamplingParams`). `beta=True` checks
    against the beta request types instead, for `/v1/messages?beta=true`.
    """
    _validate(_anthropic_validators(beta), body)


# --- OpenAI and Moonshot ----------------------------------------------------------------------


class MoonshotToolsSystemMessage(TypedDict, total=False):
    """Kimi dynamic tool loading: a system message with `tools` and no `content` key at all."""

    role: Required[Literal["system"]]
    tools: Required[Annotated[list[ChatCompletionFunctionToolParam], MinLen(1)]]
    name: str


class MoonshotAssistantMessage(ChatCompletionAssistantMessageParam, total=False):
    """An assistant message that sends its thinking back in `reasoning_content`."""

    reasoning_content: str | None


class MoonshotVideoURL(TypedDict, total=False):
    url: Required[str]


class MoonshotVideoPart(TypedDict, total=False):
    """`{"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}`."""

    type: Required[Literal["video_url"]]
    video_url: Required[MoonshotVideoURL]


MoonshotContentPart: TypeAlias = Union[ChatCompletionContentPartParam, MoonshotVideoPart]  # noqa: UP007


class MoonshotUserMessage(ChatCompletionUserMessageParam, total=False):
    content: Required[Union[str, list[MoonshotContentPart]]]  # noqa: UP007


MoonshotMessage: TypeAlias = Union[  # noqa: UP007
    ChatCompletionDeveloperMessageParam,
    ChatCompletionSystemMessageParam,
    MoonshotToolsSystemMessage,
    MoonshotUserMessage,
    MoonshotAssistantMessage,
    ChatCompletionToolMessageParam,
    ChatCompletionFunctionMessageParam,
]


class MoonshotCompletionCreateParamsStreaming(openai_params.CompletionCreateParamsStreaming):
    messages: Required[list[MoonshotMessage]]


class MoonshotCompletionCreateParamsNonStreaming(
    openai_params.CompletionCreateParamsNonStreaming, total=False
):
    messages: Required[list[MoonshotMessage]]


@functools.cache
def _openai_validators(moonshot: bool) -> tuple[SchemaValidator, SchemaValidator]:
    if moonshot:
        return (
            strict_validator(MoonshotCompletionCreateParamsNonStreaming),
            strict_validator(MoonshotCompletionCreateParamsStreaming),
        )
    return (
        strict_validator(openai_params.CompletionCreateParamsNonStreaming),
        strict_validator(openai_params.CompletionCreateParamsStreaming),
    )


def validate_openai_request(body: dict[str, Any], moonshot: bool = False) -> None:
    """Raise `InvalidRequestBody` unless `body` is a Chat Completions request the SDK types accept.

    With `moonshot=True`, Kimi's three documented extensions are accepted as well (see the module
    docstring); nothing else beyond the OpenAI types is.
    """
    _validate(_openai_validators(moonshot), body)
