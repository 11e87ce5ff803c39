"""Reading hearth's YAML configuration files, and the one error a bad one raises.

Every file is a mapping with one list of entries (`providers`, `servers`); a problem is reported
as a `ConfigError` that names the file, the entry (by index and by its id or name) and the
problem, and start-up stops there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class ConfigError(Exception):
    """A configuration file that hearth refuses to start with."""


def describe_validation(path: Path, error: ValidationError, entries: list[str]) -> ConfigError:
    """Turn pydantic's errors into one message per problem, each naming its entry.

    `entries` names the top-level list items (for example `provider 'anthropic'`), indexed like
    the list, so a message reads `providers[1] (provider 'openai'): models[0].id: field required`.
    """
    lines = []
    for problem in error.errors():
        loc = list(problem["loc"])
        where = ""
        if len(loc) >= 2 and isinstance(loc[1], int):
            index = loc[1]
            label = entries[index] if index < len(entries) else ""
            where = f"{loc[0]}[{index}]" + (f" ({label})" if label else "")
            loc = loc[2:]
        elif loc:
            where = str(loc[0])
            loc = loc[1:]
        field = ".".join(f"[{part}]" if isinstance(part, int) else str(part) for part in loc)
        field = field.replace(".[", "[")
        lines.append(f"{where}{': ' + field if field else ''}: {problem['msg']}")
    return ConfigError(f"{path}: " + "; ".join(lines))


def read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc


def load_config_file(
    path: Path, model: type[ConfigT], list_key: str, entry_kind: str, id_key: str
) -> ConfigT:
    """Parse `path` into `model`; entries of `list_key` are named `<entry_kind> '<id_key>'`."""
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with a '{list_key}' list")
    items = raw.get(list_key)
    labels = [
        f"{entry_kind} {item.get(id_key)!r}" if isinstance(item, dict) and item.get(id_key) else ""
        for item in (items if isinstance(items, list) else [])
    ]
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise describe_validation(path, exc, labels) from exc
