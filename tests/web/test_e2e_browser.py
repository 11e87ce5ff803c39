"""The web client in headless Chromium, against a live hearth on the demo model and the fakes.

Each test drives the page as a person would, by the names a screen reader announces (labels,
button names, the `log` region, one `article` per message), and checks what the page shows
against what hearth stored. The client reads the stream itself, so a turn seen arriving word by
word here is the UI message stream rendered as it comes.

Nothing here depends on how fast the machine is: every look at the page is one of Playwright's
retrying assertions (`expect`), which wait for the page to reach the state, and never a one-off
read that may come before the page got there. Two states need care. An image is visible before
it has loaded, so its size is awaited (`to_have_js_property("naturalWidth", ...)`), not read.
And once a turn's stream ends, the page reloads the chat and redraws every message, closing any
section opened meanwhile, so a test waits for that (`turn_drawn`) before it opens one. The
tests pass with every core kept busy (`bench/burn_cpu.py`).
"""

from __future__ import annotations

import asyncio
import io
import re
import uuid
from typing import Any

import pytest
from PIL import Image
from playwright.async_api import expect

from app.files.roots import user_root
from app.services import Services
from app.tools.catalogue import Catalogue, Entry
from tests.api.test_mcp_oauth import Guarded, connect, status_for
from tests.api.test_mcp_oauth import guarded as guarded  # the OAuth-protected server and hearth
from tests.catalogue_setup import WEATHER
from tests.fakes.providers import Fail, FakeProviderServer, Reply, ToolCall
from tests.knowledge.documents import add_document
from tests.provider_setup import MEDIA_MODEL_IDS, MODEL_IDS
from tests.support import Client, wait_until_idle
from tests.web.conftest import Tab, sign_in_as

GREETING_START = "Hello! I am hearth's demo model"


def png(width: int = 24, height: int = 16) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


async def record_text_growth(page: Any) -> None:
    """Record the length of the newest assistant text each time the log changes."""
    await page.evaluate(
        """() => {
          window.__lengths = [];
          const log = document.querySelector('[role=log]');
          new MutationObserver(() => {
            const bodies = log.querySelectorAll('article.assistant .body');
            const last = bodies[bodies.length - 1];
            if (last) window.__lengths.push(last.textContent.length);
          }).observe(log, {childList: true, subtree: true, characterData: true});
        }"""
    )


async def chat_of(client: Client) -> dict[str, Any]:
    chats = (await client.get("/api/chats")).json()["items"]
    assert len(chats) == 1, chats
    return await wait_until_idle(client, chats[0]["id"])


async def ask(page: Any, text: str) -> None:
    """Write a message and send it with Enter, as a person at the keyboard does."""
    await page.get_by_label("Message").fill(text)
    await page.get_by_label("Message").press("Enter")


async def choose_model(page: Any, model_id: str) -> None:
    await page.get_by_label("Model").select_option(model_id)


async def turn_drawn(page: Any) -> None:
    """Wait until a turn the page has begun to show is drawn as stored.

    After the stream the page reloads the chat, redraws every message (an opened section closes
    again) and only then enables Send: call this once something of the turn was seen."""
    await expect(page.get_by_role("button", name="Send")).to_be_enabled()


async def expect_image(image: Any, width: int, height: int) -> None:
    """The image is shown and has loaded at this size (0 x 0 until it has loaded)."""
    await expect(image).to_be_visible()
    await expect(image).to_have_js_property("naturalWidth", width)
    await expect(image).to_have_js_property("naturalHeight", height)


async def held_until(page: Any, url: str, method: str) -> asyncio.Event:
    """Hold the page's `method` requests to `url` until the returned event is set."""
    release = asyncio.Event()

    async def hold(route: Any) -> None:
        if route.request.method == method:
            await release.wait()
        await route.continue_()

    await page.route(url, hold)
    return release


async def test_sign_up_send_see_it_stream_and_sign_out(tab: Tab, anon: Client) -> None:
    page = await tab.open()
    await page.get_by_label("Email", exact=True).fill("Ada@Example.com")
    await page.get_by_label("Password", exact=True).fill("correct horse")
    await page.get_by_label("Display name").fill("Ada L.")
    await page.get_by_role("button", name="Sign up").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await expect(page.locator("#who")).to_have_text("Ada L.")
    await expect(page.get_by_label("Model")).to_have_value("demo/scripted")

    await record_text_growth(page)
    message = page.get_by_label("Message")
    await message.fill("What is in my workspace?")
    await message.press("Enter")

    log = page.get_by_role("log")
    articles = log.get_by_role("article")
    await expect(articles).to_have_count(3)
    await expect(articles.nth(2)).to_contain_text("This reply is scripted")
    await expect(articles.nth(2)).not_to_have_class("status-streaming")
    await expect(message).to_have_value("")
    await expect(articles.nth(0)).to_contain_text("What is in my workspace?")
    await expect(articles.nth(1)).to_contain_text(GREETING_START)
    tool = articles.nth(1).locator("details.tool")
    await expect(tool.locator("summary")).to_contain_text("list_files")
    await expect(tool.locator("summary")).to_contain_text("done")

    lengths = await page.evaluate("window.__lengths")
    growing = sorted(set(lengths))
    assert len(growing) >= 5, f"the text did not arrive in pieces: {lengths}"

    # What the page showed is what hearth stored, and a reload shows it again.
    anon.http.cookies.update(dict((c["name"], c["value"]) for c in await page.context.cookies()))
    chat = await chat_of(anon)
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "assistant"]
    assert chat["messages"][0]["content"] == "What is in my workspace?"
    await page.reload()
    await expect(page.get_by_role("log").get_by_role("article")).to_have_count(3)
    await expect(page.get_by_role("log")).to_contain_text(chat["messages"][2]["content"])

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("Email", exact=True)).to_be_visible()
    await expect(page.get_by_role("alert")).to_have_text("You have signed out.")
    assert (await anon.get("/api/auth/me")).status_code == 401  # the session was revoked
    await page.reload()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()


