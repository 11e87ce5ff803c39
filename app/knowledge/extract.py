"""Reading an untrusted document into passages, within limits (the worker process's side).

An upload is whatever a user sent: a PDF can be a few kilobytes that name one content stream on
every page, a page tree whose nodes share their children, or a stream that inflates to
gigabytes; a text can be sixteen megabytes of one line. So reading one is bounded on every axis
that grows with the work, and anything past a bound fails the whole document with a reason a
person can act on. Nothing is indexed in part: a search that silently misses page 2,500 would
be worse than a document that says it was not indexed.

- `MAX_PAGES` (2,000): a PDF's page count, checked before any page is read (the page tree's
  declared count first, then the pages found).
- `CHARS_PER_BYTE` (20): the characters extracted from a PDF, at most 20 times its size in
  bytes. Deflate seldom packs prose tighter than 4:1 and a page's content stream carries more
  than its text (fonts, positions, operators), so real PDFs give a few characters per byte at
  most (the bench's text-only fpdf2 PDFs: 1.5; scanned or font-heavy ones: well under 1).
  Twenty leaves room for very repetitive text (tables, logs) and stops a file that reuses one
  stream on every page at 20 times its size instead of 100 or more. UTF-8 text never gives more
  characters than bytes, so for text the bound that counts is the next one.
- `MAX_CHUNKS` (10,000) passages per document, about 8 MiB of prose or 2,000 dense pages: more
  would swamp any search and hold the transaction that stores them open for seconds.
- `MAX_TEXT_BYTES` (16 MiB): a text file larger than this is refused before it is read (it would
  give too many passages anyway).

Pages are read and chunked one at a time, so what is held is the chunks so far (bounded by
`MAX_CHUNKS`), never every page's text. The time and memory a document may take
(`SECONDS`, `MEMORY_BYTES`) are enforced around this code, by the process that runs it
(`app.knowledge.worker`): a loop inside a parser cannot be stopped from within.

Text bound for the database is made safe here too: PostgreSQL text cannot hold NUL, so a text
file with a NUL byte anywhere is not a text document (sniffing only looked at its first 8 KiB),
and NULs and unpaired surrogates that a PDF's font maps produce are dropped from its text.
Failure reasons never carry a library's message; that goes in `IngestFailed.detail`, for logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.knowledge.chunking import Chunk, iter_text_chunks, looks_like_markdown, page_chunks

if TYPE_CHECKING:
    from pypdf import PdfReader

PDF = "application/pdf"
MiB = 1024 * 1024

MAX_PAGES = 2000
CHARS_PER_BYTE = 20
MAX_CHUNKS = 10_000
MAX_TEXT_BYTES = 16 * MiB
SECONDS = 120.0
"""Wall-clock time one document may take in its worker. pypdf reads about 100 dense pages a
second here, so a 2,000-page PDF takes 20 s; the rest is room for a busy machine."""
MEMORY_BYTES = 512 * MiB
"""Address space of a worker while it reads a document. The interpreter with pypdf takes about
60 MiB; the largest text allowed peaks near 100 MiB and a 500-page PDF near 70 MiB."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What reading one document may take; the module's constants unless told otherwise."""

    pages: int = MAX_PAGES
    chars_per_byte: int = CHARS_PER_BYTE
    chunks: int = MAX_CHUNKS
    text_bytes: int = MAX_TEXT_BYTES
    seconds: float = SECONDS
    memory_bytes: int = MEMORY_BYTES


class IngestFailed(Exception):
    """The document cannot be made searchable; the message says why, for the user."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.detail = detail
        """What a library said, for the log only."""


def extract(path: Path, filename: str, mime: str, limits: Limits | None = None) -> list[Chunk]:
    """The passages of a document (blocking; the ingestion runs it in a worker process)."""
    limits = limits or Limits()
    budget = _Budget(limits, path.stat().st_size)
    if mime == PDF:
        _pdf_chunks(path, budget)
        if not budget.chunks:
            raise IngestFailed("the PDF has no text layer (a scan?)")
    else:
        _text_chunks(path, filename, budget)
        if not budget.chunks:
            raise IngestFailed("the document has no text")
    return budget.chunks


class _Budget:
    """The chunks so far, and the characters still allowed."""

    def __init__(self, limits: Limits, size: int) -> None:
        self.limits = limits
        self.size = size
        self.chars = 0
        self.chunks: list[Chunk] = []

    def take_text(self, count: int) -> None:
        self.chars += count
        if self.chars > self.limits.chars_per_byte * self.size:
            raise IngestFailed(
                f"the file gives over {self.limits.chars_per_byte} times its size in text "
                f"(more than {self.limits.chars_per_byte * self.size:,} characters from "
                f"{self.size:,} bytes); such a file is not indexed"
            )

    def add(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            if len(self.chunks) >= self.limits.chunks:
                raise IngestFailed(
                    f"the document is too long: it gives over {self.limits.chunks:,} "
                    "passages, the most one document may have; split it into smaller files"
                )
            self.chunks.append(chunk)


def _text_chunks(path: Path, filename: str, budget: _Budget) -> None:
    limit = budget.limits.text_bytes
    if budget.size > limit:
        size = f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit:,} bytes"
        raise IngestFailed(f"the text is over {size}; split it into smaller files")
    data = path.read_bytes()
    if b"\x00" in data:
        raise IngestFailed("the file holds NUL bytes; it is not a text document")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestFailed(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    del data
    budget.take_text(len(text))
    budget.add(iter_text_chunks(text, markdown=looks_like_markdown(filename, text)))


def _pdf_chunks(path: Path, budget: _Budget) -> None:
    from pypdf import PdfReader  # the worker imports it once; the server never needs to

    limit = budget.limits.pages
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise IngestFailed("the PDF is encrypted")
        declared = _declared_pages(reader)
        count = declared if declared > limit else len(reader.pages)
        if count > limit:
            raise IngestFailed(
                f"the PDF has {count:,} pages; a PDF of over {limit:,} pages is not indexed"
            )
        for number in range(count):
            text = _clean(reader.pages[number].extract_text() or "")
            budget.take_text(len(text))
            budget.add(page_chunks(number + 1, text))
    except (IngestFailed, MemoryError):
        raise
    except Exception as exc:  # any way a parser can fail on a hostile file
        raise IngestFailed("the PDF cannot be read", f"{type(exc).__name__}: {exc}") from None


def _declared_pages(reader: PdfReader) -> int:
    """The page count the page tree declares (it may lie; the pages found are counted too)."""
    from pypdf.generic import DictionaryObject

    try:
        root = reader.trailer["/Root"]
        pages = root["/Pages"] if isinstance(root, DictionaryObject) else None
        count = pages["/Count"] if isinstance(pages, DictionaryObject) else None
        return int(count) if isinstance(count, int | float) else 0
    except Exception:
        return 0


def _clean(text: str) -> str:
    """Page text a database can hold: no NUL, no unpaired surrogate."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
