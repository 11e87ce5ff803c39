"""Golden snapshots: JSON files under tests/golden/, written only by `pytest --update-golden`.

A snapshot that is missing or differs fails the test; with `--update-golden` (an option of
tests/conftest.py) the test writes it instead, to be reviewed in the diff like any change.
The one reading of the wall clock a request carries (the date and time of the dynamic tail) is
replaced by `<now>`, so snapshots stay byte-stable from one run to the next.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_OPTION = "--update-golden"

NOW = re.compile(r"Current date and time: [^.]*? UTC\.")

update = False
"""Set from the command line (`--update-golden`) when the session starts."""


def render(value: Any) -> str:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return NOW.sub("Current date and time: <now>.", text)


def assert_golden(name: str, value: Any, *, directory: Path = GOLDEN_DIR) -> None:
    path = directory / f"{name}.json"
    text = render(value)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"golden file {path} is missing; run pytest with {UPDATE_OPTION}")
    expected = path.read_text()
    assert text == expected, f"{path} differs; rerun pytest with {UPDATE_OPTION} if intended"
