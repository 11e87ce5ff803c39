"""Splitting a document into the passages that search finds and answers cite.

A chunk is what a citation points at, so it should be one coherent passage: chunks follow the
document's own structure (Markdown headings, then paragraphs), never span a heading or a PDF
page, and stay under `MAX_CHARS` so a search result is cheap to send to a model. A paragraph
longer than that is cut at sentence ends (or, failing those, at spaces). Each chunk after the
first of a section starts with the last sentence of the one before (at most `OVERLAP_CHARS`),
so a fact that straddles a cut is still found whole in one of them.

Chunking is a pure function of the text: the same document always gives the same chunks, which
is what makes chunk ids stable across re-ingestion.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_CHARS = 1200
OVERLAP_CHARS = 200

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    heading: str | None = None
    """The Markdown heading path (`Guide > Install`) the passage sits under, if any."""
    page: int | None = None
    """The PDF page (from 1) the passage is on; None outside PDFs."""


def looks_like_markdown(filename: str, text: str) -> bool:
    """Markdown by name (`.md`, `.markdown`) or by its `#` heading lines."""
    if filename.lower().endswith((".md", ".markdown")):
        return True
    return any(_HEADING.match(line) for line in text.splitlines()[:2000])


def chunk_text(text: str, *, markdown: bool) -> list[Chunk]:
    """The chunks of a text document (headings guide the cuts when `markdown`)."""
    chunks: list[Chunk] = []
    for heading, body in _sections(text, markdown):
        chunks.extend(Chunk(piece, heading) for piece in _pack(_paragraphs(body)))
    return chunks


def chunk_pages(pages: Iterable[str]) -> list[Chunk]:
    """The chunks of a PDF's pages (text per page): no chunk spans two pages."""
    chunks: list[Chunk] = []
    for number, page in enumerate(pages, start=1):
        chunks.extend(Chunk(piece, None, number) for piece in _pack(_paragraphs(page)))
    return chunks


def _sections(text: str, markdown: bool) -> Iterator[tuple[str | None, str]]:
    """(heading path, body) per section; a fenced code block never starts a section."""
    if not markdown:
        yield None, text
        return
    path: list[tuple[int, str]] = []
    body: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            body.append(line)
            continue
        yield _path(path), "\n".join(body)
        level = len(match.group(1))
        path = [(lvl, title) for lvl, title in path if lvl < level]
        path.append((level, match.group(2).strip()))
        body = []
    yield _path(path), "\n".join(body)


def _path(path: list[tuple[int, str]]) -> str | None:
    return " > ".join(title for _, title in path) or None


def _paragraphs(body: str) -> list[str]:
    """Blank-line separated paragraphs, whitespace inside each made single."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", body):
        lines = [line.strip() for line in block.splitlines()]
        paragraph = " ".join(line for line in lines if line)
        if paragraph:
            paragraphs.append(paragraph)
    return paragraphs


def _sentences(paragraph: str) -> list[str]:
    """A paragraph cut at sentence ends, each piece at most MAX_CHARS (cut at spaces if not)."""
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > MAX_CHARS:
            cut = sentence.rfind(" ", 0, MAX_CHARS)
            cut = cut if cut > MAX_CHARS // 2 else MAX_CHARS
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            pieces.append(sentence)
    return pieces


def _pack(paragraphs: list[str]) -> list[str]:
    """Paragraphs packed into chunks of at most MAX_CHARS, with a sentence of overlap."""
    chunks: list[str] = []
    current = ""
    for paragraph in paragraphs:
        units = [paragraph] if len(paragraph) <= MAX_CHARS else _sentences(paragraph)
        joiner = "\n\n"
        for unit in units:
            if not current:
                current = unit
            elif len(current) + len(joiner) + len(unit) <= MAX_CHARS:
                current = f"{current}{joiner}{unit}"
            else:
                chunks.append(current)
                overlap = _tail_sentence(current)
                fits = overlap and len(overlap) + 1 + len(unit) <= MAX_CHARS
                current = f"{overlap} {unit}" if fits else unit
            joiner = " "
        joiner = "\n\n"
    if current:
        chunks.append(current)
    return chunks


def _tail_sentence(chunk: str) -> str:
    """The chunk's last sentence, if it is short enough to repeat as overlap."""
    last = _SENTENCE_END.split(chunk.rsplit("\n\n", 1)[-1])[-1].strip()
    return last if 0 < len(last) <= OVERLAP_CHARS and last != chunk else ""
