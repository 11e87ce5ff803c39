"""Golden snapshots fail when missing or different, unless pytest runs with --update-golden."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import golden


@pytest.fixture
def comparing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(golden, "update", False)


@pytest.mark.usefixtures("comparing")
def test_a_missing_snapshot_fails_and_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="missing; run pytest with --update-golden"):
        golden.assert_golden("new", {"a": 1}, directory=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("comparing")
def test_a_different_snapshot_fails(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(golden.render({"a": 1}))
    golden.assert_golden("old", {"a": 1}, directory=tmp_path)
    with pytest.raises(AssertionError, match="differs"):
        golden.assert_golden("old", {"a": 2}, directory=tmp_path)


def test_update_writes_what_comparing_then_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(golden, "update", True)
    golden.assert_golden(
        "made", {"when": "Current date and time: 2026-01-01 10:00 UTC."}, directory=tmp_path
    )
    assert (
        tmp_path / "made.json"
    ).read_text() == '{\n  "when": "Current date and time: <now>."\n}\n'
    monkeypatch.setattr(golden, "update", False)
    golden.assert_golden(
        "made", {"when": "Current date and time: 2027-02-02 11:11 UTC."}, directory=tmp_path
    )
