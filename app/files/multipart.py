"""multipart/form-data for `POST /api/uploads`, parsed while it streams in.

Starlette's form parser spools every file to a temporary file before the route sees it, and
checks no size on file parts, so a request could fill a disk before any limit applied and
every byte would be written twice. Here python-multipart's streaming parser feeds each file
part straight into its `IncomingFile` (the temporary name in the upload's own folder), batch
by batch, and the per-file limit stops a file as soon as it is passed. Parsing, hashing and
writing run in a worker thread, one 1 MiB batch at a time, while the event loop receives the
next batch: receiving and writing overlap, memory stays at two batches, and the loop never
waits on the disk.

The form has one or more `file` parts, each a file part as RFC 7578 has it (its
Content-Disposition names a `filename`, possibly empty, as every browser and HTTP library
sends it), and at most one `chat_id` part; anything else is a 422, like an unknown JSON field.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from app.core.errors import Invalid
from app.core.http.limits import DRAIN_LIMIT
from app.files.quota import Allowance
from app.files.uploads import IncomingFile, TooLarge

FILE_FIELD = "file"
CHAT_FIELD = "chat_id"
MAX_FILES = 100
MAX_FIELD_BYTES = 100
BATCH_BYTES = 1024 * 1024
"""Network chunks are gathered to this size before a worker thread parses and writes them."""


class FormError(Invalid):
    """The body is not an upload form hearth accepts; `location` names the culprit."""


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def boundary_of(content_type: str | None) -> bytes:
    """The multipart boundary of a `multipart/form-data` Content-Type, or FormError."""
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary", b"")
    if kind != b"multipart/form-data" or not boundary:
        raise FormError(("body",), "expected a multipart/form-data body with a boundary")
    return boundary


class UploadForm:
    """The parser's callbacks, and what they have received so far."""

    def __init__(
        self, boundary: bytes, root: Path, limit: int, allowance: Allowance | None = None
    ) -> None:
        self.root = root
        self.limit = limit
        self.allowance = allowance
        """The owner's storage quota: every file of the request together must fit in it."""
        self.received = 0
        self.files: list[IncomingFile] = []
        self.chat_id: str | None = None
        self.complete = False
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._disposition = b""
        self._file: IncomingFile | None = None
        self._field: bytearray | None = None
        self._field_name = ""
        try:
            self._parser = MultipartParser(
                boundary,
                {
                    "on_part_begin": self._part_begin,
                    "on_header_field": self._header_field,
                    "on_header_value": self._header_value_data,
                    "on_header_end": self._header_end,
                    "on_headers_finished": self._headers_finished,
                    "on_part_data": self._part_data,
                    "on_part_end": self._part_end,
                    "on_end": self._end,
                },
            )
        except FormParserError as exc:
            raise FormError(("body",), "the multipart boundary is not one hearth can read") from exc

    def feed(self, chunk: bytes) -> None:
        """Parse one chunk of the body (blocking: file parts are written as they come)."""
        if self.complete:
            return  # an epilogue after the closing boundary is ignored
        try:
            self._parser.write(chunk)
        except FormParserError as exc:
            raise FormError(("body",), "the multipart body is malformed") from exc

    def discard(self) -> None:
        """Remove every file of the request, finished or not."""
        for incoming in self.files:
            incoming.discard()

    # The parser's callbacks.

    def _part_begin(self) -> None:
        self._disposition = b""
        self._file = None
        self._field = None

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if bytes(self._header_name).strip().lower() == b"content-disposition":
            self._disposition = bytes(self._header_value)
        self._header_name.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        disposition, options = parse_options_header(self._disposition)
        if disposition != b"form-data" or b"name" not in options:
            raise FormError(("body",), "every part needs Content-Disposition: form-data; name=…")
        name = _decode(options[b"name"])
        if name == FILE_FIELD:
            if b"filename" not in options:
                raise FormError(("body", FILE_FIELD), "a file part needs a filename parameter")
            if len(self.files) >= MAX_FILES:
                raise FormError(("body", FILE_FIELD), f"at most {MAX_FILES} files per request")
            self._file = IncomingFile(self.root, _decode(options[b"filename"]), self.limit)
            self.files.append(self._file)
        elif name == CHAT_FIELD:
            if self.chat_id is not None or self._field is not None:
                raise FormError(("body", CHAT_FIELD), "chat_id may be given once")
            self._field, self._field_name = bytearray(), name
        else:
            raise FormError(("body", name), f"unknown field {name!r}; expected file or chat_id")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None:
            if self.allowance is not None:
                self.allowance.check(self.received + end - start)
            self.received += end - start
            self._file.write(data[start:end])
        elif self._field is not None:
            self._field += data[start:end]
            if len(self._field) > MAX_FIELD_BYTES:
                raise FormError(("body", self._field_name), "value too long")

    def _part_end(self) -> None:
        if self._file is not None:
            self._file.finish()
            self._file = None
        elif self._field is not None:
            self.chat_id = _decode(bytes(self._field)).strip()
            self._field = None

    def _end(self) -> None:
        self.complete = True


async def read_upload_form(
    content_type: str | None,
    stream: AsyncIterator[bytes],
    new_form: Callable[[bytes], UploadForm],
) -> UploadForm:
    """Parse the whole body into a form; on any failure its files are removed first.

    FormError for a body that is not an acceptable form; TooLarge once a file passes the
    limit, after the rest of the body (up to DRAIN_LIMIT) has been read and dropped, so a
    client that sends everything before it reads sees the 413 rather than a reset.
    """
    form = new_form(boundary_of(content_type))
    loop = asyncio.get_running_loop()
    in_flight: asyncio.Future[None] | None = None
    try:
        too_large: TooLarge | None = None
        drained = 0
        batch = bytearray()
        async for chunk in stream:
            if too_large is not None:
                drained += len(chunk)
                if drained > DRAIN_LIMIT:
                    break
                continue
            batch += chunk
            if len(batch) < BATCH_BYTES:
                continue
            # The previous batch is parsed and written while this one was received.
            too_large = await _settle(in_flight, form)
            in_flight = None
            if too_large is None:
                in_flight = loop.run_in_executor(None, form.feed, bytes(batch))
            batch.clear()
        if too_large is None:
            too_large = await _settle(in_flight, form)
            in_flight = None
            if too_large is None and batch:
                in_flight = loop.run_in_executor(None, form.feed, bytes(batch))
                too_large = await _settle(in_flight, form)
                in_flight = None
        if too_large is not None:
            raise too_large
        if not form.complete:
            raise FormError(("body",), "the multipart body ended before its closing boundary")
        if not form.files:
            raise FormError(("body", FILE_FIELD), "at least one file is required")
    except BaseException:
        with anyio.CancelScope(shield=True):
            if in_flight is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(in_flight)  # never remove files under a writer
            await anyio.to_thread.run_sync(form.discard)
        raise
    return form


async def _settle(in_flight: asyncio.Future[None] | None, form: UploadForm) -> TooLarge | None:
    """Wait for the batch being written; a file over the limit removes the request's files."""
    if in_flight is None:
        return None
    try:
        await in_flight
    except TooLarge as exc:
        await anyio.to_thread.run_sync(form.discard)
        return exc
    return None
