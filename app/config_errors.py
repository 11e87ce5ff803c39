"""The one error a bad configuration file raises: it names the file, the entry and the problem."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


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
