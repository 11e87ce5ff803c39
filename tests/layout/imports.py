"""The import graph of `app/`, read from the source with `ast` (nothing is imported).

Every import counts: module level, inside functions, and under `TYPE_CHECKING`, because a
circle hidden behind any of them is still a circle a reader has to untangle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(APP.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            # `from app.x import y` may name the module `app.x.y`.
            yield from (f"{target}.{alias.name}" for alias in node.names)


@cache
def _read_graph() -> dict[str, frozenset[str]]:
    """Each module of `app` and the modules of `app` it imports (read once per run)."""
    paths = {module_name(p): p for p in APP.rglob("*.py")}
    graph: dict[str, frozenset[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = _imported(tree, module, path.name == "__init__.py")
        graph[module] = frozenset(t for t in targets if t in paths and t != module)
    return graph


def module_graph() -> dict[str, set[str]]:
    """Each module of `app` and the modules of `app` it imports; a fresh copy to change."""
    return {module: set(targets) for module, targets in _read_graph().items()}


def package_of(module: str) -> str:
    """`app.agent.turn` → `agent`; a top-level module is a package of its own (`services`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "app"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = package_of(module)
        packages.setdefault(source, set())
        packages[source] |= {package_of(t) for t in targets} - {source, "app"}
    return packages


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def path_between(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """One import chain from `start` to `goal` (breadth first), for a readable failure."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if node == goal:
            chain = [node]
            while (before := previous[chain[-1]]) is not None:
                chain.append(before)
            return chain[::-1]
        for target in sorted(graph.get(node, ())):
            if target not in previous:
                previous[target] = node
                queue.append(target)
    return None


if __name__ == "__main__":
    modules = module_graph()
    packages = package_graph(modules)
    print(f"{len(modules)} modules, {len(packages)} packages")
    for name in sorted(packages):
        print(f"  {name:<10} -> {', '.join(sorted(packages[name])) or '-'}")
    print("module circles:", cycles(modules) or "none")
    print("package circles:", cycles(packages) or "none")
