"""Cross-origin browser use: only configured origins, with credentials and the CSRF header."""

from __future__ import annotations

from pathlib import Path

from app.main import create_app
from app.settings import Settings
from tests.support import ROOT, http_client, live_server


async def test_allowed_origin_gets_credentialed_cors_and_others_none(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'cors.db'}",
        data_dir=tmp_path,
        secret_key="k",
        providers_file=ROOT / "config" / "providers.yaml",
        allowed_origins="https://app.example",  # type: ignore[arg-type]
    )
    async with (
        live_server(create_app(settings)) as base_url,
        http_client(base_url=base_url) as http,
    ):
        preflight = await http.options(
            "/api/chats",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, x-csrf-token",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert "x-csrf-token" in preflight.headers["access-control-allow-headers"].lower()

        foreign = await http.options(
            "/api/chats",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in foreign.headers

        plain = await http.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in plain.headers