async def test_shift_enter_breaks_a_line_and_markup_stays_text(tab: Tab, user: Client) -> None:
    page = await sign_in_as(tab, user)
    message = page.get_by_label("Message")
    await message.fill("**bold** and `code`")
    await message.press("Shift+Enter")
    await message.type('<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>')
    await expect(message).to_have_value(
        '**bold** and `code`\n<img src=x onerror="window.__pwned=1"> '
        "<script>window.__pwned=2</script>"
    )
    await message.press("Enter")

    log = page.get_by_role("log")
    await expect(log.get_by_role("article")).to_have_count(3)
    mine = log.get_by_role("article").first
    await expect(mine.locator("strong")).to_have_text("bold")
    await expect(mine.locator("code")).to_have_text("code")
    await expect(mine.locator("br")).to_have_count(1)
    await expect(mine).to_contain_text('<img src=x onerror="window.__pwned=1">')
    await expect(log.locator("img, script, iframe")).to_have_count(0)
    assert await page.evaluate("window.__pwned") is None
    chat = await chat_of(user)
    assert chat["messages"][0]["content"].endswith("<script>window.__pwned=2</script>")


async def test_an_image_upload_shows_its_thumbnail_and_opens_its_data_url(
    tab: Tab, user: Client
) -> None:
    page = await sign_in_as(tab, user)
    async with page.expect_file_chooser() as chooser:
        await page.get_by_role("button", name="Attach files").click()
    await (await chooser.value).set_files(
        {"name": "dot.png", "mimeType": "image/png", "buffer": png()}
    )
    pending = page.get_by_role("list", name="Attachments").get_by_role("img", name="dot.png")
    await expect(pending).to_be_visible()

    await page.get_by_label("Message").fill("What is this picture?")
    await page.get_by_role("button", name="Send").click()
    log = page.get_by_role("log")
    await expect(log.get_by_role("article")).to_have_count(3)
    thumbnail = log.get_by_role("article").first.get_by_role("img", name="dot.png")
    await expect_image(thumbnail, 24, 16)
    await expect(page.get_by_role("list", name="Attachments").locator("li")).to_have_count(0)

    chat = await chat_of(user)
    [upload] = chat["messages"][0]["attachments"]
    assert upload["filename"] == "dot.png" and upload["mime"] == "image/png"
    link = log.get_by_role("article").first.get_by_role("link", name="dot.png")
    await expect(link).to_have_attribute("href", upload["url"])
    async with page.context.expect_page() as opened:
        await link.click()
    shown = await opened.value
    await shown.wait_for_load_state()
    assert shown.url == tab.base_url + upload["url"]


async def test_dropped_files_are_attached_and_large_ones_show_progress(
    tab: Tab, user: Client
) -> None:
    page = await sign_in_as(tab, user)
    await page.evaluate(
        """() => {
          const data = new DataTransfer();
          data.items.add(new File(['# Notes\\n\\nSome text.\\n'], 'notes.md',
                                  {type: 'text/markdown'}));
          const main = document.querySelector('.main');
          main.dispatchEvent(new DragEvent('dragover', {dataTransfer: data, bubbles: true,
                                                       cancelable: true}));
          main.dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true,
                                                   cancelable: true}));
        }"""
    )
    attachments = page.get_by_role("list", name="Attachments")
    await expect(attachments).to_contain_text("notes.md (20 B)")

    # A large file: its request is held back until the progress bar has been seen.
    release = await held_until(page, "**/api/uploads", "POST")
    async with page.expect_file_chooser() as chooser:
        await page.get_by_role("button", name="Attach files").click()
    await (await chooser.value).set_files(
        {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"\0" * 6_000_000}
    )
    progress = attachments.get_by_role("progressbar", name="Uploading big.bin")
    await expect(progress).to_be_visible()
    release.set()
    await expect(attachments).to_contain_text("big.bin (5.7 MB)", timeout=30_000)
    await expect(progress).to_have_count(0)

    await page.get_by_role("button", name="Send").click()  # attachments alone are a message
    log = page.get_by_role("log")
    await expect(log.get_by_role("article")).to_have_count(3)
    first = log.get_by_role("article").first
    await expect(first.get_by_role("link", name="notes.md")).to_be_visible()
    await expect(first.get_by_role("link", name="big.bin")).to_be_visible()
    chat = await chat_of(user)
    names = [a["filename"] for a in chat["messages"][0]["attachments"]]
    assert names == ["notes.md", "big.bin"]


