"""The account panels in headless Chromium: settings (password, sessions, API keys), the usage
view, and for admins the users panel and usage per user.

Each test works the page as a person does, by the names a screen reader announces, then checks
the outcome where it lands: in the database, and through the API as another client or a script
with a key sees it. The usage tables are compared with the server's own figures, formatted the
way the page promises (a count with thousands separators, dollars to four places below $1).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from playwright.async_api import expect
from sqlalchemy import select

from app.models import UsageDaily, User
from app.services import Services
from tests.api.test_accounts import as_key
from tests.api.test_admin import make_admin
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply
from tests.fakes.script import Usage
from tests.provider_setup import MODEL_IDS
from tests.support import Client, http_client, wait_until_idle
from tests.web.conftest import Tab, sign_in_as

FIGURES = ("requests", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@asynccontextmanager
async def other_browser(base_url: str, user: Client, agent: str) -> AsyncIterator[Client]:
    """The same person signed in elsewhere, through the sign-in route, as `agent`."""
    async with http_client(base_url=base_url, timeout=30) as http:
        client = Client(http)
        response = await client.post(
            "/api/auth/login",
            json={"email": user.user["email"], "password": user.password},
            headers={"User-Agent": agent},
        )
        assert response.status_code == 200, response.text
        yield client


async def signed_in(client: Client) -> bool:
    status = (await client.get("/api/auth/me")).status_code
    assert status in (200, 401), status
    return status == 200


async def open_dialog(page: Any, button: str, heading: str) -> Any:
    await page.get_by_role("button", name=button).click()
    dialog = page.get_by_role("dialog", name=heading)
    await expect(dialog).to_be_visible()
    return dialog


def this_month() -> dict[str, str]:
    today = datetime.now(UTC).date()
    return {"from": today.replace(day=1).isoformat(), "to": today.isoformat()}


def count(value: int) -> str:
    return f"{value:,}"


def usd(value: float | None) -> str:
    """As the page writes it: JavaScript's toFixed rounds the exact binary value half up."""
    if value is None:
        return "no price"
    places = Decimal("0.01") if value >= 1 else Decimal("0.0001")
    return "$" + str(Decimal(value).quantize(places, rounding=ROUND_HALF_UP))


def row_texts(figures: dict[str, Any]) -> list[str]:
    """The cells after the row's name: each kind of token, their sum, the cost."""
    total = sum(figures[name] for name in FIGURES[1:])
    return [count(figures[name]) for name in FIGURES] + [count(total), usd(figures["cost_usd"])]


async def expect_usage_table(table: Any, body: dict[str, Any], names: list[str]) -> None:
    """The table shows `body` (a usage answer) row for row, under `names`, and its total."""
    rows = table.locator("tbody tr")
    await expect(rows).to_have_count(len(body["items"]))
    for index, (name, item) in enumerate(zip(names, body["items"], strict=True)):
        await expect(rows.nth(index).locator("th")).to_have_text(name)
        await expect(rows.nth(index).locator("td")).to_have_text(row_texts(item))
    await expect(table.locator("tfoot td")).to_have_text(row_texts(body["total"]))


