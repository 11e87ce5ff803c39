"""Serving users' files: `/data/<upload id>/<filename>` and `/data/files/<path>`.

A served file is never trusted as a page of this origin: every answer carries
`X-Content-Type-Options: nosniff` and a sandboxing Content-Security-Policy (PDF gets a policy
its viewer accepts instead), and only types a browser shows without running anything (images
other than SVG, PDF, plain text) are `inline`; the rest download.

Paths are contained twice. The request path is taken raw, before percent-decoding, so an
encoded separator or dot segment can't pass as one name; then `resolve_inside` checks the
resolved path, and the opened descriptor is checked again (`/proc/self/fd/<n>`), so a link
swapped in between the two is caught. The response then reads through that same descriptor's
`/proc` entry, never the path again. Starlette's FileResponse does Range (206, 416) and
If-Range; If-None-Match (304) and strong ETags are added here. HEAD answers as GET would,
headers only (FileResponse sends no body for it), so a client can size a file before fetching.
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, unquote_to_bytes

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse
from starlette.types import Message, Receive, Scope, Send

from app.api.deps import Auth, Connection, ServicesDep
from app.core.errors import NotFound
from app.core.http.schemas import error_responses
from app.files.roots import OutsideRoot, resolve_inside, user_root
from app.files.sniff import sniff_fd
from app.uploads import service as uploads

router = APIRouter(tags=["data"])

PDF = "application/pdf"
PDF_POLICY = "default-src 'none'; frame-ancestors 'self'"
FILES_PREFIX = b"/data/files/"

FILE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The file's bytes, typed by what they are (see Content-Type)",
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    },
    206: {
        "description": "The byte range(s) asked for with Range",
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    },
    304: {"description": "Not modified: If-None-Match names the current ETag"},
    400: {"description": "A malformed Range header"},
    416: {"description": "The Range asked for lies outside the file"},
    **error_responses(401, 404),
}


class NotServable(Exception):
    """Nothing that may be served is at that path (outside the root, missing, not a file)."""


def _not_found() -> NotFound:
    return NotFound("file not found")


def open_inside(root: Path, relative: str) -> tuple[BinaryIO, os.stat_result]:
    """The regular file at `relative` under `root`, opened and contained, with its stat."""
    try:
        target = resolve_inside(root, relative)
        # O_NONBLOCK: a FIFO planted in the files must not hang the worker thread on open.
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OutsideRoot, OSError) as exc:
        raise NotServable(relative) from exc
    try:
        real = Path(os.path.realpath(f"/proc/self/fd/{fd}"))
        info = os.fstat(fd)
        if real == root or root not in real.parents or not stat.S_ISREG(info.st_mode):
            raise NotServable(relative)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return handle, info


def relative_path(request: Request, decoded: str) -> str:
    """The path after `/data/files/`, read from the raw request target; NotServable if unsafe.

    Each raw segment is decoded on its own, so `%2F`, `%5C` and `%2e%2e` stay inside one name,
    where they are refused like `..`, `.`, empty segments, backslashes and NUL.
    """
    raw: bytes | None = request.scope.get("raw_path")
    if raw and FILES_PREFIX in raw:
        try:
            segments = [
                unquote_to_bytes(part).decode("utf-8")
                for part in raw.split(FILES_PREFIX, 1)[1].split(b"/")
            ]
        except UnicodeDecodeError as exc:
            raise NotServable(decoded) from exc
    else:
        segments = decoded.split("/")
    for segment in segments:
        if segment in ("", ".", "..") or any(ch in segment for ch in "/\\\x00"):
            raise NotServable(decoded)
    return "/".join(segments)


def _none_match(header: str | None, etag: str) -> bool:
    """If-None-Match, compared weakly as RFC 9110 wants for it."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))


def _inline(mime: str) -> bool:
    image = mime.startswith("image/") and mime != "image/svg+xml"
    return image or mime in (PDF, "text/plain")


