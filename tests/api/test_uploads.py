"""Uploads over real HTTP: streaming to disk, sniffed types, safe names, limits, ownership.

Multipart bodies are built by hand here (`form`), so a test controls every byte a client
could send: raw control characters in a filename, a lying Content-Type, a truncated body.
"""

from __future__ import annotations

import hashlib
import secrets
import tracemalloc
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import func, select

from app.files.roots import user_root
from app.files.schemas import UploadOut, UploadPage
from app.models import Upload
from app.services import Services
from tests.conftest import NewUser
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
PDF = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<<>>\n%%EOF\n"
TEXT = "Grüße, world\nsecond line\n".encode()
SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>\n'
BINARY = bytes([0, 159, 146, 150, 0, 1, 2, 3]) * 32

Part = tuple[str, bytes | None, bytes, str]  # field name, raw filename or None, content, type


def form(*parts: Part, boundary: str = "hearth-test-boundary") -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body with exactly these parts, and its Content-Type header."""
    body = bytearray()
    for name, filename, content, content_type in parts:
        body += f"--{boundary}\r\n".encode()
        disposition = f'Content-Disposition: form-data; name="{name}"'.encode()
        if filename is not None:
            disposition += b'; filename="' + filename + b'"'
        body += disposition + b"\r\n"
        if content_type:
            body += f"Content-Type: {content_type}\r\n".encode()
        body += b"\r\n" + content + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return bytes(body), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def file_part(name: str | bytes, content: bytes, content_type: str = "") -> Part:
    raw = name.encode() if isinstance(name, str) else name
    return ("file", raw, content, content_type)


async def upload(client: Client, *parts: Part, **kwargs: Any) -> list[dict[str, Any]]:
    body, headers = form(*parts)
    response = await client.post("/api/uploads", content=body, headers=headers, **kwargs)
    assert response.status_code == 201, response.text
    return response.json()


async def upload_one(client: Client, name: str, content: bytes) -> dict[str, Any]:
    [item] = await upload(client, file_part(name, content))
    return item


async def count_rows(services: Services) -> int:
    async with services.sessions() as db:
        return await db.scalar(select(func.count()).select_from(Upload)) or 0


def uploads_on_disk(services: Services, client: Client) -> list[Path]:
    folder = user_root(services.settings.data_dir, client.user["id"]) / "uploads"
    return sorted(folder.rglob("*")) if folder.exists() else []


def limit_to(services: Services, size: int) -> None:
    services.settings = services.settings.model_copy(update={"max_upload_bytes": size})


# Receiving files


async def test_upload_one_file_stores_it_and_answers_the_upload(
    user: Client, services: Services
) -> None:
    item = await upload_one(user, "chart.png", PNG)
    out = UploadOut.model_validate(item)
    assert (out.filename, out.mime, out.size) == ("chart.png", "image/png", len(PNG))
    assert out.sha256 == hashlib.sha256(PNG).hexdigest()
    assert out.path == f"uploads/{out.id}/chart.png"
    assert out.url == f"/data/{out.id}/chart.png"
    assert item["ingestion"] is None
    root = user_root(services.settings.data_dir, user.user["id"])
    assert (root / out.path).read_bytes() == PNG
    assert [p.name for p in (root / "uploads" / str(out.id)).iterdir()] == ["chart.png"]
    async with services.sessions() as db:
        row = await db.get(Upload, out.id)
    assert row is not None
    assert (row.user_id, row.chat_id, row.stored_path) == (
        uuid.UUID(user.user["id"]),
        None,
        out.path,
    )


async def test_several_files_in_one_request_are_sniffed_from_their_bytes(user: Client) -> None:
    items = await upload(
        user,
        # Every claim is wrong: the name and the client's Content-Type are both ignored.
        file_part("photo.txt", PNG, "text/plain"),
        file_part("paper.png", PDF, "image/png"),
        file_part("notes.pdf", TEXT, "application/pdf"),
        file_part("data.txt", BINARY, "text/plain"),
        file_part("logo.png", SVG, "image/png"),
        file_part("fake.png", TEXT, "image/png"),
    )
    assert [(i["filename"], i["mime"]) for i in items] == [
        ("photo.txt", "image/png"),
        ("paper.png", "application/pdf"),
        ("notes.pdf", "text/plain"),
        ("data.txt", "application/octet-stream"),
        ("logo.png", "image/svg+xml"),
        ("fake.png", "text/plain"),
    ]
    assert len({i["id"] for i in items}) == 6
    sizes = [len(PNG), len(PDF), len(TEXT), len(BINARY), len(SVG), len(TEXT)]
    assert [i["size"] for i in items] == sizes


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (b"../../etc/passwd", "passwd"),
        (b"C:\\Users\\me\\report.pdf", "report.pdf"),
        (b"dir\\sub\\notes.txt", "notes.txt"),
        (b"a/b\\c/d.txt", "d.txt"),
        (b"bad\x01na\x1fme\x7f.txt", "badname.txt"),
        (b"...hidden", "hidden"),
        (b"  . .env  ", "env"),
        (b"", "file"),
        (b"..", "file"),
        (b"../", "file"),
        ("résumé 2024.pdf".encode(), "résumé 2024.pdf"),
    ],
)
async def test_filenames_are_reduced_to_a_safe_basename(
    user: Client, services: Services, sent: bytes, stored: str
) -> None:
    [item] = await upload(user, file_part(sent, TEXT))
    assert item["filename"] == stored
    assert item["path"] == f"uploads/{item['id']}/{stored}"
    assert item["url"] == f"/data/{item['id']}/{quote(stored, safe='')}"
    root = user_root(services.settings.data_dir, user.user["id"])
    assert (root / item["path"]).read_bytes() == TEXT
    assert (root / item["path"]).parent.parent == root / "uploads"


async def test_an_ordinary_http_library_form_works(user: Client) -> None:
    chat = (await user.post("/api/chats", json={})).json()
    response = await user.post(
        "/api/uploads",
        files=[("file", ("a.png", PNG, "image/png")), ("file", ("b.pdf", PDF, "text/html"))],
        data={"chat_id": chat["id"]},
    )
    assert response.status_code == 201, response.text
    assert [(i["filename"], i["mime"]) for i in response.json()] == [
        ("a.png", "image/png"),
        ("b.pdf", "application/pdf"),
    ]


async def test_long_names_are_cut_to_255_bytes_keeping_the_extension(user: Client) -> None:
    [item] = await upload(user, file_part("é" * 300 + ".tar.gz", TEXT))
    name = item["filename"]
    assert name.endswith("é.gz") and len(name.encode()) <= 255
    assert len(name.encode()) >= 253


async def test_an_empty_filename_and_the_chat_field(user: Client, services: Services) -> None:
    chat = (await user.post("/api/chats", json={})).json()
    items = await upload(user, ("file", b"", TEXT, ""), ("chat_id", None, chat["id"].encode(), ""))
    assert items[0]["filename"] == "file"
    async with services.sessions() as db:
        row = await db.get(Upload, uuid.UUID(items[0]["id"]))
    assert row is not None and row.chat_id == uuid.UUID(chat["id"])


async def test_an_empty_file_is_kept(user: Client) -> None:
    item = await upload_one(user, "empty.txt", b"")
    assert (item["size"], item["sha256"]) == (0, hashlib.sha256(b"").hexdigest())


async def test_a_file_over_the_limit_is_413_and_nothing_is_kept(
    user: Client, services: Services
) -> None:
    limit_to(services, 1000)
    assert await upload_one(user, "fits.bin", b"x" * 1000)  # exactly the limit is fine
    before = uploads_on_disk(services, user)
    body, headers = form(file_part("ok.txt", TEXT), file_part("big.bin", b"y" * 1001))
    response = await user.post("/api/uploads", content=body, headers=headers)
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["detail"]
    assert uploads_on_disk(services, user) == before
    assert await count_rows(services) == 1


async def test_uploads_past_the_storage_quota_are_413_and_keep_nothing(
    user: Client, new_user: NewUser, services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"user_storage_bytes": 3000})
    root = user_root(services.settings.data_dir, user.user["id"])
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "notes" / "draft.md").write_bytes(b"w" * 1000)  # a tool's file counts too
    assert await upload_one(user, "a.bin", b"x" * 1500)
    before = uploads_on_disk(services, user)

    body, headers = form(file_part("b.txt", TEXT), file_part("c.bin", b"y" * 500))
    response = await user.post("/api/uploads", content=body, headers=headers)

    assert response.status_code == 413
    detail = response.json()["detail"]
    assert "storage quota of 2.9 KiB" in detail and "2.4 KiB in use" in detail, detail
    assert uploads_on_disk(services, user) == before
    assert await count_rows(services) == 1
    assert await upload_one(user, "d.bin", b"z" * 500)  # what still fits is taken
    assert await upload_one(
        await new_user(), "e.bin", b"o" * 2500
    )  # each user has a quota of their own


async def test_a_large_body_past_the_quota_is_refused_while_streaming(
    user: Client, services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"user_storage_bytes": 1024 * 1024})
    body, headers = form(file_part("big.bin", secrets.token_bytes(8 * 1024 * 1024)))
    response = await user.post("/api/uploads", content=body, headers=headers)
    assert response.status_code == 413
    assert "storage quota of 1 MiB" in response.json()["detail"]
    assert uploads_on_disk(services, user) == []
    assert await count_rows(services) == 0


async def test_a_large_body_over_the_limit_is_refused_while_streaming(
    user: Client, services: Services
) -> None:
    limit_to(services, 1024 * 1024)
    body, headers = form(file_part("big.bin", secrets.token_bytes(8 * 1024 * 1024)))
    response = await user.post("/api/uploads", content=body, headers=headers)
    assert response.status_code == 413
    assert uploads_on_disk(services, user) == []
    assert await count_rows(services) == 0


async def test_memory_stays_flat_while_a_large_file_streams_in(
    user: Client, services: Services
) -> None:
    """The server runs in this process: tracemalloc sees its allocations, not just ours."""
    size, chunk = 64 * 1024 * 1024, 64 * 1024
    boundary = "flat-memory-boundary"
    block = secrets.token_bytes(chunk)
    digest = hashlib.sha256()
    for _ in range(size // chunk):
        digest.update(block)

    async def body() -> AsyncIterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        for _ in range(size // chunk):
            yield block
        yield f"\r\n--{boundary}--\r\n".encode()

    tracemalloc.start()
    try:
        response = await user.post(
            "/api/uploads",
            content=body(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.text
    [item] = response.json()
    assert (item["size"], item["sha256"]) == (size, digest.hexdigest())
    assert peak < 8 * 1024 * 1024, f"peak traced memory {peak} bytes for a {size}-byte upload"
    root = user_root(services.settings.data_dir, user.user["id"])
    assert (root / item["path"]).stat().st_size == size


async def test_a_foreign_or_unknown_chat_is_404_and_nothing_is_kept(
    user: Client, new_user: NewUser, services: Services
) -> None:
    other = await new_user()
    foreign = (await other.post("/api/chats", json={})).json()["id"]
    for chat_id in (foreign, str(uuid.uuid4())):
        body, headers = form(file_part("a.txt", TEXT), ("chat_id", None, chat_id.encode(), ""))
        response = await user.post("/api/uploads", content=body, headers=headers)
        assert response.status_code == 404
        assert response.json() == {"detail": "chat not found"}
    assert uploads_on_disk(services, user) == []
    assert await count_rows(services) == 0


def _garbage_bodies() -> list[tuple[str, bytes, dict[str, str], list[str]]]:
    only_chat = form(("chat_id", None, str(uuid.uuid4()).encode(), ""))
    bad_chat = form(file_part("a.txt", TEXT), ("chat_id", None, b"not-a-uuid", ""))
    twice = form(
        file_part("a.txt", TEXT),
        ("chat_id", None, str(uuid.uuid4()).encode(), ""),
        ("chat_id", None, str(uuid.uuid4()).encode(), ""),
    )
    unknown = form(file_part("a.txt", TEXT), ("title", None, b"x", ""))
    not_a_file = form(("file", None, b"null", ""))
    complete, headers = form(file_part("a.txt", TEXT * 100))
    multipart = headers["Content-Type"]
    return [
        (
            "no parts",
            b"--b--\r\n",
            {"Content-Type": "multipart/form-data; boundary=b"},
            ["body", "file"],
        ),
        ("only chat_id", *only_chat, ["body", "file"]),
        ("chat_id not a UUID", *bad_chat, ["body", "chat_id"]),
        ("chat_id twice", *twice, ["body", "chat_id"]),
        ("unknown field", *unknown, ["body", "title"]),
        ("file without filename", *not_a_file, ["body", "file"]),
        ("json", b'{"file": "x"}', {"Content-Type": "application/json"}, ["body"]),
        ("no content type", b"hello", {}, ["body"]),
        ("no boundary", complete, {"Content-Type": "multipart/form-data"}, ["body"]),
        ("garbage", secrets.token_bytes(4096), {"Content-Type": multipart}, ["body"]),
        ("truncated", complete[: len(complete) // 2], {"Content-Type": multipart}, ["body"]),
        ("empty", b"", {"Content-Type": multipart}, ["body"]),
        (
            "part without disposition",
            b"--hearth-test-boundary\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
            b"--hearth-test-boundary--\r\n",
            {"Content-Type": multipart},
            ["body"],
        ),
    ]


@pytest.mark.parametrize(
    ("label", "body", "headers", "loc"),
    _garbage_bodies(),
    ids=[case[0] for case in _garbage_bodies()],
)
async def test_bodies_that_are_not_an_upload_form_are_422_and_leave_nothing(
    user: Client,
    services: Services,
    label: str,
    body: bytes,
    headers: dict[str, str],
    loc: list[str],
) -> None:
    response = await user.post("/api/uploads", content=body, headers=headers)
    assert response.status_code == 422, (label, response.text)
    [problem] = response.json()["detail"]
    assert problem["loc"] == loc
    assert uploads_on_disk(services, user) == []
    assert await count_rows(services) == 0


async def test_upload_needs_csrf_and_a_session(user: Client, anon: Client) -> None:
    body, headers = form(file_part("a.txt", TEXT))
    no_csrf = await user.http.post("/api/uploads", content=body, headers=headers)
    assert no_csrf.status_code == 403
    wrong = await user.http.post(
        "/api/uploads", content=body, headers={**headers, "X-CSRF-Token": "nope"}
    )
    assert wrong.status_code == 403
    assert (await anon.post("/api/uploads", content=body, headers=headers)).status_code == 401
    assert (await user.get("/api/uploads")).json()["items"] == []


async def test_other_routes_under_uploads_keep_the_body_limit(user: Client) -> None:
    response = await user.delete(f"/api/uploads/{uuid.uuid4()}", content=b"x" * (5 * 1024 * 1024))
    assert response.status_code == 413


# Listing, reading, deleting


async def test_list_is_newest_first_with_cursor_pages(user: Client, new_user: NewUser) -> None:
    other = await new_user()
    await upload_one(other, "theirs.txt", TEXT)
    first = await upload(user, file_part("1.txt", TEXT), file_part("2.txt", TEXT))
    later = [await upload_one(user, f"{n}.txt", TEXT) for n in (3, 4, 5)]
    expected = [i["id"] for i in reversed(first + later)]

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response = await user.get("/api/uploads", params=params)
        assert response.status_code == 200
        page = UploadPage.model_validate(response.json())
        seen += [str(item.id) for item in page.items]
        # Text is a searchable document: each carries its ingestion.
        assert all(item.ingestion is not None for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected
    whole = (await user.get("/api/uploads")).json()
    assert [i["id"] for i in whole["items"]] == expected and whole["next_cursor"] is None
    assert (await user.get("/api/uploads", params={"cursor": "garbage!"})).status_code == 422


async def test_get_answers_the_same_shape_as_the_upload(user: Client) -> None:
    item = await upload_one(user, "chart.png", PNG)
    response = await user.get(f"/api/uploads/{item['id']}")
    assert response.status_code == 200
    assert response.json() == item


async def test_another_users_upload_is_404_everywhere(
    user: Client, new_user: NewUser, services: Services
) -> None:
    item = await upload_one(user, "mine.txt", TEXT)
    other = await new_user()
    assert (await other.get(f"/api/uploads/{item['id']}")).status_code == 404
    assert (await other.delete(f"/api/uploads/{item['id']}")).status_code == 404
    assert (await other.get("/api/uploads")).json()["items"] == []
    assert (await user.get(f"/api/uploads/{item['id']}")).status_code == 200
    assert await count_rows(services) == 1


async def test_delete_removes_the_row_and_the_folder(user: Client, services: Services) -> None:
    keep = await upload_one(user, "keep.txt", TEXT)
    gone = await upload_one(user, "gone.txt", TEXT)
    root = user_root(services.settings.data_dir, user.user["id"])
    assert (await user.delete(f"/api/uploads/{gone['id']}")).status_code == 204
    assert not (root / "uploads" / gone["id"]).exists()
    assert (root / keep["path"]).exists()
    assert (await user.get(f"/api/uploads/{gone['id']}")).status_code == 404
    assert (await user.delete(f"/api/uploads/{gone['id']}")).status_code == 404
    assert await count_rows(services) == 1


async def test_unknown_or_malformed_ids_and_anonymous_reads(user: Client, anon: Client) -> None:
    assert (await user.get(f"/api/uploads/{uuid.uuid4()}")).status_code == 404
    assert (await user.get("/api/uploads/not-a-uuid")).status_code == 422
    assert (await anon.get("/api/uploads")).status_code == 401
    assert (await anon.get(f"/api/uploads/{uuid.uuid4()}")).status_code == 401
    assert (await user.http.delete(f"/api/uploads/{uuid.uuid4()}")).status_code == 403


async def test_concurrent_uploads_of_the_same_name_keep_every_file(
    user: Client, services: Services
) -> None:
    import asyncio

    contents = [f"version {n}\n".encode() * (n + 1) for n in range(8)]
    answers = await asyncio.gather(*(upload_one(user, "same.txt", c) for c in contents))
    assert len({a["id"] for a in answers}) == 8
    assert {a["filename"] for a in answers} == {"same.txt"}
    root = user_root(services.settings.data_dir, user.user["id"])
    for answer, content in zip(answers, contents, strict=True):
        assert (root / answer["path"]).read_bytes() == content
        assert answer["sha256"] == hashlib.sha256(content).hexdigest()
        served = await user.get(answer["url"])
        assert served.content == content
    assert await count_rows(services) == 8
