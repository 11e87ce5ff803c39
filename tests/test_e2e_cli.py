"""The `hearth` command as an operator runs it: migrate, create users, serve on bare defaults."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, free_port, wait_until_sync

HEARTH = [sys.executable, "-m", "app.cli"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty folder with only the shipped config, like a fresh deployment."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HEARTH, *args], cwd=cwd, env=bare_env(), capture_output=True, text=True, timeout=120
    )


def test_migrate_then_users_create(workdir: Path) -> None:
    done = run(["migrate"], workdir)
    assert done.returncode == 0, done.stderr
    assert (workdir / "var" / "hearth.db").exists()

    admin = run(
        ["users", "create", "--email", "Root@Example.com", "--password", "pw-123456", "--admin"],
        workdir,
    )
    assert admin.returncode == 0, admin.stderr
    again = run(
        ["users", "create", "--email", "root@example.com", "--password", "pw-123456"], workdir
    )
    assert again.returncode != 0 and "exists" in again.stderr
    short = run(["users", "create", "--email", "x@example.com", "--password", "short"], workdir)
    assert short.returncode != 0 and "password" in short.stderr

    import sqlite3

    with sqlite3.connect(workdir / "var" / "hearth.db") as db:
        rows = db.execute("SELECT email, is_admin FROM users").fetchall()
    assert rows == [("root@example.com", 1)]


def test_bad_providers_file_stops_startup_naming_file_and_entry(workdir: Path) -> None:
    (workdir / "config" / "providers.yaml").write_text(
        "providers:\n  - {id: broken, kind: nonsense, models: [{id: m}]}\n"
    )
    done = subprocess.run(
        [*HEARTH, "serve", "--port", str(free_port())],
        cwd=workdir,
        env=bare_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "config/providers.yaml" in done.stderr
    assert "provider 'broken'" in done.stderr
    assert "kind" in done.stderr


def test_serve_on_embedded_defaults(workdir: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*HEARTH, "serve", "--port", str(port)],
        cwd=workdir,
        env=bare_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, "hearth serve stopped while starting"
        try:
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until_sync(healthy, within=60, failure="hearth serve did not come up")
        assert httpx.get(f"{base}/readyz").status_code == 200
        with httpx.Client(base_url=base) as client:
            response = client.post(
                "/api/auth/register", json={"email": "a@example.com", "password": "long enough"}
            )
            assert response.status_code == 201
            chat = client.post(
                "/api/chats", json={}, headers={"X-CSRF-Token": client.cookies["hearth_csrf"]}
            )
            assert chat.json()["model"] == "demo/scripted"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)

    secret = workdir / "var" / "data" / "secret_key"
    assert secret.exists() and stat.S_IMODE(secret.stat().st_mode) == 0o600
    first = secret.read_text()
    assert (workdir / "var" / "hearth.db").exists()
    # A second start keeps the same key (sessions survive restarts).
    again = run(["migrate"], workdir)
    assert again.returncode == 0 and secret.read_text() == first


def test_users_list_disable_enable_set_admin_and_delete(workdir: Path) -> None:
    assert run(["migrate"], workdir).returncode == 0
    for email, extra in (("root@example.com", ["--admin"]), ("ada@example.com", [])):
        made = run(
            ["users", "create", "--email", email, "--password", "pw-123456", *extra], workdir
        )
        assert made.returncode == 0, made.stderr

    def listed(*args: str) -> list[list[str]]:
        done = run(["users", "list", *args], workdir)
        assert done.returncode == 0, done.stderr
        return [line.split("\t") for line in done.stdout.splitlines()]

    everyone = listed()
    assert [(row[1], row[2]) for row in everyone] == [
        ("ada@example.com", "-"),
        ("root@example.com", "admin"),
    ]
    ada_id = everyone[0][0]
    assert [row[1] for row in listed("--search", "ADA")] == ["ada@example.com"]

    assert run(["users", "disable", "Ada@Example.com"], workdir).returncode == 0
    assert listed("--search", "ada")[0][2] == "disabled"
    assert run(["users", "enable", ada_id], workdir).returncode == 0
    assert run(["users", "set-admin", "ada@example.com", "on"], workdir).returncode == 0
    assert listed("--search", "ada")[0][2] == "admin"
    assert run(["users", "set-admin", "ada@example.com", "off"], workdir).returncode == 0

    last = run(["users", "set-admin", "root@example.com", "off"], workdir)
    assert last.returncode != 0 and "no enabled administrator" in last.stderr
    last = run(["users", "disable", "root@example.com"], workdir)
    assert last.returncode != 0 and "no enabled administrator" in last.stderr
    unknown = run(["users", "disable", "nobody@example.com"], workdir)
    assert unknown.returncode != 0 and "no user nobody@example.com" in unknown.stderr

    files = workdir / "var" / "data" / "users" / ada_id / "notes"
    files.mkdir(parents=True)
    (files / "todo.md").write_text("water the tomatoes")
    unconfirmed = run(["users", "delete", "ada@example.com"], workdir)
    assert unconfirmed.returncode != 0 and "--yes" in unconfirmed.stderr
    assert len(listed()) == 2
    deleted = run(["users", "delete", "ada@example.com", "--yes"], workdir)
    assert deleted.returncode == 0, deleted.stderr
    assert [row[1] for row in listed()] == ["root@example.com"]
    assert not (workdir / "var" / "data" / "users" / ada_id).exists()
    last = run(["users", "delete", "root@example.com", "--yes"], workdir)
    assert last.returncode != 0 and "no enabled administrator" in last.stderr
