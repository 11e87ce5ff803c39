"""The web client as files: served at `/` and `/web/*` with strict headers, small, self-contained.

The browser tests (tests/web) show that it works; these show what it is: no bundler output, no
CDN, no HTML built from strings, and a weight budget of 150 KB for everything it loads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.api.web import WEB_DIR
from tests.support import Client

BUDGET_BYTES = 150_000
CLIENT_SUFFIXES = {".html", ".js", ".css"}


def client_files() -> list[Path]:
    return sorted(p for p in WEB_DIR.rglob("*") if p.suffix in CLIENT_SUFFIXES)


def test_the_whole_client_weighs_under_150_kb() -> None:
    files = client_files()
    assert {p.name for p in files} >= {"index.html", "style.css", "main.js", "markdown.js"}
    total = sum(p.stat().st_size for p in files)
    assert total < BUDGET_BYTES, f"{total} bytes: " + ", ".join(
        f"{p.name} {p.stat().st_size}" for p in files
    )


def test_everything_it_loads_is_in_the_repository() -> None:
    page = (WEB_DIR / "index.html").read_text()
    for reference in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert reference.startswith(("/web/", "#", "data:")), reference
        if reference.startswith("/web/"):
            assert (WEB_DIR / reference.removeprefix("/web/")).is_file(), reference
    for module in WEB_DIR.glob("js/*.js"):
        source = module.read_text()
        for target in re.findall(r'^import .* from "([^"]+)";', source, flags=re.M):
            assert target.startswith("./"), (module.name, target)
            assert (module.parent / target).is_file(), (module.name, target)
        assert not re.search(r"\binnerHTML\b|outerHTML|insertAdjacentHTML|document\.write", source)
        assert "eval(" not in source and "new Function" not in source


@pytest.mark.usefixtures("services")
async def test_the_page_and_its_modules_are_served_with_a_strict_policy(anon: Client) -> None:
    page = await anon.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "'unsafe-inline'" not in policy and "http" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/web/js/main.js">' in page.text

    module = await anon.get("/web/js/main.js")
    assert module.status_code == 200
    assert module.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert module.headers["content-security-policy"] == policy
    again = await anon.get("/web/js/main.js", headers={"if-none-match": module.headers["etag"]})
    assert again.status_code == 304
    assert (await anon.http.head("/")).status_code == 200


@pytest.mark.usefixtures("services")
@pytest.mark.parametrize(
    "path",
    [
        "/web/nothing.js",
        "/web/../main.py",
        "/web/%2e%2e/main.py",
        "/web/js/%2e%2e/%2e%2e/api/web.py",
        "/web/..%2f..%2fsettings.py",
        "/index.html.bak",
    ],
)
async def test_unknown_and_traversal_paths_are_404(anon: Client, path: str) -> None:
    response = await anon.get(path)
    assert response.status_code == 404, (path, response.text[:200])
    assert "BaseSettings" not in response.text and "import" not in response.text


@pytest.mark.usefixtures("services")
async def test_api_paths_are_not_answered_with_the_page(anon: Client) -> None:
    response = await anon.post("/api/nothing", json={})
    assert response.status_code == 404 and response.json() == {"detail": "Not Found"}
    assert (await anon.post("/web/js/main.js")).status_code == 405