@pytest.mark.usefixtures("registry")
async def test_write_file_is_approved_then_a_change_is_rejected_with_a_note(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    first = ToolCall("write_file", {"path": "notes.txt", "content": "hello\nworld\n"}, id="w1")
    second = ToolCall("write_file", {"path": "notes.txt", "content": "hello\nthere\n"}, id="w2")
    fake.script(
        Reply(text="I will write it.", tool_calls=[first]),
        Reply(text="Written."),
        Reply(text="Changing it.", tool_calls=[second]),
        Reply(text="Left as it was."),
    )
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    await ask(page, "Write a note")

    log = page.get_by_role("log")
    call = log.locator("details.tool").first
    await expect(call.locator("summary")).to_contain_text("waiting for your approval")
    await turn_drawn(page)  # the form is drawn again once the paused turn is reloaded
    diff = call.locator(".diff")
    await expect(diff.locator(".diff-add")).to_have_text(["+ hello", "+ world"])
    target = user_root(services.settings.data_dir, user.user["id"]) / "notes.txt"
    assert not target.exists()

    await call.get_by_role("button", name="Approve").click()
    await expect(log).to_contain_text("Written.")
    await expect(call.locator("summary")).to_contain_text("done")
    assert target.read_text() == "hello\nworld\n"

    await page.get_by_label("Message").fill("Change it")
    await page.get_by_role("button", name="Send").click()
    change = log.locator("details.tool").nth(1)
    await expect(change.locator("summary")).to_contain_text("waiting for your approval")
    await expect(change.locator(".diff-del")).to_have_text(["- world"])
    await expect(change.locator(".diff-add")).to_have_text(["+ there"])
    await turn_drawn(page)
    await change.get_by_label("Note (optional, sent with a rejection or approval)").fill(
        "Keep the world line."
    )
    await change.get_by_role("button", name="Reject").click()
    await expect(log).to_contain_text("Left as it was.")
    await expect(change.locator("summary")).to_contain_text("rejected")
    assert target.read_text() == "hello\nworld\n"
    assert "Keep the world line." in str(fake.model_requests[-1].body)

    chat = await chat_of(user)
    statuses = [t["status"] for m in chat["messages"] for t in m["tool_calls"]]
    assert statuses == ["done", "rejected"]


@pytest.mark.usefixtures("registry")
async def test_a_slow_turn_stops_by_escape_and_by_the_stop_button(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    slow = "word " * 400
    fake = fakes["openai"]
    fake.script(
        Reply(text=slow, token_interval=0.05, chunk_chars=5),
        Reply(text=slow, token_interval=0.05, chunk_chars=5),
    )
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    log = page.get_by_role("log")
    stop = page.get_by_role("button", name="Stop")
    await expect(stop).to_be_hidden()

    articles = log.get_by_role("article")
    for how in ("escape", "button"):
        before = await articles.count()
        await ask(page, f"Talk slowly ({how})")
        reply = articles.nth(before + 1)  # this turn's answer, after its question
        await expect(reply).to_contain_text("word word word")
        await expect(stop).to_be_visible()
        if how == "escape":
            await page.keyboard.press("Escape")
        else:
            await stop.click()
        await expect(reply.locator("header")).to_contain_text("stopped")
        await expect(stop).to_be_hidden()
        await expect(page.get_by_role("button", name="Send")).to_be_enabled()

    chat = await chat_of(user)
    replies = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert [m["status"] for m in replies] == ["cancelled", "cancelled"]
    assert all(0 < len(m["content"]) < len(slow) for m in replies), [
        len(m["content"]) for m in replies
    ]


@pytest.mark.usefixtures("registry")
async def test_activations_are_chips_and_citations_show_their_passage(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    document = b"# Garden\n\n## Watering\n\nTomatoes need water every evening in July.\n"
    upload_id = await add_document(services, user.user["id"], "garden.md", document)
    chunk_id = f"{upload_id.hex[:12]}-1"
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["knowledge"]})]),
        Reply(tool_calls=[ToolCall("knowledge_search", {"query": "tomatoes water"})]),
        Reply(tool_calls=[ToolCall("knowledge_cite", {"chunk_ids": [chunk_id]})]),
        Reply(text="Every evening in July [1]."),
    )
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    await ask(page, "When do tomatoes need water?")

    log = page.get_by_role("log")
    await expect(log).to_contain_text("Every evening in July [1].")
    await turn_drawn(page)
    chips = log.get_by_role("list", name="Activated tools")
    await expect(chips).to_have_count(1)
    await expect(chips.get_by_role("listitem")).to_have_text(["knowledge"])
    sources = log.get_by_role("region", name="Sources")
    await expect(sources).to_have_count(1)
    reference = sources.locator("summary")
    await expect(reference).to_have_text("[1] garden.md")
    quote = sources.locator("blockquote")
    await expect(quote).to_be_attached()
    await expect(quote).to_be_hidden()
    await reference.click()
    await expect(quote).to_be_visible()
    await expect(quote).to_have_text("Tomatoes need water every evening in July.")


async def test_the_chat_list_renames_deletes_and_orders_by_activity(tab: Tab, user: Client) -> None:
    alpha = (await user.post("/api/chats", json={"title": "Alpha"})).json()
    beta = (await user.post("/api/chats", json={"title": "Beta"})).json()
    page = await sign_in_as(tab, user)
    chats = page.get_by_role("navigation", name="Chats")
    await expect(chats.locator(".open-chat")).to_have_text(["Beta", "Alpha"])
    await expect(page.get_by_role("heading", name="Beta")).to_be_visible()

    await chats.get_by_role("button", name="Rename Alpha").click()
    await chats.get_by_label("Chat title").fill("Gamma")
    await chats.get_by_role("button", name="Save").click()
    await expect(chats.locator(".open-chat")).to_have_text(["Beta", "Gamma"])
    assert (await user.get(f"/api/chats/{alpha['id']}")).json()["title"] == "Gamma"

    await chats.get_by_role("button", name="Delete Beta").click()
    await chats.get_by_role("button", name="Confirm delete").click()
    await expect(chats.locator(".open-chat")).to_have_text(["Gamma"])
    await expect(page.get_by_role("heading", name="Gamma")).to_be_visible()
    assert (await user.get(f"/api/chats/{beta['id']}")).status_code == 404

    await page.get_by_role("button", name="New chat").click()
    await expect(chats.locator(".open-chat")).to_have_count(2)
    await expect(chats.locator("[aria-current=page]")).to_have_text("Untitled chat")


async def settle(page: Any) -> None:
    """Let the page finish what its last event started, up to its next network wait."""
    await page.evaluate("() => new Promise((done) => setTimeout(done, 0))")


async def test_a_message_sent_while_a_chat_opens_goes_to_that_chat(tab: Tab, user: Client) -> None:
    alpha = (await user.post("/api/chats", json={"title": "Alpha"})).json()
    beta = (await user.post("/api/chats", json={"title": "Beta"})).json()
    page = await sign_in_as(tab, user)
    chats = page.get_by_role("navigation", name="Chats")
    log = page.get_by_role("log")
    await expect(page.get_by_role("heading", name="Beta")).to_be_visible()

    # A new chat whose creation is still on its way takes the message written meanwhile.
    release = await held_until(page, "**/api/chats", "POST")
    await page.get_by_role("button", name="New chat").click()
    await ask(page, "First words")
    await settle(page)
    release.set()
    await expect(log.get_by_role("article")).to_have_count(3)
    await expect(log.get_by_role("article").nth(2)).to_contain_text("This reply is scripted")
    await turn_drawn(page)  # until then the page is busy with this turn and ignores a send
    listed = (await user.get("/api/chats")).json()["items"]
    assert len(listed) == 3
    fresh = await wait_until_idle(user, listed[0]["id"])
    assert fresh["messages"][0]["content"] == "First words"
    await expect(chats.locator("[aria-current=page]")).to_have_text(fresh["title"])

    # So does a chat opened from the list whose messages are still loading.
    release = await held_until(page, f"**/api/chats/{alpha['id']}", "GET")
    await chats.get_by_role("button", name="Alpha", exact=True).click()
    await ask(page, "Second words")
    await settle(page)
    release.set()
    await expect(page.get_by_role("heading", name="Alpha")).to_be_visible()
    await expect(log.get_by_role("article")).to_have_count(3)
    await expect(log.get_by_role("article").nth(0)).to_have_text(re.compile("Second words"))
    opened = await wait_until_idle(user, alpha["id"])
    assert [m["content"] for m in opened["messages"] if m["role"] == "user"] == ["Second words"]
    untouched = await wait_until_idle(user, beta["id"])
    assert untouched["messages"] == []
    fresh = await wait_until_idle(user, fresh["id"])
    assert [m["content"] for m in fresh["messages"] if m["role"] == "user"] == ["First words"]


async def test_the_model_picker_shows_capabilities_and_marks_unavailable_models(
    tab: Tab, user: Client
) -> None:
    models = (await user.get("/api/models")).json()
    page = await sign_in_as(tab, user)
    options = page.get_by_label("Model").locator("option")
    await expect(options).to_have_count(len(models))
    words = {"vision": "sees images", "document": "reads PDFs", "video": "watches video"}
    for index, model in enumerate(models):
        option = options.nth(index)
        await expect(option).to_have_attribute("value", model["id"])
        label = await option.text_content()
        assert label is not None
        assert ("(unavailable)" in label) == (not model["available"]), label
        if model["available"]:
            await expect(option).to_be_enabled()
        else:
            await expect(option).to_be_disabled()
        for capability in model["capabilities"]:
            if capability in words:
                assert words[capability] in label, (capability, label)
    assert any(not m["available"] for m in models), "the shipped file lists keyed providers"


async def test_an_expired_session_goes_back_to_sign_in(tab: Tab, user: Client) -> None:
    page = await sign_in_as(tab, user)
    assert (await user.post("/api/auth/logout")).status_code == 204  # revoked elsewhere
    await page.get_by_role("button", name="New chat").click()
    await expect(page.get_by_label("Email", exact=True)).to_be_visible()
    await expect(page.get_by_role("alert")).to_have_text(
        "Your session has ended. Sign in again to continue."
    )
    await page.get_by_label("Email", exact=True).fill(user.user["email"])
    await page.get_by_label("Password", exact=True).fill(user.password)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def test_failed_requests_say_what_went_wrong(
    tab: Tab, user: Client, services: Services
) -> None:
    page = await tab.open()
    await page.get_by_label("Email", exact=True).fill(user.user["email"])
    await page.get_by_label("Password", exact=True).fill("not the password")
    await page.get_by_role("button", name="Sign in").click()
    alert = page.locator("#auth-error")
    await expect(alert).to_have_text("Wrong email or password")
    await page.get_by_label("Password", exact=True).fill("short")
    await page.get_by_role("button", name="Sign up").click()
    await expect(alert).to_have_text("Choose a password of at least 8 characters.")
    await page.get_by_label("Password", exact=True).fill("long enough password")
    await page.get_by_role("button", name="Sign up").click()
    await expect(alert).to_have_text("An account with this email exists")

    await page.get_by_label("Password", exact=True).fill(user.password)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    services.settings = services.settings.model_copy(update={"max_upload_bytes": 1000})
    async with page.expect_file_chooser() as chooser:
        await page.get_by_role("button", name="Attach files").click()
    await (await chooser.value).set_files(
        {"name": "large.txt", "mimeType": "text/plain", "buffer": b"x" * 5000}
    )
    await expect(page.locator("#app-error")).to_have_text(
        "A file is over the upload limit of 1000 bytes"
    )
    await expect(page.get_by_role("list", name="Attachments")).to_contain_text("large.txt:")
    await page.get_by_role("button", name="Remove large.txt").click()
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#app-error")).to_have_text("Write a message or attach a file first.")


async def test_names_focus_order_and_contrast(tab: Tab, user: Client) -> None:
    page = await tab.open()
    await expect(page.get_by_label("Email", exact=True)).to_be_focused()  # the page starts at Email
    order = [await page.evaluate("document.activeElement.id")]
    for _ in range(4):
        await page.keyboard.press("Tab")
        order.append(await page.evaluate("document.activeElement.id"))
    assert order == ["auth-email", "auth-password", "auth-name", "sign-in", "sign-up"]

    page = await sign_in_as(tab, user)
    for name in ("New chat", "Send", "Attach files", "Sign out"):
        await expect(page.get_by_role("button", name=name)).to_be_visible()
    await expect(page.get_by_role("combobox", name="Model")).to_be_visible()
    await expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    await expect(page.get_by_role("log")).to_be_visible()
    unnamed = await page.evaluate(
        """() => [...document.querySelectorAll('button, input, select, textarea, a[href]')]
              .filter(el => el.offsetParent !== null && el.type !== 'file')
              .filter(el => !(el.getAttribute('aria-label') || el.labels?.length
                               || el.textContent.trim()))
              .map(el => el.outerHTML)"""
    )
    assert unnamed == []
    low = await page.evaluate(CONTRAST_AUDIT)
    assert low == [], low


CONTRAST_AUDIT = """() => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92
                                                    : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const background = (el) => {
    for (let node = el; node; node = node.parentElement) {
      const color = rgb(getComputedStyle(node).backgroundColor);
      if (color.length < 4 || color[3] > 0) return color;
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.offsetParent === null) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    const a = lum(rgb(style.color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)}`);
  }
  return low;
}"""


@pytest.mark.usefixtures("registry")
async def test_reasoning_is_collapsed_and_tool_media_is_a_thumbnail(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    stored = await user.post(
        "/api/uploads", files=[("file", ("chart.png", png(30, 20), "image/png"))]
    )
    [upload] = stored.json()
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("read_file", {"path": upload["path"]})]),
        Reply(text="A red rectangle."),
    )
    fakes["moonshot"].script(Reply(text="Hello.", reasoning="The user greets me; greet back."))
    page = await sign_in_as(tab, user)
    log = page.get_by_role("log")

    await choose_model(page, MODEL_IDS["moonshot"])
    await ask(page, "Hi")
    reply = log.get_by_role("article").nth(1)
    await expect(reply.locator(".body")).to_have_text("Hello.")
    await turn_drawn(page)
    thought = reply.get_by_text("The user greets me; greet back.")
    await expect(thought).to_be_attached()
    await expect(thought).to_be_hidden()
    await reply.get_by_text("Reasoning").click()
    await expect(thought).to_be_visible()

    await choose_model(page, MEDIA_MODEL_IDS["openai"])  # switches the open chat's model
    await page.get_by_role("button", name="New chat").click()  # a new chat takes the choice
    await ask(page, "Look at my chart")
    await expect(log).to_contain_text("A red rectangle.")
    await turn_drawn(page)
    chats = (await user.get("/api/chats")).json()["items"]
    assert [c["model"] for c in chats] == [MEDIA_MODEL_IDS["openai"]] * 2
    call = log.locator("details.tool")
    await expect(call.locator("summary")).to_contain_text("read_file")
    drawn = call.locator("img[alt='chart.png']")  # by role it is found only once shown
    await expect(drawn).to_have_count(1)
    await expect(drawn).to_be_hidden()  # results are collapsed until opened
    await call.locator("summary").click()
    thumbnail = call.get_by_role("img", name="chart.png")
    await expect_image(thumbnail, 30, 20)
    chat = await wait_until_idle(user, chats[0]["id"])
    [media] = [m for message in chat["messages"] for t in message["tool_calls"] for m in t["media"]]
    assert media["url"] == "/data/files/" + upload["path"]
    await expect(call.get_by_role("link", name="chart.png")).to_have_attribute("href", media["url"])


@pytest.mark.usefixtures("registry")
async def test_a_chat_is_summarised_on_request_and_its_tools_reset(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"compact_keep": 2})
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["knowledge"]})]),
        Reply(text="Knowledge is on."),
        Reply(text="B is 2."),
    )
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    log = page.get_by_role("log")
    for question, answer in (("Turn on knowledge", "Knowledge is on."), ("What is B?", "B is 2.")):
        await ask(page, question)
        await expect(log).to_contain_text(answer)
        await expect(page.get_by_role("button", name="Send")).to_be_enabled()

    reset = page.get_by_role("button", name="Reset tools")
    await expect(log.get_by_role("list", name="Activated tools")).to_have_count(1)
    await reset.click()
    await expect(log.get_by_role("list", name="Activated tools")).to_have_count(0)
    await expect(reset).to_be_hidden()
    chat_id = (await user.get("/api/chats")).json()["items"][0]["id"]
    assert (await user.get(f"/api/chats/{chat_id}/activations")).json() == []

    fake.script(Reply(text="The user turned on knowledge and asked for B."))
    await page.get_by_role("button", name="Summarise earlier messages").click()
    note = log.locator("details.summary-note")
    await expect(note).to_have_count(1)
    await expect(note.locator(".markdown")).to_be_hidden()
    await note.locator("summary").click()
    await expect(note.locator(".markdown")).to_be_visible()
    await expect(note).to_contain_text("The user turned on knowledge and asked for B.")
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    [summary] = chat["summaries"]
    covered = [m["id"] for m in chat["messages"]].index(summary["covers_up_to_message_id"])
    articles = log.get_by_role("article")
    # The note follows the last message it covers, and every message is still listed.
    await expect(articles).to_have_count(len(chat["messages"]))
    assert await note.evaluate(
        "(el, i) => el.previousElementSibling === document.querySelectorAll('article')[i]",
        covered,
    )

    fake.script(Fail(500, "the summary model is down"))
    await page.get_by_role("button", name="Summarise earlier messages").click()
    await expect(page.locator("#app-error")).not_to_be_empty()
    assert len((await user.get(f"/api/chats/{chat_id}")).json()["summaries"]) == 1


async def test_the_files_panel_shows_indexing_and_deletes(
    tab: Tab, user: Client, services: Services
) -> None:
    files = [
        ("file", ("garden.md", b"# Garden\n\nTomatoes need water.\n", "text/markdown")),
        ("file", ("dot.png", png(), "image/png")),
    ]
    garden, dot = (await user.post("/api/uploads", files=files)).json()
    assert services.ingestor is not None
    await services.ingestor.idle()
    page = await sign_in_as(tab, user)
    await page.get_by_role("button", name="My uploads").click()
    panel = page.get_by_role("dialog", name="My uploads")
    await expect(panel).to_be_visible()
    rows = panel.get_by_role("listitem")
    await expect(rows).to_have_count(2)
    await expect(panel.get_by_role("link", name="garden.md")).to_have_attribute(
        "href", garden["url"]
    )
    await expect(rows.filter(has_text="garden.md")).to_contain_text("searchable")
    await expect(rows.filter(has_text="dot.png")).not_to_contain_text("searchable")

    await panel.get_by_role("button", name="Index again garden.md").click()
    await services.ingestor.idle()
    await panel.get_by_role("button", name="Index again garden.md").wait_for()
    await panel.get_by_role("button", name="Delete dot.png").click()
    await expect(rows).to_have_count(1)
    assert (await user.get(f"/api/uploads/{dot['id']}")).status_code == 404
    assert (await user.get(f"/api/uploads/{garden['id']}")).json()["ingestion"]["status"] in (
        "pending",
        "ready",
    )
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    await expect(page.get_by_role("button", name="My uploads")).to_be_focused()

    await page.get_by_role("button", name="Tool catalogue").click()
    tools = page.get_by_role("dialog", name="Tool catalogue")
    group = tools.get_by_role("listitem").filter(has_text="knowledge").first
    await expect(group).to_contain_text("available")
    await group.locator("summary").click()
    await expect(group).to_contain_text("knowledge_search")
    await expect(group).to_contain_text("knowledge_cite")
    await tools.get_by_role("button", name="Close").click()
    await expect(tools).to_be_hidden()


@pytest.mark.usefixtures("registry")
async def test_a_tools_form_is_answered_in_place_and_survives_a_reload(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    form = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "title": "City", "description": "Where to look"},
            "days": {"type": "integer", "title": "Days", "minimum": 1, "maximum": 7, "default": 3},
            "units": {
                "type": "string",
                "title": "Units",
                "oneOf": [
                    {"const": "metric", "title": "Celsius"},
                    {"const": "imperial", "title": "Fahrenheit"},
                ],
                "default": "metric",
            },
            "alerts": {"type": "boolean", "title": "Send alerts"},
            "extras": {
                "type": "array",
                "title": "Extras",
                "items": {"enum": ["wind", "rain", "sun"]},
                "default": ["rain"],
            },
        },
        "required": ["city"],
    }
    answers: list[Any] = []

    async def call(group: str, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        answer = await kwargs["asks"].elicit("Where shall I look?", form, timeout=60)
        answers.append(answer)
        return f"Forecast for {answer.content['city']}: {answer.content}"

    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", WEATHER)]), call
    try:
        fakes["openai"].script(
            Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
            Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"}, id="fc")]),
            Reply(text="Mild and dry."),
        )
        page = await sign_in_as(tab, user)
        await choose_model(page, MODEL_IDS["openai"])
        await ask(page, "Weather?")
        log = page.get_by_role("log")
        asked = log.get_by_role("form", name="mcp__weather__forecast asks you")
        await expect(asked).to_contain_text("Where shall I look?")
        await expect(asked.get_by_label("Days")).to_have_value("3")

        # A reload in the middle shows the same form again, from what hearth stored.
        await page.reload()
        await page.locator("#app[aria-busy=false]").wait_for()
        asked = log.get_by_role("form", name="mcp__weather__forecast asks you")
        await expect(asked).to_contain_text("Where shall I look?")
        await expect(asked.get_by_label("Units")).to_have_value("metric")
        await expect(asked.get_by_label("rain")).to_be_checked()

        await asked.get_by_role("button", name="Send").click()  # City is required
        await expect(asked.get_by_label("City *")).to_have_js_property("validity.valid", False)
        assert answers == []
        await asked.get_by_label("City *").fill("Bergen")
        await asked.get_by_label("Days").fill("5")
        await asked.get_by_label("Units").select_option("imperial")
        await asked.get_by_label("Send alerts").check()
        await asked.get_by_label("wind").check()
        await asked.get_by_role("button", name="Send").click()
        await expect(log).to_contain_text("Mild and dry.")
        await expect(log.get_by_role("form", name="mcp__weather__forecast asks you")).to_have_count(
            0
        )
    finally:
        services.catalogue, services.group_call = original
    [answer] = answers
    assert answer.action == "accept"
    assert answer.content == {
        "city": "Bergen",
        "days": 5,
        "units": "imperial",
        "alerts": True,
        "extras": ["wind", "rain"],
    }
    chat = await chat_of(user)
    [stored] = [c for m in chat["messages"] for c in m["tool_calls"] if c["tool_call_id"] == "fc"]
    assert stored["status"] == "done" and stored["elicitation"]["action"] == "accept"


async def test_a_group_is_connected_with_the_users_own_account_and_disconnected(
    browser: Any, guarded: Guarded
) -> None:
    """The catalogue's Connect takes the browser through the server's sign-in and back; the
    group is then usable by this user, and Disconnect forgets (and revokes) the tokens."""
    base_url = str(guarded.client.http.base_url).rstrip("/")
    context = await browser.new_context(base_url=base_url, accept_downloads=False)
    page = await context.new_page()
    tab = Tab(page, base_url)
    try:
        await sign_in_as(tab, guarded.client)
        await page.get_by_role("button", name="Tool catalogue").click()
        dialog = page.get_by_role("dialog", name="Tool catalogue")
        group = dialog.locator("li", has_text="guarded").first
        await expect(group).to_contain_text("needs_connection")
        await group.locator("summary").click()
        await group.get_by_role("link", name="Connect guarded").click()
        await page.wait_for_url(f"{base_url}/")  # back home, the query gone
        await expect(page.locator("#status")).to_have_text(
            "guarded is connected with your account."
        )
        assert (await status_for(guarded.client))["status"] == "available"

        await page.get_by_role("button", name="Tool catalogue").click()
        group = dialog.locator("li", has_text="guarded").first
        await expect(group).to_contain_text("available")
        await group.locator("summary").click()
        await group.get_by_role("button", name="Disconnect guarded").click()
        await expect(group).to_contain_text("needs_connection")
        assert (await status_for(guarded.client))["status"] == "needs_connection"
        assert [e["hint"] for e in await guarded.log() if e["event"] == "revoke"]
    finally:
        await context.close()
    assert tab.errors == [], tab.errors


@pytest.mark.parametrize("guarded", [{"ALERTS_SCOPE": "weather:alerts"}], indirect=True)
async def test_a_wider_scope_asked_mid_call_is_a_sign_in_link_on_the_call(
    browser: Any, guarded: Guarded, fakes: dict[str, FakeProviderServer]
) -> None:
    """A server that wants more scope in the middle of a call: the call shows a sign-in link,
    still there after a reload; following it finishes the call, and the page that comes back
    from the sign-in streams the rest of the turn (held until the page has read up to the
    sign-in, so the answer comes while it follows)."""
    await connect(guarded.client)
    answer = asyncio.Event()
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["guarded"]})]),
        Reply(tool_calls=[ToolCall("mcp__guarded__alerts", {"region": "Nordland"}, id="al")]),
        Reply(text="No alerts today.", hold=answer),
    )
    base_url = str(guarded.client.http.base_url).rstrip("/")
    context = await browser.new_context(base_url=base_url, accept_downloads=False)
    page = await context.new_page()
    tab = Tab(page, base_url)
    try:
        await sign_in_as(tab, guarded.client)
        await choose_model(page, MODEL_IDS["openai"])
        await ask(page, "Any alerts?")
        log = page.get_by_role("log")
        link = log.get_by_role("link", name="Sign in to guarded")
        await expect(link).to_be_visible()
        await page.reload()
        await page.locator("#app[aria-busy=false]").wait_for()
        await expect(link).to_be_visible()  # kept on the call, not only in the stream
        await link.click()
        await page.wait_for_url(f"{base_url}/")
        await expect(log).to_contain_text("No alerts for Nordland.")  # the call went on
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()  # it follows
        answer.set()
        await expect(log).to_contain_text("No alerts today.")
        await expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    finally:
        answer.set()
        await context.close()
    assert tab.errors == [], tab.errors
    chat = await chat_of(guarded.client)
    [alerts] = [c for m in chat["messages"] for c in m["tool_calls"] if c["tool_call_id"] == "al"]
    assert alerts["status"] == "done" and alerts["result"] == "No alerts for Nordland."


