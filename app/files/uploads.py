"""Uploaded files on disk: safe names, one folder per upload, bytes written as they arrive.

An upload lives at `uploads/<id>/<filename>` under its owner's file root, so the id keeps
names from colliding and the name stays the user's own. Bytes go to a hidden temporary file in
that folder (a safe name never starts with a dot, so the two can't clash) and are renamed into
place only once complete: a crash or a refused upload never leaves a half file under a real
name, and removing the folder removes everything. Size, SHA-256 and the head that `sniff`
reads are taken in the same pass, so a file is read exactly once; for large chunks the hash
runs on another thread while the chunk is written, so the two use two cores.

Everything here is blocking file I/O; the API calls it from worker threads.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import unicodedata
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from app.core import errors
from app.files.sniff import SNIFF_BYTES, sniff

UPLOADS_DIR = "uploads"
PARTIAL_PREFIX = ".partial-"
"""The name of an upload's temporary file starts so (`app.files.sweep` removes stale ones)."""
MAX_NAME_BYTES = 255
MAX_EXTENSION_BYTES = 32
FALLBACK_NAME = "file"

# Direction marks and overrides would let a name display as something it is not.
_BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LEADING = re.compile(r"^[\s.]+")


PARALLEL_HASH_BYTES = 64 * 1024
_HASHERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hearth-upload-hash")


class TooLarge(errors.TooLarge):
    """A file went past the per-file size limit while it was being written."""

    def __init__(self, limit: int, message: str | None = None) -> None:
        # The rest of the body may be unread: the connection closes after the answer.
        super().__init__(
            message or f"a file is over the upload limit of {limit} bytes",
            headers={"connection": "close"},
        )
        self.limit = limit


def safe_filename(name: str) -> str:
    """`name` reduced to a basename that is safe on disk and in a URL path segment.

    Any directory part (after `/` or `\\`) goes, then control characters and direction marks,
    then leading dots and surrounding whitespace. What is left is cut to MAX_NAME_BYTES of
    UTF-8, keeping the extension; an empty result becomes `file`.
    """
    base = re.split(r"[/\\]", name)[-1]
    base = "".join(
        ch for ch in base if unicodedata.category(ch) != "Cc" and ch not in _BIDI_CONTROLS
    )
    base = _LEADING.sub("", base).rstrip()
    if not base:
        return FALLBACK_NAME
    if len(base.encode()) <= MAX_NAME_BYTES:
        return base
    stem, extension = os.path.splitext(base)
    if len(extension.encode()) > MAX_EXTENSION_BYTES:
        stem, extension = base, ""
    room = MAX_NAME_BYTES - len(extension.encode())
    stem = stem.encode()[:room].decode(errors="ignore").rstrip()
    return (stem + extension) if stem else FALLBACK_NAME


def upload_folder(root: Path, upload_id: uuid.UUID) -> Path:
    return root / UPLOADS_DIR / str(upload_id)


def stored_path(upload_id: uuid.UUID, filename: str) -> str:
    """Where an upload lives, relative to its owner's file root."""
    return f"{UPLOADS_DIR}/{upload_id}/{filename}"


def remove_upload(root: Path, upload_id: uuid.UUID) -> None:
    """Remove an upload's folder and all it holds; nothing happens if it is gone already."""
    shutil.rmtree(upload_folder(root, upload_id), ignore_errors=True)


class IncomingFile:
    """One file being received: written to a temporary name, hashed and measured on the way."""

    def __init__(self, root: Path, filename: str, limit: int) -> None:
        self.id = uuid.uuid4()
        self.filename = safe_filename(filename)
        self.limit = limit
        self.size = 0
        self.mime = ""
        self.folder = upload_folder(root, self.id)
        self.folder.mkdir(parents=True)
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=PARTIAL_PREFIX)
        self._temporary = Path(temporary)
        self._handle: BinaryIO | None = os.fdopen(fd, "wb")
        self._sha256 = hashlib.sha256()
        self._head = bytearray()

    @property
    def path(self) -> str:
        return stored_path(self.id, self.filename)

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def write(self, data: bytes) -> None:
        """Append `data`; TooLarge (and nothing written) once the file would pass the limit."""
        assert self._handle is not None, "write after finish"
        if self.size + len(data) > self.limit:
            raise TooLarge(self.limit)
        self.size += len(data)
        if len(self._head) < SNIFF_BYTES:
            self._head += data[: SNIFF_BYTES - len(self._head)]
        if len(data) < PARALLEL_HASH_BYTES:
            self._sha256.update(data)
            self._handle.write(data)
            return
        # Both release the GIL on large buffers: hash on a second core while this one writes.
        hashing = _HASHERS.submit(self._sha256.update, data)
        try:
            self._handle.write(data)
        finally:
            hashing.result()

    def finish(self) -> None:
        """Make the bytes durable and put them under their real name."""
        assert self._handle is not None, "finish twice"
        handle, self._handle = self._handle, None
        with handle:
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(self._temporary, self.folder / self.filename)
        self.mime = sniff(bytes(self._head))

    def discard(self) -> None:
        """Remove whatever was written, finished or not."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        shutil.rmtree(self.folder, ignore_errors=True)
