"""Golden snapshots: JSON files under tests/golden/, rewritten with HEARTH_UPDATE_GOLDEN=1.

The one reading of the wall clock a request carries (the date and time of the dynamic tail) is
replaced by `<now>`, so snapshots stay byte-stable from one run to the next.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).parent / "golden"


NOW = re.compile(r"Current date and time: [^.]*? UTC\.")


def assert_golden(name: str, value: Any) -> None:
    path = GOLDEN_DIR / f"{name}.json"
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    text = NOW.sub("Current date and time: <now>.", text)
    if os.environ.get("HEARTH_UPDATE_GOLDEN") == "1" or not path.exists():
        if not path.exists() and os.environ.get("CI", "").lower() == "true":
            raise AssertionError(f"golden file {path} is missing")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    expected = path.read_text()
    assert text == expected, f"{path} differs; rerun with HEARTH_UPDATE_GOLDEN=1 if intended"
