"""The layout's one-way dependencies: routes → services → agent / repositories → models / core.

A circle between modules or packages fails here with the chain that makes it; so does a package
that reaches up a layer, or HTTP code inside the turn engine.
"""

from __future__ import annotations

import ast

import pytest

from tests.layout.imports import (
    APP,
    cycles,
    module_graph,
    module_name,
    package_graph,
    path_between,
)

LAYERS: dict[str, int] = {
    "settings": 0,
    "clock": 0,
    "core": 0,
    "models": 1,
    "observability": 1,
    "auth": 2,
    "files": 2,
    "llm": 2,
    "knowledge": 2,
    "tools": 2,
    "agent": 3,
    "services": 4,
    "chats": 5,
    "users": 5,
    "uploads": 5,
    "api": 6,
    "main": 7,
    "cli": 8,
}
"""Each package's layer: a package imports packages of its own layer or below, never above."""

NO_HTTP = ("agent", "tools", "knowledge", "llm", "models", "users")
"""Packages that know nothing of HTTP: the turn engine and what it stands on."""


def test_no_module_imports_another_that_imports_it_back() -> None:
    graph = module_graph()
    found = cycles(graph)
    chains = [path_between(graph, c[0], c[0]) or c for c in found]
    assert not found, f"import circles between modules: {chains}"


def test_packages_depend_one_way() -> None:
    graph = module_graph()
    packages = package_graph(graph)
    found = cycles(packages)
    assert not found, f"import circles between packages: {found}"


def test_every_package_has_a_layer() -> None:
    assert set(package_graph(module_graph())) - {"app"} == set(LAYERS)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_no_package_reaches_up_a_layer(package: str) -> None:
    graph = module_graph()
    upward = []
    for module, targets in graph.items():
        parts = module.split(".")
        if (parts[1] if len(parts) > 1 else "app") != package:
            continue
        for target in targets:
            target_package = target.split(".")[1]
            if LAYERS.get(target_package, 0) > LAYERS[package]:
                upward.append(f"{module} imports {target}")
    assert not upward, f"{package} (layer {LAYERS[package]}) reaches up: {sorted(upward)}"


@pytest.mark.parametrize("package", NO_HTTP)
def test_no_http_in_the_engine(package: str) -> None:
    offenders = []
    for path in sorted((APP / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name.split(".")[0] in {"fastapi", "starlette"} or name.startswith("app.api"):
                    offenders.append(f"{module_name(path)} imports {name}")
    assert not offenders, offenders


def test_the_check_sees_a_circle() -> None:
    """The walk itself: a planted circle (through a function-level import) is found."""
    graph = module_graph()
    graph["app.core.errors"] = graph["app.core.errors"] | {"app.agent.turn"}
    assert any("app.core.errors" in c for c in cycles(graph))
    assert cycles(package_graph(graph))
