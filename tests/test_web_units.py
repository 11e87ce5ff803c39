"""The browser client's plain-JS units, run under Node's built-in test runner from pytest.

`app/web/js/markdown.js` and `app/web/js/diff.js` turn model and user text into DOM nodes, and
the Markdown renderer is where a script injection would get in, so their tests must run with
the rest of the suite rather than only when someone remembers `node --test`. The tests live in
`tests/js/*.test.mjs` on a small fake DOM (`tests/js/fake-dom.mjs`) and need only Node.js, no
npm packages. Without `node` on PATH the test is skipped locally and fails under `CI=true`.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support import IN_CI, ROOT

# Runs the web client's unit tests under Node.js: the full suite's, not the quick subset's.
pytestmark = pytest.mark.slow

TEST_FILES = ["tests/js/markdown.test.mjs", "tests/js/diff.test.mjs"]
TIMEOUT = 120


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is not None:
        return node
    problem = "Node.js (`node`) is not on PATH"
    if IN_CI:
        pytest.fail(problem + " (mandatory under CI=true)", pytrace=False)
    pytest.skip(problem)


def test_markdown_and_diff_units_pass_under_node() -> None:
    node = node_or_skip()
    for name in TEST_FILES:
        assert (ROOT / name).is_file(), name
    result = subprocess.run(
        [node, "--test", *TEST_FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"node --test exited with {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )
