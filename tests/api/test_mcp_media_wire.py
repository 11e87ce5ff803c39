"""Golden wire files for media an MCP tool returns, one per provider kind (docs/wire.md §3): the
same path as `read_file` media, a file, a note and, in the turn of the call only, native input.

A real hearth is served over HTTP and talks over stdio to a real MCP server,
`tests/fakes/mcp_servers/gallery.py`, whose answers are fixed bytes: a golden file must be the same
from one run to the next, which a server nobody here wrote does not promise. It is the only
server configured, and it is waited for before the first turn, so the catalogue in the system
prompt never changes either. What does differ per run (the chat's id and the ids of the tool call
rows, both in the media paths) is replaced by placeholders before the comparison.

One question makes the model activate the group and call two tools in one round: `chart` answers
with text, a PNG and a WAV, `archive` with a gzip blob resource. The serving model views images,
and no capability admits audio or an archive, so the PNG goes in natively in the request after
the tool results, labelled, while the WAV and the gzip stay notes; at the next question the PNG
is a note as well. Beside the snapshot, those facts are asserted one by one, so a changed golden
file that breaks one of them does not pass review as a mere reshuffle.
"""

from __future__ import annotations

import base64
import json
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from app.main import create_app
from app.services import Services
from app.settings import Settings
from tests.api.test_mcp_results import calls, turn
from tests.api.test_media import blocks, bodies, media_blocks, sent_bytes, texts
from tests.fakes.mcp_servers.gallery import GZIP, PNG, WAV
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.golden import assert_golden
from tests.provider_setup import KINDS, VISION_MODEL_IDS, providers_yaml
from tests.support import ROOT, Client, http_client, live_server, wait_until_idle

pytestmark = pytest.mark.slow

GALLERY = ROOT / "tests/fakes/mcp_servers/gallery.py"
CHART, ARCHIVE = "mcp__gallery__chart", "mcp__gallery__archive"
IDS = {
    "anthropic": ("toolu_01Act", "toolu_01Chart", "toolu_01Archive"),
    "openai": ("call_act", "call_chart", "call_archive"),
    "moonshot": (
        "functions.activate_tools:0",
        f"functions.{CHART}:1",
        f"functions.{ARCHIVE}:2",
    ),
}
"""The ids of the activation and of the two media calls, as each provider spells them."""
LABEL_TAG = "[hearth/tool-media]"


@dataclass
class Gallery:
    client: Client
    services: Services


@pytest.fixture
async def gallery(
    database_url: str,
    fakes: dict[str, FakeProviderServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    services: Services,  # not used: asked for so the shared tables are emptied afterwards
) -> AsyncIterator[Gallery]:
    """A hearth served over HTTP with the gallery server as its only MCP group, started."""
    monkeypatch.setenv("HEARTH_TEST_PROVIDER_KEY", "test-key")
    (tmp_path / "providers.yaml").write_text(providers_yaml(fakes))
    server = {
        "name": "gallery",
        "command": [sys.executable, str(GALLERY)],
        "description": "Charts, sounds and archives",
    }
    (tmp_path / "mcp.yaml").write_text(json.dumps({"servers": [server]}))  # JSON is YAML
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=tmp_path / "data",
        secret_key=SecretStr(secrets.token_hex(16)),
        providers_file=tmp_path / "providers.yaml",
        mcp_file=tmp_path / "mcp.yaml",
    )
    app = create_app(settings)
    async with live_server(app) as base_url, http_client(base_url=base_url) as http:
        registered = await http.post(
            "/api/auth/register",
            json={"email": f"g{secrets.token_hex(4)}@example.com", "password": "long enough"},
        )
        services: Services = app.state.services
        assert services.mcp is not None
        await services.mcp.wait_ready(30)
        yield Gallery(Client(http, user=registered.json()), services)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """The text of each tool result in a request, by call id, on either wire."""
    results: dict[str, str] = {}
    for message in body["messages"]:
        if message["role"] == "tool":
            results[message["tool_call_id"]] = message["content"]
        for block in blocks(message):
            if block.get("type") == "tool_result":
                content = block["content"]
                if isinstance(content, list):
                    content = "".join(part["text"] for part in content)
                results[block["tool_use_id"]] = content
    return results


def labels(body: dict[str, Any]) -> list[str]:
    return [text for text in texts(body) if LABEL_TAG in text]


def note(medium: dict[str, Any]) -> str:
    return f"{medium['path']} is a {medium['mime']} file of {medium['size']} bytes"


