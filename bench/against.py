"""Run benchmark scripts against an earlier revision and the working tree, in one run.

    .venv/bin/python bench/against.py REV turn_overhead.py compaction.py -- --db sqlite

A change that must leave performance as it was is judged by figures taken side by side, on the
same machine and minute, not against numbers from another day. Each script runs first in a
checkout of REV (a `git worktree` in a temporary folder, removed afterwards) and then in this
tree, each as its own process with its own `PYTHONPATH`, so each imports its own `app`; the
order alternates per script so drift does not always favour one side. Arguments after `--` go
to every script. With `--here` both sides run this tree's script (each importing its own `app`),
for a figure the earlier revision's script does not print; its imports must exist on both sides.
Output is each run's own report, headed by its side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(tree: Path, script: Path, extra: list[str]) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, str(script), *extra], cwd=tree, env=env).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--here",
        action="store_true",
        help="run this tree's scripts on both sides (each side's app imported), for a figure "
        "the earlier revision's scripts do not print",
    )
    parser.add_argument("rev", help="the revision to compare with (e.g. HEAD~1)")
    parser.add_argument("scripts", nargs="+", help="bench scripts, e.g. turn_overhead.py")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1 :]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as folder:
        before = Path(folder) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(before), args.rev],
            cwd=ROOT,
            check=True,
        )
        try:
            for index, script in enumerate(args.scripts):
                sides = [("before", args.rev, before), ("after", "working tree", ROOT)]
                for side, name, tree in sides if index % 2 == 0 else sides[::-1]:
                    print(f"\n===== {script} {side} ({name}) =====", flush=True)
                    scripts = ROOT if args.here else tree
                    failed |= run(tree, scripts / "bench" / script, extra) != 0
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
