"""Every third-party module that `app/` imports comes from a distribution pyproject.toml declares.

A package that arrives only as another's dependency can vanish or change with that package's
next release; hearth names each one it imports itself.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    """The distributions `[project] dependencies` names (extras and versions left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for requirement in project["dependencies"]:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert match, requirement
        names.add(_normalized(match.group(1)))
    return names


def imported_modules(root: Path, base: Path = ROOT) -> dict[str, set[str]]:
    """Top-level module name -> the files under `root` that import it (absolute imports only),
    named relative to `base`."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(base)))
    return found


def third_party(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    return {
        name: files
        for name, files in modules.items()
        if name not in sys.stdlib_module_names and name != APP.name
    }


def undeclared(modules: dict[str, set[str]], declared: set[str]) -> list[str]:
    """One line for each third-party module whose distribution is not declared."""
    distributions = packages_distributions()
    problems = []
    for name, files in sorted(third_party(modules).items()):
        providers = {_normalized(d) for d in distributions.get(name, [])}
        if providers & declared:
            continue
        where = ", ".join(sorted(files))
        if providers:
            problems.append(f"{name} (from {', '.join(sorted(providers))}) imported in {where}")
        else:
            problems.append(f"{name} (no installed distribution provides it) imported in {where}")
    return problems


def test_app_imports_only_declared_distributions() -> None:
    modules = imported_modules(APP)
    assert "pydantic_ai" in modules and "sqlalchemy" in modules  # the walk found the imports
    assert undeclared(modules, declared_distributions()) == []


def test_an_undeclared_import_is_named(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import os\nimport yaml.nodes\nfrom sqlalchemy import select\n")
    modules = imported_modules(tmp_path, base=tmp_path)
    assert modules == {"os": {"m.py"}, "yaml": {"m.py"}, "sqlalchemy": {"m.py"}}
    assert undeclared(modules, {"sqlalchemy"}) == ["yaml (from pyyaml) imported in m.py"]