async def turn(
    client: Client, fakes: dict[str, FakeProviderServer], kind: str, usage: Usage
) -> None:
    fakes[kind].script(Reply(text="Done.", usage=usage))
    chat = (await client.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()
    response = await client.post(f"/api/chats/{chat['id']}/messages", json={"content": "Go"})
    assert response.status_code == 200, response.text
    await wait_until_idle(client, chat["id"])


# -- settings: password and sessions -----------------------------------------------------------


async def test_sessions_are_listed_and_one_is_signed_out_from_settings(
    tab: Tab, user: Client
) -> None:
    async with other_browser(tab.base_url, user, "OtherPhone/1.0") as phone:
        page = await sign_in_as(tab, user)
        dialog = await open_dialog(page, "Settings", "Settings")
        sessions = dialog.get_by_role("list", name="Sessions")
        await expect(sessions.get_by_role("listitem")).to_have_count(2)
        ours = sessions.get_by_role("listitem").filter(has_text="this browser")
        await expect(ours).to_have_count(1)
        await expect(ours.get_by_role("button")).to_have_count(0)  # the footer signs this one out

        await dialog.get_by_role("button", name="Sign out the session of OtherPhone/1.0").click()
        await expect(sessions.get_by_role("listitem")).to_have_count(1)
        await expect(sessions).to_contain_text("this browser")
        assert not await signed_in(phone)
        assert await signed_in(user)


async def test_the_password_is_changed_in_settings_and_other_sessions_end(
    tab: Tab, user: Client, anon: Client
) -> None:
    async with other_browser(tab.base_url, user, "Laptop/2.0") as laptop:
        page = await sign_in_as(tab, user)
        dialog = await open_dialog(page, "Settings", "Settings")
        current = dialog.get_by_label("Current password")
        new = dialog.get_by_label("New password")
        change = dialog.get_by_role("button", name="Change password")
        error = dialog.locator("#password-error")

        # A wrong current password: said so, the page stays signed in, nothing is revoked.
        await current.fill("not my password")
        await new.fill("a new horse staple")
        await change.click()
        await expect(error).to_have_text("That is not your current password.")
        await expect(dialog).to_be_visible()
        await expect(page.get_by_role("button", name="Sign out", exact=True)).to_be_visible()
        assert await signed_in(laptop)

        # Too short a new password is refused before it is sent.
        await current.fill(user.password)
        await new.fill("short")
        await change.click()
        await expect(error).to_have_text("Choose a new password of at least 8 characters.")
        assert await signed_in(laptop)

        await new.fill("a new horse staple")
        await change.click()
        await expect(dialog.get_by_role("status")).to_have_text(
            "Your password is changed, and your other sessions are signed out."
        )
        await expect(error).to_have_text("")
        await expect(current).to_have_value("")
        sessions = dialog.get_by_role("list", name="Sessions")
        await expect(sessions.get_by_role("listitem")).to_have_count(1)
        await expect(sessions).to_contain_text("this browser")
        assert not await signed_in(laptop)
        assert await signed_in(user)

    email = user.user["email"]
    old = await anon.post("/api/auth/login", json={"email": email, "password": user.password})
    assert old.status_code == 401
    fresh = await anon.post(
        "/api/auth/login", json={"email": email, "password": "a new horse staple"}
    )
    assert fresh.status_code == 200, fresh.text


async def test_signing_out_everywhere_ends_every_session_this_one_included(
    tab: Tab, user: Client
) -> None:
    async with other_browser(tab.base_url, user, "Tablet/3.0") as tablet:
        page = await sign_in_as(tab, user)
        dialog = await open_dialog(page, "Settings", "Settings")
        await dialog.get_by_role("button", name="Sign out everywhere").click()
        await expect(dialog).to_be_hidden()
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        await expect(page.locator("#auth-error")).to_have_text("You have signed out everywhere.")
        assert not await signed_in(tablet)
        assert not await signed_in(user)


# -- settings: API keys --------------------------------------------------------------------------


async def test_a_new_api_key_is_shown_once_copied_used_and_revoked(tab: Tab, user: Client) -> None:
    await tab.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = await sign_in_as(tab, user)
    dialog = await open_dialog(page, "Settings", "Settings")
    keys = dialog.get_by_role("list", name="API keys")
    await expect(keys).to_have_text("No API keys yet.")
    create = dialog.get_by_role("button", name="Create key")

    # No name: said so, and no key is made.
    await create.click()
    await expect(dialog.locator("#keys-error")).to_contain_text("Give the key a name")
    assert (await user.get("/api/keys")).json() == []

    # A bad expiry: the server's reason is shown, and no key is made.
    await dialog.get_by_label("Key name").fill("nightly report")
    await dialog.get_by_label("Expires after (days)").fill("99999")
    await create.click()
    await expect(dialog.locator("#keys-error")).to_contain_text("expires_in_days")
    assert (await user.get("/api/keys")).json() == []

    await dialog.get_by_label("Expires after (days)").fill("30")
    await create.click()
    shown = dialog.get_by_label("Your new key")
    await expect(shown).to_be_visible()
    key = await shown.input_value()
    assert key.startswith("hth_") and len(key) >= 36, key
    await expect(dialog.locator("#keys-error")).to_have_text("")
    await dialog.get_by_role("button", name="Copy").click()
    await expect(dialog.get_by_role("button", name="Copied")).to_be_visible()
    assert await page.evaluate("navigator.clipboard.readText()") == key

    (stored,) = (await user.get("/api/keys")).json()
    assert stored["name"] == "nightly report" and key.startswith(stored["prefix"])
    assert stored["expires_at"] is not None
    item = keys.get_by_role("listitem")
    await expect(item).to_have_count(1)
    await expect(item).to_contain_text("nightly report")
    await expect(item).to_contain_text(stored["prefix"] + "…")
    await expect(item).to_contain_text("last used never")

    async with as_key(tab.base_url, key) as script:
        me = await script.get("/api/auth/me")
        assert me.status_code == 200 and me.json()["id"] == user.user["id"]

        # Shown once: closed and opened again, the key is nowhere on the page.
        await dialog.get_by_role("button", name="Close").click()
        dialog = await open_dialog(page, "Settings", "Settings")
        await expect(dialog.get_by_label("Your new key")).to_be_hidden()
        await expect(item).not_to_contain_text("last used never")  # the script's request
        assert key not in await page.content()
        assert await page.locator("#new-key-value").input_value() == ""

        await dialog.get_by_role("button", name="Revoke the key nightly report").click()
        await expect(keys).to_have_text("No API keys yet.")
        assert (await script.get("/api/auth/me")).status_code == 401
    assert (await user.get("/api/keys")).json() == []


# -- usage ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("registry")
async def test_the_usage_view_shows_this_months_tokens_and_cost_per_model(
    tab: Tab,
    user: Client,
    new_user: NewUser,
    services: Services,
    fakes: dict[str, FakeProviderServer],
) -> None:
    page = await sign_in_as(tab, user)
    dialog = await open_dialog(page, "Usage", "Usage this month")
    await expect(dialog).to_contain_text("Nothing used this month yet.")
    await dialog.get_by_role("button", name="Close").click()

    await turn(user, fakes, "anthropic", Usage(10_000, 2_000, 6_000, 1_000))
    await turn(user, fakes, "anthropic", Usage(1_234, 567))
    await turn(user, fakes, "openai", Usage(5_000, 1_000, 2_000))
    await turn(user, fakes, "moonshot", Usage(1_000, 100))  # no pricing
    await turn(await new_user(), fakes, "openai", Usage(7_777, 7_777))  # someone else's
    async with services.sessions() as db:  # last month's, not this month's
        first = datetime.now(UTC).date().replace(day=1)
        db.add(
            UsageDaily(
                user_id=uuid.UUID(user.user["id"]),
                model=MODEL_IDS["openai"],
                day=first - timedelta(days=1),
                requests=50,
                input_tokens=900_000,
                output_tokens=1,
                cache_read_tokens=0,
                cache_write_tokens=0,
            )
        )
        await db.commit()

    body = (await user.get("/api/usage", params={**this_month(), "group_by": "model"})).json()
    models = [item["model"] for item in body["items"]]
    assert sorted(models) == sorted(MODEL_IDS[k] for k in ("anthropic", "openai", "moonshot"))
    claude = next(item for item in body["items"] if item["model"] == MODEL_IDS["anthropic"])
    assert claude["requests"] == 2 and claude["input_tokens"] == 11_234
    assert body["total"]["requests"] == 4  # neither the other user's nor last month's

    dialog = await open_dialog(page, "Usage", "Usage this month")
    month = this_month()
    await expect(dialog).to_contain_text(f"From {month['from']} to {month['to']} (UTC)")
    table = dialog.get_by_role("table", name="Your usage this month per model")
    await expect_usage_table(table, body, models)
    moonshot = table.locator("tbody tr").nth(models.index(MODEL_IDS["moonshot"]))
    await expect(moonshot.locator("td").last).to_have_text("no price")


# -- administration ---------------------------------------------------------------------------


async def test_someone_who_is_not_an_admin_has_no_administration(tab: Tab, user: Client) -> None:
    page = await sign_in_as(tab, user)
    await expect(page.get_by_role("button", name="Settings")).to_be_visible()
    await expect(page.get_by_role("button", name="Administration")).to_be_hidden()
    assert (await user.get("/api/admin/users")).status_code == 403


async def quota_of(services: Services, client: Client) -> Any:
    async with services.sessions() as db:
        return await db.scalar(select(User.quota).where(User.id == uuid.UUID(client.user["id"])))


async def test_an_admin_searches_disables_sets_a_quota_and_deletes_with_confirmation(
    tab: Tab, new_user: NewUser, services: Services
) -> None:
    admin = await make_admin(services, await new_user("root@example.com"))
    ada = await new_user("ada@example.com")
    bob = await new_user("bob@example.com")
    page = await sign_in_as(tab, admin)
    dialog = await open_dialog(page, "Administration", "Administration")
    users = dialog.get_by_role("list", name="Users")
    rows = users.locator("li.user")
    await expect(rows).to_have_count(3)
    ours = rows.filter(has_text="root@example.com")
    await expect(ours).to_contain_text("you")
    await expect(ours).to_contain_text("admin")

    # Search: part of an email; an underscore or percent is literal.
    await dialog.get_by_label("Search users").fill("ADA@")
    await dialog.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(1)
    await expect(rows).to_contain_text("ada@example.com")
    await dialog.get_by_label("Search users").fill("%")
    await dialog.get_by_role("button", name="Search").click()
    await expect(users).to_have_text("No user matches.")
    await dialog.get_by_label("Search users").fill("")
    await dialog.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(3)

    # Disable bob: refused at once; enable again.
    bob_row = rows.filter(has_text="bob@example.com")
    await dialog.get_by_role("button", name="Disable bob@example.com").click()
    await expect(bob_row.locator(".badge-failed")).to_have_text("disabled")
    assert not await signed_in(bob)
    await dialog.get_by_role("button", name="Enable bob@example.com").click()
    await expect(bob_row.locator(".badge-failed")).to_have_count(0)

    # A quota: a negative value is the server's 422, shown, and nothing changes.
    await dialog.get_by_role("button", name="Quota bob@example.com").click()
    quota = dialog.get_by_role("form", name="Quota of bob@example.com")
    await quota.get_by_label("Tokens a day").fill("-5")
    await quota.get_by_role("button", name="Save quota").click()
    await expect(dialog.locator("#users-error")).to_contain_text("daily_tokens")
    assert await quota_of(services, bob) is None
    await quota.get_by_label("Tokens a day").fill("100000")
    await quota.get_by_label("Dollars a month").fill("5")
    await quota.get_by_role("button", name="Save quota").click()
    await expect(bob_row.locator(".quota-text")).to_have_text(
        "quota: 100,000 tokens a day, $5.00 a month"
    )
    await expect(dialog.locator("#users-error")).to_have_text("")
    assert await quota_of(services, bob) == {"daily_tokens": 100_000, "monthly_cost_usd": 5.0}
    await dialog.get_by_role("button", name="Quota bob@example.com").click()
    quota = dialog.get_by_role("form", name="Quota of bob@example.com")
    await expect(quota.get_by_label("Tokens a day")).to_have_value("100000")
    await quota.get_by_label("Dollars a month").fill("")
    await quota.get_by_role("button", name="Save quota").click()
    await expect(bob_row.locator(".quota-text")).to_have_text(
        "quota: 100,000 tokens a day, unlimited a month"
    )
    await dialog.get_by_role("button", name="Quota bob@example.com").click()
    quota = dialog.get_by_role("form", name="Quota of bob@example.com")
    await quota.get_by_role("button", name="Use the defaults").click()
    await expect(bob_row.locator(".quota-text")).to_have_text("default quota")
    assert await quota_of(services, bob) is None

    # Delete asks first; Keep keeps.
    await dialog.get_by_role("button", name="Delete bob@example.com").click()
    confirm = dialog.get_by_role("group", name="Delete bob@example.com?")
    await expect(confirm).to_contain_text("This cannot be undone.")
    await expect(confirm.get_by_role("button", name="Keep")).to_be_focused()
    await confirm.get_by_role("button", name="Keep").click()
    await expect(confirm).to_be_hidden()
    await expect(rows).to_have_count(3)
    assert await signed_in(bob)
    await dialog.get_by_role("button", name="Delete bob@example.com").click()
    await confirm.get_by_role("button", name="Delete for good").click()
    await expect(rows).to_have_count(2)
    await expect(users).not_to_contain_text("bob@example.com")
    assert not await signed_in(bob)
    async with services.sessions() as db:
        assert await db.scalar(select(User).where(User.email == "bob@example.com")) is None

    # The last admin cannot delete themself: the 409 is shown and nothing changes.
    await dialog.get_by_role("button", name="Delete root@example.com").click()
    confirm = dialog.get_by_role("group", name="Delete root@example.com?")
    await confirm.get_by_role("button", name="Delete for good").click()
    await expect(dialog.locator("#users-error")).to_contain_text("no enabled administrator")
    assert await signed_in(admin) and await signed_in(ada)
    await expect(rows).to_have_count(2)


@pytest.mark.usefixtures("registry")
async def test_an_admin_sees_this_months_usage_per_user_and_per_model_of_one(
    tab: Tab, new_user: NewUser, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    admin = await make_admin(services, await new_user("root@example.com"))
    ada = await new_user("ada@example.com")
    bob = await new_user("bob@example.com")
    await turn(ada, fakes, "openai", Usage(5_000, 1_000, 2_000))
    await turn(ada, fakes, "anthropic", Usage(3_000, 300, 1_000, 500))
    await turn(bob, fakes, "anthropic", Usage(10_000, 2_000, 6_000, 1_000))

    page = await sign_in_as(tab, admin)
    dialog = await open_dialog(page, "Administration", "Administration")
    by_user = await admin.get("/api/admin/usage", params={**this_month(), "group_by": "user"})
    body = by_user.json()
    assert {item["email"] for item in body["items"]} == {"ada@example.com", "bob@example.com"}
    table = dialog.get_by_role("table", name="Usage this month per user")
    await expect_usage_table(table, body, [item["email"] for item in body["items"]])

    await dialog.get_by_role("button", name="Usage ada@example.com").click()
    of_ada = (
        await admin.get(
            "/api/admin/usage",
            params={**this_month(), "group_by": "model", "user_id": ada.user["id"]},
        )
    ).json()
    assert of_ada["total"]["requests"] == 2
    heading = dialog.get_by_role("heading", name="Usage this month of ada@example.com")
    await expect(heading).to_be_visible()
    table = dialog.get_by_role("table", name="Usage this month of ada@example.com per model")
    await expect_usage_table(table, of_ada, [item["model"] for item in of_ada["items"]])
