"""A turn as a real frontend reads it: through the official AI SDK client, under Node.js.

The other turn tests parse the stream in Python, which only shows that hearth writes what those
tests expect. A frontend reads the stream with the `ai` package from npm instead: its
`DefaultChatTransport` parses every SSE event against the SDK's `uiMessageChunkSchema`, and
`AbstractChat` (the class under `useChat`) folds the chunks into a `UIMessage`. The fold is
strict too: a tool result for a call it has not seen, or text outside a text block, is an
error. So `tests/js/drive-turn.mjs` sends the turn with exactly those pieces, audits a copy of
the body against the same schema to report every failing chunk, and prints chunks, folded
message and errors as one JSON object.

The script runs with `asyncio.create_subprocess_exec`: the live server shares this event loop,
so a blocking `subprocess.run` would leave the request it makes unanswered. It signs in with
the test user's own cookies and CSRF token, as a browser tab would.

Node.js and `npm ci --prefix tests/js` are needed. Without them the test is skipped locally,
and fails under `CI=true`, where they are part of the setup.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest

from app.llm.registry import ModelRegistry
from tests.fakes.providers import FakeProviderServer, Reply
from tests.provider_setup import MODEL_IDS
from tests.support import IN_CI, ROOT, Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services")

JS_DIR = ROOT / "tests" / "js"
SCRIPT = JS_DIR / "drive-turn.mjs"
TIMEOUT = 90


def node_or_skip() -> str:
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "Node.js (`node`) is not on PATH"
    elif not (JS_DIR / "node_modules" / "ai").is_dir():
        problem = "tests/js has no node_modules; run `npm ci --prefix tests/js`"
    if problem is None:
        return str(node)
    if IN_CI:
        pytest.fail(problem + " (mandatory under CI=true)", pytrace=False)
    pytest.skip(problem)


async def drive_turn(
    base_url: str, client: Client, chat_id: str, content: str, *extra: str
) -> dict[str, Any]:
    """Run drive-turn.mjs for one turn (`extra`: more options); returns its report, asserting
    it exited cleanly."""
    node = node_or_skip()
    assert SCRIPT.is_file(), SCRIPT
    cookie = "; ".join(
        f"{name}={client.http.cookies[name]}" for name in ("hearth_session", "hearth_csrf")
    )
    process = await asyncio.create_subprocess_exec(
        node,
        str(SCRIPT),
        # `--name=value`: a value may begin with "-" (a random CSRF token does one time in 64).
        f"--base-url={base_url}",
        f"--cookie={cookie}",
        f"--csrf={client.csrf or ''}",
        f"--chat-id={chat_id}",
        f"--content={content}",
        *extra,
        cwd=JS_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    report = json.loads(stdout) if stdout.strip() else {}
    assert process.returncode == 0, (process.returncode, stderr.decode(), report.get("errors"))
    return report


async def test_ai_sdk_client_folds_a_demo_turn(server: tuple[str, Any], user: Client) -> None:
    base_url, _ = server
    node_or_skip()
    chat_id = (await user.post("/api/chats", json={})).json()["id"]

    report = await drive_turn(base_url, user, chat_id, "Hi from the SDK\nsecond line")

    assert report["errors"] == []
    assert report["status"] == "ready"
    response = report["response"]
    assert (response["status"], response["uiMessageStream"]) == (200, "v1")
    assert response["contentType"].startswith("text/event-stream")
    assert report["done"] is True
    chunks = report["chunks"]
    types = [chunk["type"] for chunk in chunks]
    assert types[0] == "start" and types[-1] == "finish"
    assert {"text-delta", "tool-input-available", "tool-output-available"} <= set(types)

    message = report["message"]
    assert message["role"] == "assistant"
    assert message["id"] == chunks[0]["messageId"]
    user_message, assistant = report["messages"]
    assert user_message["role"] == "user"
    assert assistant == message
    parts = message["parts"]

    text = "".join(part["text"] for part in parts if part["type"] == "text")
    assert "not a language model" in text
    assert 'You wrote "Hi from the SDK"' in text
    assert all(part["state"] == "done" for part in parts if part["type"] == "text")

    [tool] = [part for part in parts if part["type"] in ("tool-list_files", "dynamic-tool")]
    if tool["type"] == "dynamic-tool":
        assert tool["toolName"] == "list_files"
    assert tool["state"] == "output-available"
    assert tool["input"] == {"path": "."}
    assert tool["output"] == ". is empty."
    assert sum(part["type"] == "step-start" for part in parts) == 2

    data = [part for part in parts if part["type"].startswith("data-")]
    [user_data] = [part["data"] for part in data if part["type"] == "data-user-message"]
    rounds = [part["data"] for part in data if part["type"] == "data-assistant-message"]
    [usage] = [part["data"] for part in data if part["type"] == "data-usage"]
    assert len(rounds) == 2
    assert usage["output_tokens"] > 0 and usage["input_tokens"] > 0
    assert set(usage) >= {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    }

    chat = await wait_until_idle(user, chat_id)
    stored = chat["messages"]
    assert [m["id"] for m in stored] == [user_data["id"], *(r["id"] for r in rounds)]
    assert stored[0]["role"] == "user"
    assert stored[0]["content"] == "Hi from the SDK\nsecond line"
    first, second = stored[1:]
    assert first["status"] == second["status"] == "ok"
    [call] = first["tool_calls"]
    assert (call["name"], call["status"], call["result"]) == ("list_files", "done", ". is empty.")
    assert call["tool_call_id"] == tool["toolCallId"]
    assert call["arguments"] == tool["input"]
    assert first["content"] + second["content"] == text
    assert sum(m["usage"]["output_tokens"] for m in stored[1:]) == usage["output_tokens"]


async def test_the_ai_sdk_regenerate_asks_hearth_for_a_new_answer(
    server: tuple[str, Any], user: Client
) -> None:
    """`regenerate()` goes through `prepareSendMessagesRequest` to `/regenerate`: the SDK's
    list ends with the new answer, and hearth keeps the old one as its sibling."""
    base_url, _ = server
    node_or_skip()
    chat_id = (await user.post("/api/chats", json={})).json()["id"]

    report = await drive_turn(base_url, user, chat_id, "Try this twice", "--regenerate")

    assert report["errors"] == [] and report["status"] == "ready" and report["done"] is True
    sent, regenerated = report["requests"]
    assert sent["url"].endswith(f"/api/chats/{chat_id}/messages")
    assert sent["body"] == {"content": "Try this twice", "attachments": []}
    stored = (await wait_until_idle(user, chat_id))["messages"]
    question = stored[0]
    assert regenerated == {
        "url": f"{base_url}/api/chats/{chat_id}/regenerate",
        "body": {"message_id": question["id"]},
    }
    first_ids = [c["data"]["id"] for c in report["first"] if c["type"] == "data-assistant-message"]
    new_ids = [c["data"]["id"] for c in report["chunks"] if c["type"] == "data-assistant-message"]
    assert first_ids and new_ids and set(first_ids).isdisjoint(new_ids)

    # The SDK replaced its answer with the new one; hearth shows the new branch.
    user_message, answer = report["messages"]
    assert user_message["role"] == "user" and answer == report["message"]
    rounds = [p["data"]["id"] for p in answer["parts"] if p["type"] == "data-assistant-message"]
    assert rounds == new_ids
    assert [m["id"] for m in stored] == [question["id"], *new_ids]
    assert stored[1]["sibling_ids"] == [first_ids[0], new_ids[0]]
    assert stored[1]["parent_id"] == question["id"]


async def test_the_ai_sdk_resumes_a_turn_in_the_middle(
    server: tuple[str, Any],
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    catalogue: Any,
) -> None:
    """A page reloaded mid-turn: a new chat's `resumeStream()`, through
    `prepareReconnectToStreamRequest`, reads the running turn from its `start` and folds the
    whole answer, while the client that sent it is still reading."""
    base_url, _ = server
    node_or_skip()
    fake = fakes["openai"]
    text = "Resumed in the middle of it. " * 8
    fake.script(Reply(text=text, chunk_chars=6, token_interval=0.03))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "Go"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        body = ""
        pieces = response.aiter_text()
        async for piece in pieces:
            body += piece
            if body.count('"text-delta"') >= 5:
                break  # the turn is under way: the page reloads here
        resumed = asyncio.create_task(drive_turn(base_url, user, chat_id, "", "--resume"))
        body += "".join([piece async for piece in pieces])
    report = await resumed

    assert report["errors"] == [] and report["status"] == "ready" and report["done"] is True
    [request] = report["requests"]
    assert request == {"url": f"{base_url}/api/chats/{chat_id}/stream", "body": None}
    assert report["response"]["uiMessageStream"] == "v1"
    posted = [c for c in parse_stream(body) if c["type"] != "[DONE]"]
    assert report["chunks"] == posted  # the whole turn, replayed from its `start`
    [answer] = report["messages"]
    assert answer["role"] == "assistant" and answer == report["message"]
    said = "".join(p["text"] for p in answer["parts"] if p["type"] == "text")
    assert said == text
    stored = (await wait_until_idle(user, chat_id))["messages"]
    assert stored[-1]["content"] == text
