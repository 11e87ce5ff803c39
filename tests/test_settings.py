"""Settings: embedded defaults, the secret generated once, and refused combinations."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.settings import Settings, load_or_create_secret


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HEARTH_"):
            monkeypatch.delenv(name)


def test_defaults_are_the_embedded_ones() -> None:
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite+aiosqlite:///./var/hearth.db"
    assert settings.data_dir == Path("./var/data")
    assert settings.providers_file == Path("config/providers.yaml")
    assert settings.mcp_file == Path("config/mcp.yaml")
    assert settings.allow_registration is True
    assert settings.cookie_secure is False
    assert settings.cookie_samesite == "lax"
    assert settings.allowed_origins == []
    assert settings.max_upload_bytes == 268_435_456
    assert settings.auto_migrate is True
    assert (settings.session_idle_days, settings.session_max_days) == (7, 30)
    assert settings.login_max_failures == 5
    assert settings.max_rounds == 25
    assert settings.turn_lease_seconds == 30
    assert settings.compact_threshold == 0.6
    assert settings.compact_keep == 10
    assert settings.search_budget == 5
    assert settings.summary_model == ""


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_DATABASE_URL", "postgresql+asyncpg://u@h/db")
    monkeypatch.setenv("HEARTH_ALLOWED_ORIGINS", "https://a.example, https://b.example/")
    monkeypatch.setenv("HEARTH_AUTO_MIGRATE", "0")
    monkeypatch.setenv("HEARTH_COOKIE_SAMESITE", "Strict")
    settings = Settings(_env_file=None)
    assert settings.database_url == "postgresql+asyncpg://u@h/db"
    assert settings.allowed_origins == ["https://a.example", "https://b.example"]
    assert settings.auto_migrate is False
    assert settings.cookie_samesite == "strict"


def test_samesite_none_needs_secure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_COOKIE_SAMESITE", "none")
    with pytest.raises(ValidationError, match="HEARTH_COOKIE_SECURE"):
        Settings(_env_file=None)
    monkeypatch.setenv("HEARTH_COOKIE_SECURE", "true")
    assert Settings(_env_file=None).cookie_samesite == "none"


@pytest.mark.parametrize(
    ("name", "value"),
    [("HEARTH_MAX_UPLOAD_BYTES", "-1"), ("HEARTH_COOKIE_SAMESITE", "sometimes")],
)
def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)


def test_secret_key_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    key = settings.signing_key
    path = tmp_path / "data" / "secret_key"
    assert len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Settings(_env_file=None, data_dir=tmp_path / "data").signing_key == key


def test_configured_secret_wins(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path, secret_key="from-env")
    assert settings.signing_key == "from-env"
    assert not (tmp_path / "secret_key").exists()


def test_concurrent_creators_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    keys: list[str] = []
    threads = [
        threading.Thread(target=lambda: keys.append(load_or_create_secret(path))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == len(threads)
    assert len(set(keys)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]
