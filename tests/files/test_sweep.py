"""The start-up sweep: stale `.partial-*` files are removed, nothing else ever is.

Folders are planted as an interrupted process would leave them and aged by setting their mtimes.
Each test sweeps a data folder of its own. The sweep never asks a database what a file is: a
data dir started once beside another database must lose nothing.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path

import pytest

from app.clock import Clock
from app.files.sweep import STALE_SECONDS, Swept, start_sweep, sweep, sweep_partials
from tests.clock import ShiftedClock

AGED = time.time() - STALE_SECONDS - 60


def age(path: Path, when: float = AGED) -> Path:
    """Set the path's (and a folder's entries') mtimes to `when`, as if untouched since."""
    if path.is_dir():
        for entry in path.iterdir():
            os.utime(entry, (when, when), follow_symlinks=False)
    os.utime(path, (when, when))
    return path


def plant(root: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = root / "uploads" / name
    folder.mkdir(parents=True)
    for filename, content in files.items():
        (folder / filename).write_bytes(content)
    return folder


def user_root(data_dir: Path) -> Path:
    return data_dir / "users" / str(uuid.uuid4())


async def test_only_stale_partials_are_removed(tmp_path: Path) -> None:
    root = user_root(tmp_path)
    half_written = age(plant(root, str(uuid.uuid4()), {".partial-k3j2": b"half a fi"}))
    receiving = plant(root, str(uuid.uuid4()), {".partial-live": b"arriving"})  # fresh
    complete = age(plant(root, str(uuid.uuid4()), {"notes.txt": b"no row names me"}))
    beside = age(plant(root, str(uuid.uuid4()), {"a.txt": b"kept", ".partial-x": b"old"}))
    not_ours = age(plant(root, "drafts", {".partial-looking.txt": b"the user's own"}))
    (root / ".partial-in-the-workspace").write_text("not an upload's")
    age(root / ".partial-in-the-workspace")

    assert await sweep(tmp_path, Clock()) == Swept(partials=2, folders=1)

    assert not half_written.exists()  # the partial was all it held
    assert (receiving / ".partial-live").read_bytes() == b"arriving"
    assert (complete / "notes.txt").read_bytes() == b"no row names me"
    assert sorted(p.name for p in beside.iterdir()) == ["a.txt"]
    assert (not_ours / ".partial-looking.txt").read_bytes() == b"the user's own"
    assert (root / ".partial-in-the-workspace").read_text() == "not an upload's"
    assert await sweep(tmp_path, Clock()) == Swept()  # nothing left to do


async def test_folders_no_database_names_survive_any_number_of_starts(tmp_path: Path) -> None:
    root = user_root(tmp_path)
    folders = [age(plant(root, str(uuid.uuid4()), {"f.txt": b"x"})) for _ in range(50)]
    for _ in range(3):
        assert await sweep(tmp_path, Clock()) == Swept()
    assert all((folder / "f.txt").read_bytes() == b"x" for folder in folders)


async def test_staleness_is_judged_by_the_clock(tmp_path: Path) -> None:
    folder = plant(user_root(tmp_path), str(uuid.uuid4()), {".partial-q": b"half"})  # fresh
    clock = ShiftedClock()
    assert await sweep(tmp_path, clock) == Swept()
    clock.advance(seconds=STALE_SECONDS + 60)
    assert await sweep(tmp_path, clock) == Swept(partials=1, folders=1)
    assert not folder.exists()


def test_a_symlinked_partial_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    folder = plant(user_root(tmp_path / "data"), str(uuid.uuid4()), {})
    (folder / ".partial-link").symlink_to(outside)
    os.utime(folder / ".partial-link", (AGED, AGED), follow_symlinks=False)

    assert sweep_partials(tmp_path / "data", now=time.time()) == Swept()
    assert outside.read_text() == "precious"


async def test_a_failing_sweep_says_so_and_stops_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> Swept:
        raise PermissionError("no")

    monkeypatch.setattr("app.files.sweep.sweep_partials", broken)
    with caplog.at_level(logging.WARNING, logger="hearth.files"):
        await start_sweep(tmp_path, Clock())
    assert "unfinished uploads not swept" in caplog.text
