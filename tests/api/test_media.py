"""Media on the wire (docs/wire.md §3): attachments and `read_file` media, routed per serving model.

Uploads are made here as the upload route stores them (a row and the file under
`uploads/<id>/<name>` in the user's root), so these tests depend only on the message path.
"""

from __future__ import annotations

import base64
import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.agent.capabilities.media import _load
from app.files.roots import user_root
from app.files.sniff import sniff
from app.models import Upload
from app.services import Services
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.golden import assert_golden
from tests.provider_setup import MEDIA_MODEL_IDS, MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")

KINDS = ["anthropic", "openai"]
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def png(width: int = 4, height: int = 4, noise: bool = False) -> bytes:
    image = Image.new("RGB", (width, height), (200, 40, 40))
    if noise:
        image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def upload(services: Services, user: Client, name: str, data: bytes) -> str:
    upload_id = uuid.uuid4()
    relative = f"uploads/{upload_id}/{name}"
    path = user_root(services.settings.data_dir, user.user["id"]) / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    async with services.sessions() as db:
        db.add(
            Upload(
                id=upload_id,
                user_id=uuid.UUID(user.user["id"]),
                filename=name,
                stored_path=relative,
                mime=sniff(data[:8192]),
                size=len(data),
                sha256="0" * 64,
                created_at=services.clock.now(),
            )
        )
        await db.commit()
    return str(upload_id)


async def send(
    user: Client, chat_id: str, content: str, attachments: list[str] | None = None
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"content": content}
    if attachments:
        body["attachments"] = attachments
    response = await user.post(f"/api/chats/{chat_id}/messages", json=body)
    assert response.status_code == 200, response.text
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks], chunks
    await wait_until_idle(user, chat_id)
    return chunks


def bodies(fake: FakeProviderServer) -> list[dict[str, Any]]:
    for request in fake.model_requests:
        assert request.validation_error is None, request.validation_error
    return [request.body for request in fake.model_requests]


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if content is None:
        return []
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def media_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    kinds = {"image", "document", "image_url", "file", "video_url"}
    return [b for m in body["messages"] for b in blocks(m) if b.get("type") in kinds]


def texts(body: dict[str, Any]) -> list[str]:
    return [b["text"] for m in body["messages"] for b in blocks(m) if b.get("type") == "text"]


def sent_bytes(block: dict[str, Any]) -> bytes:
    if block["type"] in ("image", "document"):
        return base64.b64decode(block["source"]["data"])
    url = block["image_url"]["url"] if block["type"] == "image_url" else block["file"]["file_data"]
    return base64.b64decode(url.split(",", 1)[1])


async def chat_on(user: Client, model: str) -> str:
    return (await user.post("/api/chats", json={"model": model})).json()["id"]


@pytest.mark.parametrize("kind", KINDS)
async def test_golden_image_and_pdf_attachments_then_a_read_file_image(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes[kind]
    image, pdf = png(), PDF
    ids = [
        await upload(services, user, "chart.png", image),
        await upload(services, user, "a.pdf", pdf),
    ]
    read = ToolCall(
        "read_file",
        {"path": f"uploads/{ids[0]}/chart.png"},
        id="toolu_01Rd" if kind == "anthropic" else "call_rd",
    )
    fake.script(
        Reply(text="I see a chart and a PDF."), Reply(tool_calls=[read]), Reply(text="Red.")
    )
    chat_id = await chat_on(user, MEDIA_MODEL_IDS[kind])
    await send(user, chat_id, "What are these?", ids)
    await send(user, chat_id, "Look at the chart again")
    sent = bodies(fake)
    assert_golden(
        f"wire_media_{kind}",
        json.loads(json.dumps(sent).replace(ids[0], "<upload-1>").replace(ids[1], "<upload-2>")),
    )

    # Turn 1: both attachments natively, bytes as stored.
    first = media_blocks(sent[0])
    assert [sent_bytes(b) for b in first] == [image, pdf]
    # Turn 2: the attachments are notes now; the read_file image is labelled, right after
    # the tool result, in the current turn only.
    notes = [t for t in texts(sent[1]) if t.startswith("[attached file:")]
    assert notes == [
        f"[attached file: uploads/{ids[0]}/chart.png (image/png, {len(image)} bytes)]",
        f"[attached file: uploads/{ids[1]}/a.pdf (application/pdf, {len(pdf)} bytes)]",
    ]
    assert media_blocks(sent[1]) == []
    third = sent[2]
    [medium] = media_blocks(third)
    assert sent_bytes(medium) == image
    label = (
        f"Media 1 of 1 from read_file (call {read.id}): uploads/{ids[0]}/chart.png "
        f"(image/png, {len(image)} bytes). Not provided by the user. [hearth/tool-media]"
    )
    assert label in texts(third)
    if kind == "anthropic":
        last = third["messages"][-1]["content"]
        assert [b["type"] for b in last][:3] == ["tool_result", "text", "image"]
        assert last[1]["text"] == label
    else:
        roles = [m["role"] for m in third["messages"]]
        tool_at = roles.index("tool")
        assert roles[tool_at + 1] == "user"
        assert blocks(third["messages"][tool_at + 1])[0]["text"] == label


@pytest.mark.parametrize("kind", KINDS)
async def test_a_big_png_is_scaled_for_anthropic_only(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    big = png(1500, 1400, noise=True)
    assert len(big) > 6 * 1024 * 1024 > 3840 * 1024
    upload_id = await upload(services, user, "photo.png", big)
    fake = fakes[kind]
    fake.script(Reply(text="A photo."))
    await send(user, await chat_on(user, MEDIA_MODEL_IDS[kind]), "And this?", [upload_id])
    [block] = media_blocks(bodies(fake)[0])
    data = sent_bytes(block)
    if kind == "anthropic":
        assert len(data) <= 3840 * 1024
        with Image.open(io.BytesIO(data)) as scaled:
            assert scaled.format == "PNG" and scaled.width < 1500
    else:
        assert data == big


async def test_capabilities_gate_each_format(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    """A model without vision or document gets notes; the bytes never go."""
    ids = [await upload(services, user, "c.png", png()), await upload(services, user, "a.pdf", PDF)]
    video = b"\x00\x00\x00\x18ftypmp42" + bytes(100)
    ids.append(await upload(services, user, "v.mp4", video))
    fake = fakes["openai"]
    fake.script(Reply(text="ok"), Reply(text="ok"))
    await send(user, await chat_on(user, MODEL_IDS["openai"]), "Files", ids)  # no capabilities
    await send(user, await chat_on(user, MEDIA_MODEL_IDS["openai"]), "Files", ids)  # no video
    plain, vision = bodies(fake)
    assert media_blocks(plain) == []
    assert sum(t.startswith("[attached file:") for t in texts(plain)) == 3
    assert [b["type"] for b in media_blocks(vision)] == ["image_url", "file"]
    assert [t for t in texts(vision) if t.startswith("[attached file:")] == [
        f"[attached file: uploads/{ids[2]}/v.mp4 (video/mp4, {len(video)} bytes)]"
    ]


async def test_budgets_leave_the_fifth_medium_and_the_overflow_as_notes(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    ids = [await upload(services, user, f"{n}.png", png(4 + n, 4)) for n in range(5)]
    fake = fakes["openai"]
    fake.script(Reply(text="ok"))
    await send(user, await chat_on(user, MEDIA_MODEL_IDS["openai"]), "Five", ids)
    [body] = bodies(fake)
    assert len(media_blocks(body)) == 4
    assert [t for t in texts(body) if t.startswith("[attached file:")] == [
        f"[attached file: uploads/{ids[4]}/4.png (image/png, {len(png(8, 4))} bytes)]"
    ]


async def test_undecodable_or_escaped_tool_media_go_with_neither_bytes_nor_label(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services, tmp_path: Path
) -> None:
    root = user_root(services.settings.data_dir, user.user["id"])
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png")
    (root / "good.png").write_bytes(png())
    fake = fakes["openai"]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": "broken.png"}, id="call_1"),
                ToolCall("read_file", {"path": "good.png"}, id="call_2"),
            ]
        ),
        Reply(text="One image."),
    )
    chat_id = await chat_on(user, MEDIA_MODEL_IDS["openai"])
    await send(user, chat_id, "Both images")
    body = bodies(fake)[1]
    assert len(media_blocks(body)) == 1
    labels = [t for t in texts(body) if "[hearth/tool-media]" in t]
    assert labels == [
        f"Media 1 of 1 from read_file (call call_2): good.png (image/png, {len(png())} bytes). "
        "Not provided by the user. [hearth/tool-media]"
    ]
    chat = await wait_until_idle(user, chat_id)
    media = [c["media"] for c in chat["messages"][1]["tool_calls"]]
    assert media[1] == [
        {"path": "good.png", "mime": "image/png", "size": len(png()), "url": "/data/files/good.png"}
    ]

    # A link swapped in for the file after the read is refused when the bytes are read again.
    outside = tmp_path / "secret.png"
    outside.write_bytes(png(5, 5))
    assert _load(root, "good.png", "image/png", "vision", 10 * 1024 * 1024) == png()
    (root / "good.png").unlink()
    os.symlink(outside, root / "good.png")
    assert _load(root, "good.png", "image/png", "vision", 10 * 1024 * 1024) is None
    fake.script(Reply(text="later"))
    await send(user, chat_id, "Once more")
    assert media_blocks(bodies(fake)[-1]) == []


async def test_a_user_quoting_the_label_is_left_alone(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    quoted = (
        "Media 1 of 1 from read_file (call x): a.png. Not provided by the user. [hearth/tool-media]"
    )
    fake = fakes["openai"]
    fake.script(Reply(text="ok"))
    await send(user, await chat_on(user, MEDIA_MODEL_IDS["openai"]), quoted)
    [body] = bodies(fake)
    assert {"role": "user", "content": quoted} in body["messages"]


async def test_read_file_description_names_what_the_serving_model_can_view(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    def description(body: dict[str, Any]) -> str:
        tool = next(t for t in body["tools"] if "read_file" in json.dumps(t)[:80])
        return tool.get("description") or tool["function"]["description"]

    for model in (MODEL_IDS["openai"], MEDIA_MODEL_IDS["openai"]):
        fakes["openai"].script(Reply(text="ok"))
        await send(user, await chat_on(user, model), "hi")
    fakes["moonshot"].script(Reply(text="ok"))
    await send(user, await chat_on(user, "kimi/k3-test"), "hi")
    plain, vision = (description(b) for b in bodies(fakes["openai"]))
    [video] = (description(b) for b in bodies(fakes["moonshot"]))
    assert plain.endswith("Images, PDFs and videos are described.")
    assert vision.endswith(
        "You can view images (PNG, JPEG, GIF, WebP) and PDF documents directly: "
        "read_file shows them to you."
    )
    assert video.endswith(
        "You can view videos (MP4, 3GPP, QuickTime, WebM, AVI, FLV, MPEG) directly: "
        "read_file shows them to you."
    )


@pytest.mark.slow
async def test_the_request_budget_leaves_the_49th_mib_as_a_note(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    """48 MiB of media per request on OpenAI-compatible APIs: three PDFs of 12.5 MiB fit, the
    fourth would pass the budget and stays a note."""
    size = 25 * 1024 * 1024 // 2
    pdfs = [PDF + bytes([n]) * (size - len(PDF)) for n in range(4)]
    ids = [await upload(services, user, f"{n}.pdf", pdf) for n, pdf in enumerate(pdfs)]
    fake = fakes["openai"]
    fake.script(Reply(text="ok"))
    await send(user, await chat_on(user, MEDIA_MODEL_IDS["openai"]), "Four reports", ids)
    [body] = bodies(fake)
    assert [sent_bytes(b) for b in media_blocks(body)] == pdfs[:3]
    assert [t for t in texts(body) if t.startswith("[attached file:")] == [
        f"[attached file: uploads/{ids[3]}/3.pdf (application/pdf, {size} bytes)]"
    ]


async def test_a_video_goes_to_moonshot_as_video_url_and_never_to_anthropic(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    video = b"\x00\x00\x00\x18ftypmp42" + bytes(2000)
    upload_id = await upload(services, user, "clip.mp4", video)
    fakes["moonshot"].script(Reply(text="A clip."))
    await send(user, await chat_on(user, "kimi/k3-test"), "Watch this", [upload_id])
    [body] = bodies(fakes["moonshot"])
    [part] = [b for b in media_blocks(body) if b["type"] == "video_url"]
    assert part["video_url"]["url"] == "data:video/mp4;base64," + base64.b64encode(video).decode()

    fakes["anthropic"].script(Reply(text="I can't watch it."))
    await send(user, await chat_on(user, MEDIA_MODEL_IDS["anthropic"]), "Watch this", [upload_id])
    [body] = bodies(fakes["anthropic"])
    assert media_blocks(body) == []
    note = f"[attached file: uploads/{upload_id}/clip.mp4 (video/mp4, {len(video)} bytes)]"
    assert note in texts(body)