def _guard_headers(mime: str) -> dict[str, str]:
    return {
        "x-content-type-options": "nosniff",
        "content-security-policy": PDF_POLICY if mime == PDF else "sandbox",
    }


class _OpenFileResponse(FileResponse):
    """FileResponse over a file already opened and checked, read through its `/proc` entry.

    Opening `/proc/self/fd/<n>` opens that very file again, whatever happened to its path
    meanwhile. Every message sent, Starlette's own 416 and 400 included, carries the guards.
    """

    def __init__(
        self, handle: BinaryIO, info: os.stat_result, mime: str, headers: dict[str, str]
    ) -> None:
        super().__init__(
            f"/proc/self/fd/{handle.fileno()}", headers=headers, media_type=mime, stat_result=info
        )
        self._handle = handle
        self._guards = [(k.encode(), v.encode()) for k, v in _guard_headers(mime).items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message["headers"]}
                extra = [(k, v) for k, v in self._guards if k not in present]
                message = {**message, "headers": [*message["headers"], *extra]}
            await send(message)

        try:
            await super().__call__(scope, receive, guarded)
        finally:
            self._handle.close()


def _serve(
    request: Request,
    handle: BinaryIO,
    info: os.stat_result,
    *,
    mime: str,
    filename: str,
    etag: str,
) -> Response:
    kind = "inline" if _inline(mime) else "attachment"
    headers = {
        **_guard_headers(mime),
        "etag": etag,
        "cache-control": "private, no-cache",
        "content-disposition": f"{kind}; filename*=UTF-8''{quote(filename, safe='')}",
    }
    if _none_match(request.headers.get("if-none-match"), etag):
        handle.close()
        return Response(status_code=304, headers={**_guard_headers(mime), "etag": etag})
    return _OpenFileResponse(handle, info, mime, headers)


async def _open(root: Path, relative: str) -> tuple[BinaryIO, os.stat_result]:
    try:
        return await anyio.to_thread.run_sync(open_inside, root, relative)
    except NotServable:
        raise _not_found() from None


@router.get("/data/files/{path:path}", response_class=Response, responses=FILE_RESPONSES)
@router.head("/data/files/{path:path}", response_class=Response, responses=FILE_RESPONSES)
async def workspace_file(
    path: str, request: Request, auth: Auth, services: ServicesDep
) -> Response:
    """A file under your file root (the workspace that tools read and write)."""
    try:
        relative = relative_path(request, path)
    except NotServable:
        raise _not_found() from None
    root = await anyio.to_thread.run_sync(user_root, services.settings.data_dir, auth.user.id)
    handle, info = await _open(root, relative)
    try:
        mime = await anyio.to_thread.run_sync(sniff_fd, handle.fileno())
    except BaseException:
        handle.close()
        raise
    etag = f'"{info.st_size:x}-{info.st_mtime_ns:x}-{info.st_ino:x}"'
    return _serve(request, handle, info, mime=mime, filename=Path(relative).name, etag=etag)


@router.get("/data/{upload_id}/{filename}", response_class=Response, responses=FILE_RESPONSES)
@router.head("/data/{upload_id}/{filename}", response_class=Response, responses=FILE_RESPONSES)
async def upload_file(
    upload_id: str,
    filename: str,
    request: Request,
    auth: Auth,
    services: ServicesDep,
    connection: Connection,
) -> Response:
    """An upload's bytes, for its owner; the filename must be the upload's own."""
    try:
        ident = uuid.UUID(upload_id)
        row = await uploads.stored_file(connection, auth.user.id, ident, filename)
    except (ValueError, NotFound):
        raise _not_found() from None
    root = await anyio.to_thread.run_sync(user_root, services.settings.data_dir, auth.user.id)
    handle, info = await _open(root, row.stored_path)
    return _serve(
        request, handle, info, mime=row.mime, filename=row.filename, etag=f'"{row.sha256}"'
    )