@pytest.mark.usefixtures("registry")
async def test_edit_regenerate_and_page_through_the_versions(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    """An edit in the inline editor and a regenerated answer are versions a pager switches
    between; the page shows the branch the server shows, after a reload too."""
    fake = fakes["openai"]
    fake.script(
        Reply(text="Paris."),
        Reply(text="About two million."),
        Reply(text="About 67 million."),
        Reply(text="Roughly 68 million."),
    )
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    log = page.get_by_role("log")
    await ask(page, "Capital of France?")
    await expect(log).to_contain_text("Paris.")
    await turn_drawn(page)
    await ask(page, "How many live there?")
    await expect(log).to_contain_text("About two million.")
    await turn_drawn(page)

    # Edit the second question in place: Escape cancels, saving sends under its parent.
    second = log.locator("article.user").nth(1)
    await second.get_by_role("button", name="Edit").click()
    editor = second.get_by_label("Edit your message")
    await expect(editor).to_have_value("How many live there?")
    await editor.press("Escape")
    await expect(second.get_by_label("Edit your message")).to_have_count(0)
    await second.get_by_role("button", name="Edit").click()
    await second.get_by_label("Edit your message").fill("How many live in France?")
    await second.get_by_role("button", name="Save and send").click()
    await expect(log).to_contain_text("About 67 million.")
    await turn_drawn(page)
    await expect(log).not_to_contain_text("About two million.")
    edited = log.locator("article.user").nth(1)
    await expect(edited.locator(".pager-at")).to_have_text("2 / 2")

    # The first version again, and it stays after a reload.
    await edited.get_by_role("button", name="Previous version").click()
    await expect(log).to_contain_text("About two million.")
    await expect(log.locator("article.user").nth(1).locator(".pager-at")).to_have_text("1 / 2")
    await page.reload()
    await expect(log).to_contain_text("About two million.")
    await expect(log).not_to_contain_text("About 67 million.")
    chat = await chat_of(user)
    assert [m["content"] for m in chat["messages"]] == [
        "Capital of France?",
        "Paris.",
        "How many live there?",
        "About two million.",
    ]

    # Back to the edit, then a new answer to it: the answer gets its own pager.
    await log.locator("article.user").nth(1).get_by_role("button", name="Next version").click()
    await expect(log).to_contain_text("About 67 million.")
    await log.locator("article.assistant").last.get_by_role("button", name="Regenerate").click()
    await expect(log).to_contain_text("Roughly 68 million.")
    await turn_drawn(page)
    await expect(log).not_to_contain_text("About 67 million.")
    answer = log.locator("article.assistant").last
    await expect(answer.locator(".pager-at")).to_have_text("2 / 2")
    # Regenerate goes on the last answer of each turn; Edit on each question.
    await expect(log.get_by_role("button", name="Regenerate")).to_have_count(2)
    await expect(log.get_by_role("button", name="Edit")).to_have_count(2)

    chat = await chat_of(user)
    messages = chat["messages"]
    assert [m["content"] for m in messages] == [
        "Capital of France?",
        "Paris.",
        "How many live in France?",
        "Roughly 68 million.",
    ]
    assert len(messages[2]["sibling_ids"]) == 2 and len(messages[3]["sibling_ids"]) == 2
    assert chat["active_leaf_id"] == messages[3]["id"]
    regenerated = fake.model_requests[-1].body["messages"]
    assert [m["content"] for m in regenerated if m["role"] == "user"][-1] == (
        "How many live in France?"
    )


def stream_requests(page: Any) -> list[dict[str, Any]]:
    """Record the page's requests for a running turn's stream (with their `Last-Event-ID`)."""
    seen: list[dict[str, Any]] = []

    def note(request: Any) -> None:
        if request.url.endswith("/stream"):
            seen.append({"method": request.method, "last": request.headers.get("last-event-id")})

    page.on("request", note)
    return seen


def chat_reads(page: Any) -> list[str]:
    """Record the page's reads of a whole chat (what the once-a-second poll used to make)."""
    seen: list[str] = []
    pattern = re.compile(r"/api/chats/[0-9a-f-]{36}$")
    page.on("request", lambda r: seen.append(r.url) if pattern.search(r.url) else None)
    return seen


@pytest.mark.usefixtures("registry")
async def test_a_reload_in_the_middle_of_a_turn_keeps_streaming_it(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    slow = "word " * 100
    fakes["openai"].script(Reply(text=slow, token_interval=0.04, chunk_chars=5))
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    await ask(page, "Talk slowly, then reload")
    reply = page.get_by_role("log").get_by_role("article").nth(1)
    await expect(reply).to_contain_text("word word word")
    # Listening before the reload: the page may ask for the stream before reload() returns.
    streams, reads = stream_requests(page), chat_reads(page)
    await page.reload()
    await page.locator("#app[aria-busy=false]").wait_for()
    await record_text_growth(page)
    reply = page.get_by_role("log").get_by_role("article").nth(1)
    await expect(page.get_by_role("button", name="Stop")).to_be_visible()
    await expect(reply.locator(".body")).to_have_text(slow.strip())
    await turn_drawn(page)
    lengths = await page.evaluate("window.__lengths")
    assert len(set(lengths)) > 5, lengths  # it grew as the words came, not all at once
    assert streams[0] == {"method": "GET", "last": None}  # the turn, replayed from its start
    assert len(reads) <= 3, reads  # no poll: the page read the chat on load and after the end
    chat = await chat_of(user)
    assert chat["messages"][-1]["content"] == slow


@pytest.mark.usefixtures("registry")
async def test_a_second_tab_on_the_same_chat_shows_the_turn_live(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    slow = "live in both tabs " * 25
    fake.script(Reply(text="First."), Reply(text=slow, token_interval=0.04, chunk_chars=6))
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    await ask(page, "Hello")
    await expect(page.get_by_role("log").get_by_role("article").nth(1)).to_contain_text("First.")
    await turn_drawn(page)

    other = Tab(await page.context.new_page(), tab.base_url)
    second = await other.open()
    await second.locator("#app[aria-busy=false]").wait_for()
    await expect(second.get_by_role("log").get_by_role("article")).to_have_count(2)
    await record_text_growth(second)
    reads = chat_reads(second)

    await ask(page, "Talk to both of us")
    answer = second.get_by_role("log").get_by_role("article").nth(3)
    await expect(second.get_by_role("button", name="Stop")).to_be_visible()
    await expect(answer.locator(".body")).to_have_text(slow.strip())
    await expect(second.get_by_role("button", name="Send")).to_be_enabled()
    lengths = await second.evaluate("window.__lengths")
    assert len(set(lengths)) > 5, lengths  # the second tab saw it grow
    assert len(reads) <= 2, reads
    await turn_drawn(page)
    assert other.errors == []


@pytest.mark.usefixtures("registry")
async def test_a_dropped_stream_reconnects_with_last_event_id_by_itself(
    tab: Tab, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    slow = "again " * 80
    fakes["openai"].script(Reply(text=slow, token_interval=0.04, chunk_chars=6))
    page = await sign_in_as(tab, user)
    await choose_model(page, MODEL_IDS["openai"])
    streams = stream_requests(page)
    await ask(page, "Keep going")
    reply = page.get_by_role("log").get_by_role("article").nth(1)
    await expect(reply).to_contain_text("again again again")
    chats = (await user.get("/api/chats")).json()["items"]
    log = services.turns.live.get(uuid.UUID(chats[0]["id"]))
    assert log is not None and log.readers == 1
    for reader in list(log._readers):
        reader.cut()  # the server drops the page's connection, as a proxy or a lag cut would
    await expect(reply.locator(".body")).to_have_text(slow.strip())
    await turn_drawn(page)
    assert streams and streams[0]["method"] == "GET"
    assert int(streams[0]["last"]) > 3  # it asked only for what it had not seen
    assert (await chat_of(user))["messages"][-1]["content"] == slow
    assert not await page.get_by_role("alert").filter(has_text="dropped").count()
