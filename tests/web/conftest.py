"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, against the live server.

Playwright for Python brings its driver but no browser here: the tests launch the system's
`chromium` through `executable_path`, so nothing is downloaded. Chromium is started as the
machine's closed network needs (no background networking, no component updates), with a fresh
profile per test through a new browser context. Without Chromium or Playwright the tests skip
locally and fail under `CI=true`, where `.ci/run` installs both.

Every page collects its uncaught script errors and failed console messages; a test fails if the
client threw, so a broken module cannot hide behind a test that only looked at one element.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.auth.tokens import CSRF_COOKIE, SESSION_COOKIE
from app.services import Services
from tests.api.conftest import fakes as fakes  # the fake providers, for the tests that use them
from tests.api.conftest import registry as registry
from tests.support import IN_CI, Client

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


def chromium_or_skip() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    problem = None
    if path is None:
        problem = "Chromium is not installed (Debian package `chromium`)"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed (pip install playwright)"
    if problem is None:
        assert path is not None
        return path
    if IN_CI:
        pytest.fail(problem + " (mandatory under CI=true)", pytrace=False)
    pytest.skip(problem)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


class Tab:
    """A browser page on the live server, with what its scripts reported."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    async def open(self) -> Any:
        await self.page.goto(self.base_url + "/")
        return self.page


@pytest.fixture
async def tab(browser: Any, server: tuple[str, Services], services: Services) -> AsyncIterator[Tab]:
    base_url, _ = server
    context = await browser.new_context(base_url=base_url, accept_downloads=False)
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    opened = Tab(page, base_url)
    yield opened
    await context.close()
    assert opened.errors == [], opened.errors


async def sign_in_as(tab: Tab, client: Client) -> Any:
    """Give the tab the client's session cookies (as its own sign-in would) and open the page."""
    host = httpx.URL(tab.base_url).host
    await tab.page.context.add_cookies(
        [
            {"name": name, "value": client.http.cookies[name], "domain": host, "path": "/"}
            for name in (SESSION_COOKIE, CSRF_COOKIE)
        ]
    )
    page = await tab.open()
    await page.locator("#app[aria-busy=false]").wait_for()  # models, chats and the chat loaded
    return page
