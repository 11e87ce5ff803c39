"""What real MCP servers return, through a real hearth: media as files and native input, errors
as results, bad blocks as notes, and a group that is still starting waited for.

`@modelcontextprotocol/server-everything` (pinned in tests/js, installed by `make test`) is the
server nobody here wrote; `tests/fakes/mcp_servers/faults.py` sends what a broken one would.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.main import create_app
from app.services import Services
from app.settings import Settings
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MEDIA_MODEL_IDS, MODEL_IDS, providers_yaml
from tests.support import (
    IN_CI,
    ROOT,
    Client,
    http_client,
    live_server,
    parse_stream,
    wait_until,
    wait_until_idle,
)

pytestmark = pytest.mark.slow

EVERYTHING = ROOT / "tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FAULTS = ROOT / "tests/fakes/mcp_servers/faults.py"
SLOW = ROOT / "tests/fakes/mcp_servers/slow_start.py"
CHANGING = ROOT / "tests/fakes/mcp_servers/changing.py"
ASKING = ROOT / "tests/fakes/mcp_servers/asking.py"


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None or not EVERYTHING.is_file():
        problem = "Node.js and `npm ci --prefix tests/js` are needed for server-everything"
        if IN_CI:
            pytest.fail(problem + " (mandatory under CI=true)", pytrace=False)
        pytest.skip(problem)
    return node


@dataclass
class Hearth:
    client: Client
    other: Client
    services: Services


@pytest.fixture
async def hearth(
    request: pytest.FixtureRequest,
    database_url: str,
    fakes: dict[str, FakeProviderServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    services: Services,  # not used: asked for so the shared tables are emptied afterwards
) -> AsyncIterator[Hearth]:
    node = node_or_skip()
    monkeypatch.setenv("HEARTH_TEST_PROVIDER_KEY", "test-key")
    (tmp_path / "providers.yaml").write_text(providers_yaml(fakes))
    servers: list[dict[str, Any]] = [
        {"name": "everything", "command": [node, str(EVERYTHING), "stdio"], "timeout_seconds": 2},
        {"name": "faults", "command": [sys.executable, str(FAULTS)]},
        {
            "name": "slow",
            "command": [sys.executable, str(SLOW)],
            "env": {"SLOW_START_SECONDS": "1.5"},
        },
        {"name": "broken", "command": [sys.executable, "-c", "raise SystemExit(3)"]},
        {"name": "changing", "command": [sys.executable, str(CHANGING)]},
    ]
    # The servers that ask back, only for the tests that need them (`indirect` parameters).
    asking = {
        "asking": {
            "command": [node, str(EVERYTHING), "stdio"],
            "allow_sampling": True,
            "timeout_seconds": 30,
        },
        "modern": {"command": [sys.executable, str(ASKING)], "allow_sampling": True},
    }
    servers += [{"name": name, **asking[name]} for name in getattr(request, "param", ())]
    for server in servers:
        server["description"] = f"The {server['name']} server"
    (tmp_path / "mcp.yaml").write_text(json.dumps({"servers": servers}))  # JSON is YAML
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=tmp_path / "data",
        secret_key=secrets.token_hex(16),
        providers_file=tmp_path / "providers.yaml",
        mcp_file=tmp_path / "mcp.yaml",
        max_upload_bytes=2 * 1024 * 1024,
    )
    app = create_app(settings)
    async with (
        live_server(app) as base_url,
        http_client(base_url=base_url) as http,
        http_client(base_url=base_url) as other_http,
    ):
        clients = []
        for http_ in (http, other_http):
            registered = await http_.post(
                "/api/auth/register",
                json={"email": f"m{secrets.token_hex(4)}@example.com", "password": "long enough"},
            )
            clients.append(Client(http_, user=registered.json()))
        yield Hearth(clients[0], clients[1], app.state.services)


async def turn(
    client: Client, model: str, content: str, chat_id: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """One turn of `model` (a model id), in a new chat unless `chat_id` is given."""
    if chat_id is None:
        chat_id = (await client.post("/api/chats", json={"model": model})).json()["id"]
    response = await client.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    return chat_id, parse_stream(response.text)


def calls(chat: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for message in chat["messages"] for call in message["tool_calls"]]


def request_text(body: dict[str, Any]) -> str:
    return json.dumps(body)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_an_mcp_image_is_a_file_a_note_and_native_input_in_its_turn_only(
    kind: str, hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes[kind]
    model = MEDIA_MODEL_IDS[kind]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["everything"]})]),
        Reply(tool_calls=[ToolCall("mcp__everything__get-tiny-image", {})]),
        Reply(text="That is the MCP logo."),
        Reply(text="Nothing new."),
    )
    chat_id, chunks = await turn(hearth.client, model, "Show me the tiny image.")
    chat = await wait_until_idle(hearth.client, chat_id)
    [_, image_call] = calls(chat)
    assert image_call["status"] == "done", image_call["result"]
    [medium] = image_call["media"]
    assert medium["path"] == f"tool-media/{chat_id}/{image_call['id']}-1.png"
    assert (medium["mime"], medium["size"]) == ("image/png", 4033)
    # The stored result, the stream and the request hold the note, never bytes or a repr.
    assert image_call["result"].startswith("Here's the image you requested:")
    assert f"{medium['path']} is a image/png file of 4033 bytes" in image_call["result"]
    outputs = [c["output"] for c in chunks if c["type"] == "tool-output-available"]
    assert image_call["result"] in outputs
    for text in (json.dumps(chunks), json.dumps(chat)):
        assert "iVBORw0KGgo" not in text and "b'\\\\x89PNG" not in text
    served = await hearth.client.get(medium["url"])
    assert served.status_code == 200 and served.content.startswith(b"\x89PNG")
    assert (await hearth.other.get(medium["url"])).status_code == 404

    after_image = fake.model_requests[2].body
    label = f"from mcp__everything__get-tiny-image (call {image_call['tool_call_id']})"
    assert label in request_text(after_image) and "[hearth/tool-media]" in request_text(after_image)
    if kind == "anthropic":
        assert '"media_type": "image/png"' in request_text(after_image)
    else:
        assert '"url": "data:image/png;base64,' in request_text(after_image)

    await turn(hearth.client, model, "Anything else?", chat_id)
    next_question = request_text(fake.model_requests[3].body)
    assert "iVBORw0KGgo" not in next_question and label not in next_question
    assert f"{medium['path']} is a image/png file of 4033 bytes" in next_question


async def test_an_embedded_gzip_stays_a_note_and_never_fails_an_anthropic_round(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["anthropic"]
    data = "data:text/plain;base64,SGVsbG8sIGd6aXAgd29ybGQh"  # "Hello, gzip world!"
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["everything"]})]),
        Reply(
            tool_calls=[
                ToolCall(
                    "mcp__everything__gzip-file-as-resource",
                    {"name": "hello.txt.gz", "data": data, "outputType": "resource"},
                )
            ]
        ),
        Reply(text="Compressed."),
    )
    chat_id, chunks = await turn(hearth.client, MODEL_IDS["anthropic"], "Compress this.")
    assert "error" not in [c["type"] for c in chunks]
    chat = await wait_until_idle(hearth.client, chat_id)
    assert [m["status"] for m in chat["messages"]] == ["ok", "ok", "ok", "ok"]
    [_, gzip_call] = calls(chat)
    [medium] = gzip_call["media"]
    assert medium["path"].startswith(f"tool-media/{chat_id}/{gzip_call['id']}-1.")
    served = await hearth.client.get(medium["url"])
    assert served.content.startswith(b"\x1f\x8b")  # the gzip, kept as sent
    last = request_text(fake.model_requests[2].body)
    assert '"type": "document"' not in last and '"type": "image"' not in last
    assert f"{medium['path']} is a {medium['mime']} file" in last


async def test_tool_errors_are_results_and_never_end_the_turn(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    failing = ToolCall("mcp__faults__fail", {"reason": "no such city"})
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["faults"]})]),
        *[Reply(tool_calls=[failing]) for _ in range(4)],
        Reply(text="The lookup keeps failing."),
    )
    chat_id, chunks = await turn(hearth.client, MODEL_IDS["openai"], "Look it up.")
    assert "error" not in [c["type"] for c in chunks]
    chat = await wait_until_idle(hearth.client, chat_id)
    assert all(m["status"] == "ok" and m["error"] is None for m in chat["messages"])
    failed = calls(chat)[1:]
    assert len(failed) == 4 and all(c["status"] == "failed" for c in failed)
    results = [c["result"] for c in failed]
    assert all("the lookup failed: no such city" in r for r in results), results
    assert "the lookup failed: no such city" in request_text(fake.model_requests[2].body)
    assert chat["messages"][-1]["content"] == "The lookup keeps failing."


async def test_bad_media_become_notes_and_nothing_fails(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["faults"]})]),
        Reply(
            tool_calls=[
                ToolCall("mcp__faults__bad_image", {}, id="bad"),
                ToolCall("mcp__faults__odd_blob", {}, id="odd"),
                ToolCall("mcp__faults__big_image", {"megabytes": 3}, id="big"),
            ]
        ),
        Reply(text="Noted."),
    )
    chat_id, chunks = await turn(hearth.client, MEDIA_MODEL_IDS["openai"], "Send me pictures.")
    assert "error" not in [c["type"] for c in chunks]
    chat = await wait_until_idle(hearth.client, chat_id)
    by_id = {c["tool_call_id"]: c for c in calls(chat)}
    bad, odd, big = by_id["bad"], by_id["odd"], by_id["big"]
    assert all(c["status"] == "done" for c in (bad, odd, big)), [
        (c["status"], c["result"]) for c in (bad, odd, big)
    ]
    assert bad["result"] == (
        "Here is a picture.\n[the image the server sent could not be decoded; it is not kept]"
    )
    assert bad["media"] == []
    [blob] = odd["media"]
    assert blob["mime"] == "application/octet-stream"  # sniffed, not the declared type
    assert blob["path"].endswith(".bin")
    assert big["media"] == [] and "larger than 2 MiB; it is not kept" in big["result"]
    last = request_text(fake.model_requests[2].body)
    assert "image_url" not in last and '"type": "file"' not in last


async def test_a_group_still_starting_is_waited_for_and_tools_tell_their_status(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    groups = {g["group"]: g for g in (await hearth.client.get("/api/tools")).json()}
    assert groups["slow"]["status"] == "starting" and groups["slow"]["error"] is None
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["slow"]})]),
        Reply(tool_calls=[ToolCall("mcp__slow__ping", {})]),
        Reply(text="It answered."),
    )
    chat_id, _ = await turn(hearth.client, MODEL_IDS["openai"], "Ping the slow server.")
    chat = await wait_until_idle(hearth.client, chat_id)
    activation, ping = calls(chat)
    assert json.loads(activation["result"])[0]["status"] == "activated"
    assert (ping["status"], ping["result"]) == ("done", "pong")
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    groups = {g["group"]: g for g in (await hearth.client.get("/api/tools")).json()}
    assert groups["broken"]["status"] == "unavailable"
    assert groups["broken"]["error"]
    assert groups["everything"]["error"] is None


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def test_a_changed_tool_list_reaches_the_chat_at_its_next_turn(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["changing"]})]),
        Reply(tool_calls=[ToolCall("mcp__changing__learn", {})]),
        Reply(text="I can shout now."),
        Reply(tool_calls=[ToolCall("mcp__changing__shout", {"text": "hi"})]),
        Reply(text="Done."),
    )
    chat_id, _ = await turn(hearth.client, MODEL_IDS["openai"], "Learn something.")
    group = hearth.services.mcp.group("changing")
    assert group is not None

    async def relisted() -> bool:
        return any(tool.name == "mcp__changing__shout" for tool in group.tools)

    await wait_until(relisted, failure="the changed list was not read")
    within_the_turn = [tool_names(r.body) for r in fake.model_requests[1:3]]
    assert all("mcp__changing__shout" not in names for names in within_the_turn)
    assert within_the_turn[0] == within_the_turn[1]  # byte-stable inside the turn

    await turn(hearth.client, MODEL_IDS["openai"], "Shout hi.", chat_id)
    assert "mcp__changing__shout" in tool_names(fake.model_requests[3].body)
    chat = await wait_until_idle(hearth.client, chat_id)
    shout = calls(chat)[-1]
    assert (shout["name"], shout["status"], shout["result"]) == (
        "mcp__changing__shout",
        "done",
        "HI",
    )
    listed = {g["group"]: g for g in (await hearth.client.get("/api/tools")).json()}
    assert [t["name"] for t in listed["changing"]["tools"]] == [
        "mcp__changing__learn",
        "mcp__changing__shout",
    ]


async def test_progress_is_streamed_and_keeps_a_long_call_alive(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    """A 4 s operation on a server whose calls time out after 2 s: its progress reports, every
    half second, each give the call its time again, and each reaches the client."""
    fake = fakes["openai"]
    operation = ToolCall(
        "mcp__everything__trigger-long-running-operation", {"duration": 4, "steps": 8}, id="op"
    )
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["everything"]})]),
        Reply(tool_calls=[operation]),
        Reply(text="It finished."),
    )
    chat_id, chunks = await turn(hearth.client, MODEL_IDS["openai"], "Run the long one.")
    reports = [c["data"] for c in chunks if c["type"] == "data-tool-progress"]
    assert [r["progress"] for r in reports] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert all(r["tool_call_id"] == "op" and r["total"] == 8 for r in reports)
    chat = await wait_until_idle(hearth.client, chat_id)
    done = calls(chat)[-1]
    assert done["status"] == "done", done
    assert "Long running operation completed" in done["result"]


async def test_a_groups_resources_are_read_through_one_tool_and_only_its_own(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    listed = {g["group"]: g for g in (await hearth.client.get("/api/tools")).json()}
    reader = next(
        t for t in listed["everything"]["tools"] if t["name"] == "mcp__everything__read_resource"
    )
    assert (
        "- architecture.md: demo://resource/static/document/architecture.md (text/markdown)"
        in reader["description"]
    )
    assert "demo://resource/dynamic/text/{resourceId} (a template)" in reader["description"]
    assert all(t["name"] != "mcp__faults__read_resource" for t in listed["faults"]["tools"])

    read = "mcp__everything__read_resource"
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["everything"]})]),
        Reply(
            tool_calls=[
                ToolCall(read, {"uri": "demo://resource/dynamic/text/2"}, id="text"),
                ToolCall(read, {"uri": "demo://resource/dynamic/blob/1"}, id="blob"),
                ToolCall(read, {"uri": "faults://blob/1"}, id="foreign"),
            ]
        ),
        Reply(text="Read."),
    )
    chat_id, _ = await turn(hearth.client, MODEL_IDS["openai"], "Read the resources.")
    chat = await wait_until_idle(hearth.client, chat_id)
    by_id = {c["tool_call_id"]: c for c in calls(chat)}
    text, blob, foreign = by_id["text"], by_id["blob"], by_id["foreign"]
    assert text["status"] == "done"
    assert text["result"].startswith("Resource demo://resource/dynamic/text/2:\nResource 2: ")
    assert blob["status"] == "done" and len(blob["media"]) == 1
    assert blob["media"][0]["path"].startswith(f"tool-media/{chat_id}/{blob['id']}-1.")
    assert foreign["status"] == "failed"
    assert "'faults://blob/1' is not a resource of MCP server 'everything'" in foreign["result"]


@pytest.mark.parametrize("hearth", [("asking",)], indirect=True)
async def test_a_real_servers_form_pauses_the_turn_and_the_answer_reaches_the_server(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    """server-everything's form: the stream ends at `data-elicitation`, the answer (defaults
    filled in) goes back to the server inside its call, and the rest of the turn streams."""
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    form = ToolCall("mcp__asking__trigger-elicitation-request", {}, id="form")
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["asking"]})]),
        Reply(tool_calls=[form]),
        Reply(text="Thanks, Ada."),
    )
    chat_id, chunks = await turn(hearth.client, MODEL_IDS["openai"], "Fill in the form.")
    [asked] = [c["data"] for c in chunks if c["type"] == "data-elicitation"]
    assert asked["tool_call_id"] == "form"
    assert asked["message"] == "Please provide inputs for the following fields:"
    assert asked["requested_schema"]["required"] == ["name"]
    assert chunks[-1] == {"type": "[DONE]"}

    # Another user cannot see or answer it.
    foreign = await hearth.other.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": asked["elicitation_id"], "action": "decline"},
    )
    assert foreign.status_code == 404
    bad = await hearth.client.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": asked["elicitation_id"], "action": "accept", "content": {}},
    )
    assert bad.status_code == 422  # `name` is required
    answered = await hearth.client.post(
        f"/api/chats/{chat_id}/elicitations",
        json={
            "elicitation_id": asked["elicitation_id"],
            "action": "accept",
            "content": {"name": "Ada Lovelace", "check": True},
        },
    )
    assert answered.status_code == 200, answered.text
    rest = parse_stream(answered.text)
    [output] = [c for c in rest if c["type"] == "tool-output-available"]
    assert output["toolCallId"] == "form"
    chat = await wait_until_idle(hearth.client, chat_id)
    done = calls(chat)[-1]
    assert done["status"] == "done", done
    assert "- Name: Ada Lovelace" in done["result"]
    assert "- Agreed to terms: true" in done["result"]
    assert "- Favorite Integer: 42" in done["result"]  # the schema's default, filled in
    assert done["elicitation"]["action"] == "accept"
    assert chat["messages"][-1]["content"] == "Thanks, Ada."


@pytest.mark.parametrize("hearth", [("asking",)], indirect=True)
async def test_a_real_server_samples_the_chats_model_only_where_allowed(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    """server-everything asks for a completion: `asking` may (the chat's model answers, capped
    at its maximum output); `everything` may not, so it is never offered sampling."""
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    listed = {g["group"]: g for g in (await hearth.client.get("/api/tools")).json()}
    names = {group: {t["name"] for t in g["tools"]} for group, g in listed.items()}
    assert "mcp__asking__trigger-sampling-request" in names["asking"]
    assert "mcp__everything__trigger-sampling-request" not in names["everything"]

    fake = fakes["openai"]
    sample = ToolCall(
        "mcp__asking__trigger-sampling-request",
        {"prompt": "Name a colour", "maxTokens": 1_000_000},
        id="sample",
    )
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["asking"]})]),
        Reply(tool_calls=[sample]),
        Reply(text="Teal."),
        Reply(text="The server heard teal."),
    )
    chat_id, _ = await turn(hearth.client, MODEL_IDS["openai"], "Sample.")
    chat = await wait_until_idle(hearth.client, chat_id)
    done = calls(chat)[-1]
    assert done["status"] == "done", done
    assert "LLM sampling result" in done["result"] and "Teal." in done["result"]
    assert MODEL_IDS["openai"] in done["result"]
    completion = fake.model_requests[2].body
    assert completion.get("max_completion_tokens", completion.get("max_tokens")) == 1024
    assert "tools" not in completion
    assert completion["messages"][0] == {
        "role": "system",
        "content": "You are a helpful test server.",
    }
    assert chat["messages"][-1]["content"] == "The server heard teal."


@pytest.mark.parametrize("hearth", [("modern",)], indirect=True)
async def test_two_calls_at_once_on_one_modern_session_each_ask_their_own_user(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    """On a 2026-07-28 session a form travels inside its call, so two users' calls of one
    server at the same moment each get their own form, and each answer reaches its own call."""
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["modern"]})]),
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["modern"]})]),
        Reply(tool_calls=[ToolCall("mcp__modern__book", {"city": "Oslo"}, id="oslo")]),
        Reply(tool_calls=[ToolCall("mcp__modern__book", {"city": "Rome"}, id="rome")]),
        Reply(text="Done."),
        Reply(text="Done."),
    )
    chats = []
    for client in (hearth.client, hearth.other):
        chats.append((await client.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json())

    async def send(client: Client, chat: dict[str, Any]) -> list[dict[str, Any]]:
        response = await client.post(f"/api/chats/{chat['id']}/messages", json={"content": "Book"})
        return parse_stream(response.text)

    streams = await asyncio.gather(
        *(send(c, chat) for c, chat in zip((hearth.client, hearth.other), chats, strict=True))
    )
    asked = [
        next(c["data"] for c in chunks if c["type"] == "data-elicitation") for chunks in streams
    ]
    city = {"oslo": "Oslo", "rome": "Rome"}
    assert sorted(a["tool_call_id"] for a in asked) == ["oslo", "rome"]
    for form in asked:
        assert form["message"] == f"Who is the booking in {city[form['tool_call_id']]} for?"
    for client, chat, form, name in reversed(
        list(zip((hearth.client, hearth.other), chats, asked, ("Ada", "Grace"), strict=True))
    ):
        answered = await client.post(
            f"/api/chats/{chat['id']}/elicitations",
            json={
                "elicitation_id": form["elicitation_id"],
                "action": "accept",
                "content": {"name": name},
            },
        )
        assert answered.status_code == 200, answered.text
    for client, chat, form, name in zip(
        (hearth.client, hearth.other), chats, asked, ("Ada", "Grace"), strict=True
    ):
        done = calls(await wait_until_idle(client, chat["id"]))[-1]
        assert done["status"] == "done", done
        assert done["result"] == f"Booked 1 night(s) in {city[form['tool_call_id']]} for {name}."


@pytest.mark.parametrize("hearth", [("modern",)], indirect=True)
async def test_a_modern_server_samples_inside_its_call(
    hearth: Hearth, fakes: dict[str, FakeProviderServer]
) -> None:
    assert hearth.services.mcp is not None
    await hearth.services.mcp.wait_ready(30)
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["modern"]})]),
        Reply(tool_calls=[ToolCall("mcp__modern__one_word", {"topic": "sea"})]),
        Reply(text="Blue."),
        Reply(text="It said blue."),
    )
    chat_id, _ = await turn(hearth.client, MODEL_IDS["openai"], "One word?")
    done = calls(await wait_until_idle(hearth.client, chat_id))[-1]
    assert done["result"] == f"The model says Blue. ({MODEL_IDS['openai']})."