@pytest.mark.parametrize("kind", KINDS)
async def test_golden_mcp_image_native_in_its_turn_and_unadmitted_media_as_notes(
    kind: str, gallery: Gallery, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes[kind]
    model = VISION_MODEL_IDS[kind]
    activate, chart, archive = IDS[kind]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["gallery"]}, id=activate)]),
        Reply(tool_calls=[ToolCall(CHART, {}, id=chart), ToolCall(ARCHIVE, {}, id=archive)]),
        Reply(text="A red square. The sound and the archive I can only name."),
        Reply(text="Nothing new."),
    )
    client = gallery.client
    chat_id, first_chunks = await turn(client, model, "Show me the chart and its data.")
    await wait_until_idle(client, chat_id)
    _, second_chunks = await turn(client, model, "Anything else?", chat_id)
    chat = await wait_until_idle(client, chat_id)

    # The rounds are ok: no error anywhere, every call done.
    for chunks in (first_chunks, second_chunks):
        assert "error" not in [c["type"] for c in chunks], chunks
    assert [(m["status"], m["error"]) for m in chat["messages"]] == [("ok", None)] * 6
    _, chart_row, archive_row = calls(chat)
    assert [c["status"] for c in (chart_row, archive_row)] == ["done", "done"]
    image, sound = chart_row["media"]
    [blob] = archive_row["media"]
    folder = f"tool-media/{chat_id}"
    assert image == {
        "path": f"{folder}/{chart_row['id']}-1.png",
        "mime": "image/png",
        "size": len(PNG),
        "url": f"/data/files/{folder}/{chart_row['id']}-1.png",
    }
    assert (sound["path"], sound["mime"], sound["size"]) == (
        f"{folder}/{chart_row['id']}-2.wav",
        "audio/x-wav",
        len(WAV),
    )
    assert (blob["path"], blob["mime"], blob["size"]) == (
        f"{folder}/{archive_row['id']}-1.gz",
        "application/gzip",
        len(GZIP),
    )

    sent = bodies(fake)  # each validated against the provider SDK's request types
    assert len(sent) == 4
    masked = (
        json.dumps(sent)
        .replace(f"{folder}/{chart_row['id']}-", "tool-media/<chat>/<chart row>-")
        .replace(f"{folder}/{archive_row['id']}-", "tool-media/<chat>/<archive row>-")
    )
    assert chat_id not in masked
    assert_golden(f"wire_mcp_media_{kind}", json.loads(masked))

    # No request carries the bytes of what the model cannot take, nor any Python repr of bytes.
    everything = json.dumps(sent)
    for data in (PNG, WAV, GZIP):
        assert json.dumps(repr(data))[1:12] not in everything
    for data in (WAV, GZIP):
        assert base64.b64encode(data).decode() not in everything
    assert all(media_blocks(body) == [] for body in sent[:2])

    # The turn of the call: every tool result holds its notes, then the PNG, labelled.
    in_turn, next_turn = sent[2], sent[3]
    assert tool_results(in_turn)[chart] == chart_row["result"]
    assert tool_results(in_turn)[archive] == archive_row["result"]
    assert chart_row["result"].startswith("The chart, and how it sounds.\n")
    assert note(image) in chart_row["result"] and note(sound) in chart_row["result"]
    assert archive_row["result"].startswith("The data, compressed.\n")
    assert note(blob) in archive_row["result"]
    label = (
        f"Media 1 of 1 from {CHART} (call {chart}): {image['path']} (image/png, {len(PNG)} "
        f"bytes). Not provided by the user. {LABEL_TAG}"
    )
    assert labels(in_turn) == [label]
    [native] = media_blocks(in_turn)
    assert sent_bytes(native) == PNG
    messages = in_turn["messages"]
    if kind == "anthropic":
        # The labels and media follow the tool_result blocks inside the same user message.
        last = messages[-1]
        assert last["role"] == "user" and messages[-2]["role"] == "assistant"
        assert [b["type"] for b in last["content"]][:4] == ["tool_result"] * 2 + ["text", "image"]
        assert last["content"][2]["text"] == label and last["content"][3] == native
    else:
        # One user message right after the tool messages of the round.
        roles = [m["role"] for m in messages]
        at = next(i for i, m in enumerate(messages) if m.get("tool_call_id") == chart)
        assert roles[at - 1 : at + 3] == ["assistant", "tool", "tool", "user"]
        shown = blocks(messages[at + 2])
        assert [b["type"] for b in shown] == ["text", "image_url"]
        assert shown[0]["text"] == label and shown[1] == native

    # The next turn: the same results, every medium a note only.
    assert tool_results(next_turn)[chart] == chart_row["result"]
    assert tool_results(next_turn)[archive] == archive_row["result"]
    assert media_blocks(next_turn) == [] and labels(next_turn) == []
    assert base64.b64encode(PNG).decode() not in json.dumps(next_turn)
