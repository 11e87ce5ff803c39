"""The providers file: parsing, errors that name file and entry, availability, DTL modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config_files import ConfigError
from app.llm.registry import ModelRegistry
from tests.support import ROOT


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "providers.yaml"
    path.write_text(text)
    return path


def test_shipped_file_loads_with_demo_first_and_available() -> None:
    registry = ModelRegistry.from_file(ROOT / "config" / "providers.yaml")
    kinds = {p.kind for p in registry.providers}
    assert {"demo", "anthropic", "openai", "moonshot", "lmstudio", "ollama"} <= kinds
    default = registry.default_model()
    assert default is not None and default.provider.kind == "demo"
    k3 = registry.get("moonshot/k3")
    assert k3 is not None
    assert k3.capabilities == ("vision", "video", "tool_search")
    assert k3.dtl_mode == "kimi_system_tools"


@pytest.mark.parametrize(
    ("kind", "dtl", "capabilities", "expected"),
    [
        ("anthropic", None, ["tool_search"], "anthropic_tool_reference"),
        ("anthropic", None, ["vision"], "none"),
        ("moonshot", None, ["tool_search"], "kimi_system_tools"),
        ("openai", None, ["tool_search"], "none"),
        ("openai", "kimi_system_tools", ["tool_search"], "kimi_system_tools"),
        ("anthropic", "none", ["tool_search"], "none"),
    ],
)
def test_dtl_mode(
    tmp_path: Path, kind: str, dtl: str | None, capabilities: list[str], expected: str
) -> None:
    dtl_line = f"\n    dtl: {dtl}" if dtl else ""
    path = write(
        tmp_path,
        f"""
providers:
  - id: p
    kind: {kind}{dtl_line}
    api_key_env: SOME_KEY
    models:
      - id: m
        capabilities: {capabilities}
""",
    )
    model = ModelRegistry.from_file(path).get("p/m")
    assert model is not None and model.dtl_mode == expected


def test_model_ids_may_contain_slashes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
providers:
  - id: openrouter
    kind: openrouter
    api_key_env: OPENROUTER_API_KEY
    models:
      - id: meta-llama/llama-3.3-70b
""",
    )
    registry = ModelRegistry(
        ModelRegistry.from_file(path).providers, env={"OPENROUTER_API_KEY": "k"}
    )
    model = registry.get("openrouter/meta-llama/llama-3.3-70b")
    assert model is not None and model.config.id == "meta-llama/llama-3.3-70b"
    assert registry.is_available(model)


def test_missing_key_lists_the_model_as_unavailable(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
providers:
  - id: anthropic
    kind: anthropic
    api_key_env: HEARTH_TEST_NO_SUCH_KEY
    models: [{id: claude}]
""",
    )
    providers = ModelRegistry.from_file(path).providers
    without = ModelRegistry(providers, env={})
    model = without.get("anthropic/claude")
    assert model is not None and not without.is_available(model)
    assert without.default_model() is None
    with_key = ModelRegistry(providers, env={"HEARTH_TEST_NO_SUCH_KEY": "sk"})
    assert with_key.is_available(with_key.get("anthropic/claude"))  # type: ignore[arg-type]


def test_local_servers_count_once_they_answer(tmp_path: Path) -> None:
    path = write(tmp_path, "providers:\n  - {id: lm, kind: lmstudio, models: [{id: q}]}\n")
    registry = ModelRegistry.from_file(path)
    model = registry.get("lm/q")
    assert model is not None
    assert model.base_url == "http://127.0.0.1:1234/v1"
    assert not registry.is_available(model)
    registry.set_reachable("lm", True)
    assert registry.is_available(model)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("providers: [", ["not valid YAML"]),
        ("- just\n- a list\n", ["expected a mapping"]),
        ("providers: []\n", ["providers", "at least 1"]),
        (
            "providers:\n  - {id: a, kind: demo, models: [{id: m}]}\n"
            "  - {id: b, kind: telepathy, models: [{id: m}]}\n",
            ["providers[1]", "provider 'b'", "kind"],
        ),
        (
            "providers:\n  - {id: a, kind: openai, models: [{id: m, capabilities: [smell]}]}\n",
            ["providers[0]", "provider 'a'", "models[0].capabilities[0]"],
        ),
        (
            "providers:\n  - {id: a, kind: demo, models: [{id: m}], colour: blue}\n",
            ["provider 'a'", "colour", "Extra inputs"],
        ),
        (
            "providers:\n  - {id: a, kind: demo, models: [{id: m}, {id: m}]}\n",
            ["provider 'a'", "appears twice"],
        ),
        (
            "providers:\n  - {id: a, kind: demo, models: [{id: m}]}\n"
            "  - {id: a, kind: demo, models: [{id: n}]}\n",
            ["provider id 'a' appears twice"],
        ),
        (
            "providers:\n  - {id: a, kind: openai, models: [{id: m, context_window: -5}]}\n",
            ["models[0].context_window", "greater than 0"],
        ),
        (
            "providers:\n  - {id: a, kind: openai, dtl: anthropic_tool_reference, "
            "models: [{id: m}]}\n",
            ["provider 'a'", "needs kind anthropic"],
        ),
        (
            "providers:\n  - {id: a, kind: anthropic, dtl: kimi_system_tools, models: [{id: m}]}\n",
            ["provider 'a'", "OpenAI-compatible"],
        ),
    ],
)
def test_bad_files_name_file_entry_and_problem(
    tmp_path: Path, text: str, fragments: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        ModelRegistry.from_file(path)
    message = str(error.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        ModelRegistry.from_file(tmp_path / "absent.yaml")
