"""`hearth serve --workers`: one worker per core on PostgreSQL, one on SQLite, unless told."""

from __future__ import annotations

from typing import Any

import pytest

from app import cli
from app.cli import default_workers

POSTGRESQL = "postgresql+asyncpg://postgres@127.0.0.1:5432/hearth"
SQLITE = "sqlite+aiosqlite:///./var/hearth.db"


def test_postgresql_runs_a_worker_per_core_this_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda _pid: {0, 2, 5})
    assert default_workers(POSTGRESQL) == 3


def test_sqlite_runs_one_worker_whatever_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert default_workers(SQLITE) == 1
    assert default_workers("sqlite+aiosqlite:///:memory:") == 1


@pytest.mark.parametrize(
    ("url", "argv", "expected"),
    [
        (POSTGRESQL, [], 4),
        (SQLITE, [], 1),
        (POSTGRESQL, ["--workers", "1"], 1),
        (SQLITE, ["--workers", "3"], 3),
    ],
)
def test_serve_passes_the_default_or_the_number_it_was_given(
    monkeypatch: pytest.MonkeyPatch, url: str, argv: list[str], expected: int
) -> None:
    served: list[Any] = []
    monkeypatch.setenv("HEARTH_DATABASE_URL", url)
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setattr(cli, "_serve", lambda settings, host, port, workers: served.append(workers))
    cli.main(["serve", *argv])
    assert served == [expected]


@pytest.mark.parametrize(
    ("value", "reason"),
    [("0", "not between 1 and 64"), ("-2", "not between 1 and 64"), ("65", "not between 1 and 64"),
     ("two", "not a whole number"), ("1.5", "not a whole number")],
)  # fmt: skip
def test_a_worker_count_out_of_range_or_not_a_number_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str, reason: str
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(cli, "_serve", lambda *args: served.append(args))
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--workers", value])
    assert exited.value.code == 2 and served == []
    error = capsys.readouterr().err
    assert "argument --workers" in error and reason in error
