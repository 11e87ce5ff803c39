"""/data over real HTTP: owner-only bytes, protective headers per type, containment, ETag, Range.

Traversal attempts are sent with a raw request target (httpx would otherwise normalise `..`
away before the server ever saw it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.files.roots import user_root
from app.services import Services
from tests.api.test_uploads import BINARY, PDF, PNG, SVG, TEXT, upload_one
from tests.conftest import NewUser
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

SANDBOX = "sandbox"
PDF_POLICY = "default-src 'none'; frame-ancestors 'self'"


async def raw_get(client: Client, target: str, **kwargs: Any) -> httpx.Response:
    """GET with exactly this request target, unnormalised."""
    return await client.get("/data/files/x", extensions={"target": target.encode()}, **kwargs)


def workspace(services: Services, client: Client) -> Path:
    root = user_root(services.settings.data_dir, client.user["id"])
    (root / "notes").mkdir(exist_ok=True)
    (root / "notes" / "a.txt").write_text("alpha beta gamma\n")
    (root / "chart.png").write_bytes(PNG)
    return root


# /data/<upload id>/<filename>


@pytest.mark.parametrize(
    ("name", "content", "mime", "disposition", "policy"),
    [
        ("chart.png", PNG, "image/png", "inline", SANDBOX),
        ("paper.pdf", PDF, "application/pdf", "inline", PDF_POLICY),
        ("notes.txt", TEXT, "text/plain; charset=utf-8", "inline", SANDBOX),
        ("logo.svg", SVG, "image/svg+xml", "attachment", SANDBOX),
        ("blob.bin", BINARY, "application/octet-stream", "attachment", SANDBOX),
        (
            "page.html",
            b"<!doctype html><script>alert(1)</script>",
            "text/plain; charset=utf-8",
            "inline",
            SANDBOX,
        ),
    ],
)
async def test_owner_gets_the_bytes_with_headers_for_their_type(
    user: Client, name: str, content: bytes, mime: str, disposition: str, policy: str
) -> None:
    item = await upload_one(user, name, content)
    response = await user.get(item["url"])
    assert response.status_code == 200
    assert response.content == content
    headers = response.headers
    assert headers["content-type"] == mime
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"] == f"{disposition}; filename*=UTF-8''{name}"
    assert headers["content-security-policy"] == policy
    assert headers["accept-ranges"] == "bytes"
    assert headers["etag"] == f'"{item["sha256"]}"'
    assert headers["content-length"] == str(len(content))
    assert headers["cache-control"] == "private, no-cache"


async def test_a_non_ascii_name_is_percent_encoded_in_url_and_disposition(user: Client) -> None:
    item = await upload_one(user, "résumé 1.pdf", PDF)
    assert item["url"].endswith("/r%C3%A9sum%C3%A9%201.pdf")
    response = await user.get(item["url"])
    assert response.status_code == 200
    assert response.headers["content-disposition"] == (
        "inline; filename*=UTF-8''r%C3%A9sum%C3%A9%201.pdf"
    )


async def test_uploads_are_404_to_anyone_but_their_owner(
    user: Client, new_user: NewUser, anon: Client
) -> None:
    item = await upload_one(user, "chart.png", PNG)
    other = await new_user()
    assert (await other.get(item["url"])).status_code == 404
    assert (await anon.get(item["url"])).status_code == 401
    upload_id = item["id"]
    for url in (
        f"/data/{upload_id}/other.png",
        f"/data/{upload_id}/CHART.PNG",
        f"/data/{upload_id}/chart.png.txt",
        "/data/00000000-0000-0000-0000-000000000000/chart.png",
        "/data/not-a-uuid/chart.png",
    ):
        response = await user.get(url)
        assert response.status_code == 404, url
        assert response.json() == {"detail": "file not found"}
    assert (await user.get(item["url"])).status_code == 200


async def test_a_deleted_upload_is_no_longer_served(user: Client) -> None:
    item = await upload_one(user, "chart.png", PNG)
    assert (await user.delete(f"/api/uploads/{item['id']}")).status_code == 204
    assert (await user.get(item["url"])).status_code == 404


# Conditional and range requests


async def test_etag_and_if_none_match_answer_304(user: Client) -> None:
    item = await upload_one(user, "notes.txt", TEXT)
    etag = (await user.get(item["url"])).headers["etag"]
    for value in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = await user.get(item["url"], headers={"If-None-Match": value})
        assert response.status_code == 304, value
        assert response.content == b""
        assert response.headers["etag"] == etag
        assert response.headers["x-content-type-options"] == "nosniff"
    changed = await user.get(item["url"], headers={"If-None-Match": '"something-else"'})
    assert changed.status_code == 200 and changed.content == TEXT


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [("bytes=0-3", 0, 3), ("bytes=5-", 5, None), ("bytes=-4", -4, None), ("bytes=2-2", 2, 2)],
)
async def test_range_answers_206_with_the_right_bytes(
    user: Client, header: str, start: int, end: int | None
) -> None:
    item = await upload_one(user, "blob.bin", BINARY)
    response = await user.get(item["url"], headers={"Range": header})
    assert response.status_code == 206
    first = start % len(BINARY)
    last = len(BINARY) - 1 if end is None else end
    assert response.content == BINARY[first : last + 1]
    assert response.headers["content-range"] == f"bytes {first}-{last}/{len(BINARY)}"
    assert response.headers["content-length"] == str(last - first + 1)
    assert response.headers["content-security-policy"] == SANDBOX


async def test_an_unsatisfiable_range_is_416(user: Client) -> None:
    item = await upload_one(user, "blob.bin", BINARY)
    for header in (f"bytes={len(BINARY)}-", f"bytes={len(BINARY) + 10}-{len(BINARY) + 20}"):
        response = await user.get(item["url"], headers={"Range": header})
        assert response.status_code == 416, header
        assert response.headers["content-range"] == f"bytes */{len(BINARY)}"
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_if_range_with_a_stale_etag_serves_the_whole_file(user: Client) -> None:
    item = await upload_one(user, "blob.bin", BINARY)
    stale = await user.get(item["url"], headers={"Range": "bytes=0-3", "If-Range": '"stale"'})
    assert stale.status_code == 200 and stale.content == BINARY
    etag = f'"{item["sha256"]}"'
    fresh = await user.get(item["url"], headers={"Range": "bytes=0-3", "If-Range": etag})
    assert fresh.status_code == 206 and fresh.content == BINARY[:4]


# /data/files/<path>


async def test_workspace_files_are_served_with_their_sniffed_type(
    user: Client, services: Services
) -> None:
    root = workspace(services, user)
    text = await user.get("/data/files/notes/a.txt")
    assert text.status_code == 200 and text.content == b"alpha beta gamma\n"
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert text.headers["content-disposition"] == "inline; filename*=UTF-8''a.txt"
    assert text.headers["content-security-policy"] == SANDBOX
    image = await user.get("/data/files/chart.png")
    assert image.headers["content-type"] == "image/png" and image.content == PNG
    (root / "disguised.png").write_bytes(SVG)
    svg = await user.get("/data/files/disguised.png")
    assert svg.headers["content-type"] == "image/svg+xml"
    assert svg.headers["content-disposition"] == "attachment; filename*=UTF-8''disguised.png"
    item = await upload_one(user, "paper.pdf", PDF)
    pdf = await user.get(f"/data/files/{item['path']}")
    assert pdf.status_code == 200 and pdf.content == PDF
    assert pdf.headers["content-security-policy"] == PDF_POLICY


async def test_workspace_etag_follows_the_file(user: Client, services: Services) -> None:
    root = workspace(services, user)
    first = await user.get("/data/files/notes/a.txt")
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith('W/"')
    cached = await user.get("/data/files/notes/a.txt", headers={"If-None-Match": etag})
    assert cached.status_code == 304
    (root / "notes" / "a.txt").write_text("changed\n")
    changed = await user.get("/data/files/notes/a.txt", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.content == b"changed\n"
    assert changed.headers["etag"] != etag
    ranged = await user.get("/data/files/notes/a.txt", headers={"Range": "bytes=-3"})
    assert ranged.status_code == 206 and ranged.content == b"ed\n"


@pytest.mark.parametrize(
    "target",
    [
        "/data/files/../secret.txt",
        "/data/files/notes/../../secret.txt",
        "/data/files/%2e%2e/secret.txt",
        "/data/files/%2E%2E/secret.txt",
        "/data/files/notes/%2e%2e/%2e%2e/secret.txt",
        "/data/files/..%2Fsecret.txt",
        "/data/files/notes%2F..%2F..%2Fsecret.txt",
        "/data/files/notes%2fa.txt",
        "/data/files/..%5Csecret.txt",
        "/data/files/notes%5Ca.txt",
        "/data/files//etc/passwd",
        "/data/files/%2Fetc%2Fpasswd",
        "/data/files/notes/a.txt%00",
        "/data/files/notes/./a.txt",
        "/data/files/escape/secret.txt",
        "/data/files/escape-file",
        "/data/files/notes",
        "/data/files/notes/",
        "/data/files/",
        "/data/files/missing.txt",
        "/data/files/pipe",
        "/data/files/%ff%fe",
    ],
)
async def test_anything_leading_outside_or_not_a_file_is_404(
    user: Client, services: Services, tmp_path: Path, target: str
) -> None:
    root = workspace(services, user)
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("not yours")
    (root.parent / "secret.txt").write_text("not yours either")
    os.symlink(secret, root / "escape")
    os.symlink(secret / "secret.txt", root / "escape-file")
    os.mkfifo(root / "pipe")
    response = await raw_get(user, target)
    assert response.status_code == 404, (target, response.text)
    assert response.json() == {"detail": "file not found"}  # refused by the route itself
    # The same file inside, reached the honest way, is served.
    assert (await raw_get(user, "/data/files/notes/a.txt")).status_code == 200


async def test_a_link_inside_the_root_is_followed(user: Client, services: Services) -> None:
    root = workspace(services, user)
    os.symlink(root / "notes" / "a.txt", root / "link.txt")
    response = await user.get("/data/files/link.txt")
    assert response.status_code == 200 and response.content == b"alpha beta gamma\n"


async def test_workspace_files_are_the_owners_only(
    user: Client, new_user: NewUser, anon: Client, services: Services
) -> None:
    workspace(services, user)
    other = await new_user()
    assert (await other.get("/data/files/notes/a.txt")).status_code == 404
    assert (await anon.get("/data/files/notes/a.txt")).status_code == 401


# HEAD: what GET would answer, headers only

# Drawn per response: the date, a multipart boundary, the request id.
VARYING = {"date", "content-type", "x-request-id"}


def same_headers(head: httpx.Response, get: httpx.Response) -> None:
    assert head.status_code == get.status_code
    assert head.content == b""
    assert {k: v for k, v in head.headers.items() if k not in VARYING} == {
        k: v for k, v in get.headers.items() if k not in VARYING
    }
    kinds = [r.headers.get("content-type", "").split(";")[0] for r in (head, get)]
    assert kinds[0] == kinds[1]


@pytest.mark.parametrize(
    ("conditions", "status"),
    [
        ({}, 200),
        ({"Range": "bytes=0-3"}, 206),
        ({"Range": "bytes=0-1,4-5"}, 206),
        ({"Range": "bytes=999999-"}, 416),
        ({"Range": "bytes=oops"}, 400),
        ({"If-None-Match": "current"}, 304),
        ({"If-None-Match": '"stale"'}, 200),
    ],
)
async def test_head_answers_as_get_would_without_the_body(
    user: Client, services: Services, conditions: dict[str, str], status: int
) -> None:
    item = await upload_one(user, "blob.bin", BINARY)
    workspace(services, user)
    for url in (item["url"], "/data/files/notes/a.txt"):
        etag = (await user.get(url)).headers["etag"]
        headers = {k: etag if v == "current" else v for k, v in conditions.items()}
        get = await user.get(url, headers=headers)
        head = await user.request("HEAD", url, headers=headers)
        same_headers(head, get)
        assert get.status_code == status, (url, conditions)


async def test_head_is_refused_as_get_is(
    user: Client, new_user: NewUser, anon: Client, services: Services
) -> None:
    item = await upload_one(user, "chart.png", PNG)
    workspace(services, user)
    other = await new_user()
    for client, url, status in (
        (other, item["url"], 404),
        (anon, item["url"], 401),
        (user, f"/data/{item['id']}/other.png", 404),
        (user, "/data/not-a-uuid/chart.png", 404),
        (other, "/data/files/notes/a.txt", 404),
        (anon, "/data/files/notes/a.txt", 401),
        (user, "/data/files/missing.txt", 404),
    ):
        response = await client.request("HEAD", url)
        assert (response.status_code, response.content) == (status, b""), (url, status)
    escape = await user.request(
        "HEAD", "/data/files/x", extensions={"target": b"/data/files/notes/../../secret.txt"}
    )
    assert escape.status_code == 404
