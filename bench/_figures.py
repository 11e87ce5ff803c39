"""The `--json` option every benchmark offers: its figures as JSON, to a file or to stdout.

Shared so that each script's `main` says only what it measures, and so that every benchmark
writes its figures the same way for whoever compares runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="also write the figures as JSON to PATH (stdout when no PATH is given)",
    )


def write_figures(figures: Any, target: str | None) -> None:
    """Write the figures where `--json` said: nowhere (None), stdout ("-") or a file."""
    if not target:
        return
    payload = json.dumps(figures, indent=2)
    if target == "-":
        print(payload)
    else:
        Path(target).write_text(payload + "\n")
        print(f"figures written to {target}")
