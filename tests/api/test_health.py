"""Health probes, and the OpenAPI document describing every route."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.main import create_app
from app.settings import Settings
from tests.support import ROOT, Client, free_port, http_client, live_server

pytestmark = pytest.mark.usefixtures("services")


async def test_healthz_and_readyz(anon: Client) -> None:
    assert (await anon.get("/healthz")).json() == {"status": "ok"}
    ready = await anon.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ok"}


async def test_readyz_is_503_when_the_database_does_not_answer(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,
        database_url=f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none",
        data_dir=tmp_path,
        secret_key="k",
        providers_file=ROOT / "config" / "providers.yaml",
    )
    async with (
        live_server(create_app(settings)) as base_url,
        http_client(base_url=base_url) as http,
    ):
        assert (await http.get("/healthz")).status_code == 200
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"detail": "database not reachable"}


async def test_openapi_lists_every_route_with_models(anon: Client) -> None:
    spec = (await anon.get("/openapi.json")).json()
    paths = spec["paths"]
    expected = {
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/api/auth/register", "post"),
        ("/api/auth/login", "post"),
        ("/api/auth/logout", "post"),
        ("/api/auth/me", "get"),
        ("/api/models", "get"),
        ("/api/chats", "post"),
        ("/api/chats", "get"),
        ("/api/chats/{chat_id}", "get"),
        ("/api/chats/{chat_id}", "patch"),
        ("/api/chats/{chat_id}", "delete"),
    }
    present = {(path, method) for path, methods in paths.items() for method in methods}
    assert expected <= present
    for path, method in expected:
        operation = paths[path][method]
        assert operation.get("summary") or operation.get("description"), (path, method)
        success = next(code for code in operation["responses"] if code.startswith("2"))
        if success != "204":
            schema = operation["responses"][success]["content"]["application/json"]["schema"]
            assert schema, (path, method)
    assert (await anon.get("/docs")).status_code == 200


async def test_openapi_sections_keep_their_order_whatever_order_routes_are_matched_in(
    anon: Client,
) -> None:
    """The routers are matched busiest first; the document's sections (its tags, which the docs
    pages follow) are declared in reading order, each with a description, and every tag an
    operation carries is one of them."""
    spec = (await anon.get("/openapi.json")).json()
    declared = [tag["name"] for tag in spec["tags"]]
    assert declared[:2] == ["health", "auth"] and declared[-1] == "data"
    assert all(tag.get("description") for tag in spec["tags"])
    used = {t for methods in spec["paths"].values() for op in methods.values() for t in op["tags"]}
    assert used == set(declared)
    assert next(iter(spec["paths"])) == "/api/chats/{chat_id}/messages"  # matched first


async def test_models_route_lists_every_configured_model(user: Client) -> None:
    models = (await user.get("/api/models")).json()
    by_id = {model["id"]: model for model in models}
    assert by_id["demo/scripted"]["available"] is True
    assert by_id["demo/scripted"]["kind"] == "demo"
    assert by_id["moonshot/k3"]["dtl_mode"] == "kimi_system_tools"
    assert by_id["moonshot/k3"]["capabilities"] == ["vision", "video", "tool_search"]
    assert by_id["anthropic/claude-sonnet-4-5"]["dtl_mode"] == "anthropic_tool_reference"
    assert set(models[0]) == {
        "id",
        "provider",
        "kind",
        "name",
        "capabilities",
        "dtl_mode",
        "context_window",
        "available",
    }
