"""Splitting a document into the passages that search finds and answers cite.

A chunk is what a citation points at, so it should be one coherent passage: chunks follow the
document's own structure (Markdown headings, then paragraphs), never span a heading or a PDF
page, and stay under `MAX_CHARS` so a search result is cheap to send to a model. A paragraph
longer than that is cut at sentence ends (or, failing those, at spaces). Each chunk after the
first of a section starts with the last sentence of the one before (at most `OVERLAP_CHARS`),
so a fact that straddles a cut is still found whole in one of them.

Chunking is a pure function of the text: the same document always gives the same chunks, which
is what makes chunk ids stable across re-ingestion.

The text is untrusted, so every step is linear in its length. Headings and fences are read with
string methods, not with a pattern that could backtrack (`^(#{1,6})[ \t]+(.+?)[ \t#]*$` took
seconds on one line of spaces). The two patterns left have no ambiguous quantifier: a paragraph
break is a newline, a run of spaces and tabs, a newline; a sentence end is a closing mark, a run
of quotes or brackets, a run of whitespace (disjoint classes, each scan starting only after a
sentence mark). Chunks come out one at a time (`iter_text_chunks`, `page_chunks`), so a caller
can stop at a limit without chunking the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_CHARS = 1200
OVERLAP_CHARS = 200

_FENCES = ("```", "~~~")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    heading: str | None = None
    """The Markdown heading path (`Guide > Install`) the passage sits under, if any."""
    page: int | None = None
    """The PDF page (from 1) the passage is on; None outside PDFs."""


def heading(line: str) -> tuple[int, str] | None:
    """A Markdown ATX heading's (level, title), or None: one to six `#`, a space or tab, the
    title; trailing spaces, tabs and `#` are not part of it."""
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or line[level : level + 1] not in (" ", "\t"):
        return None
    rest = line[level:]
    words = rest.lstrip(" \t")
    if not words:  # only blanks: a heading with no title, once there are two of them
        return (level, "") if len(rest) > 1 else None
    title = words.rstrip(" \t#") or words[0]
    return level, title.strip()


def looks_like_markdown(filename: str, text: str) -> bool:
    """Markdown by name (`.md`, `.markdown`) or by its `#` heading lines."""
    if filename.lower().endswith((".md", ".markdown")):
        return True
    return any(heading(line) for line in text.splitlines()[:2000])


def chunk_text(text: str, *, markdown: bool) -> list[Chunk]:
    """The chunks of a text document (headings guide the cuts when `markdown`)."""
    return list(iter_text_chunks(text, markdown=markdown))


def iter_text_chunks(text: str, *, markdown: bool) -> Iterator[Chunk]:
    """`chunk_text`, one chunk at a time."""
    for path, body in _sections(text, markdown):
        for piece in _pack(_paragraphs(body)):
            yield Chunk(piece, path)


def chunk_pages(pages: Iterable[str]) -> list[Chunk]:
    """The chunks of a PDF's pages (text per page): no chunk spans two pages."""
    return [chunk for n, page in enumerate(pages, start=1) for chunk in page_chunks(n, page)]


def page_chunks(number: int, page: str) -> list[Chunk]:
    """The chunks of one PDF page (`number` from 1)."""
    return [Chunk(piece, None, number) for piece in _pack(_paragraphs(page))]


def _sections(text: str, markdown: bool) -> Iterator[tuple[str | None, str]]:
    """(heading path, body) per section; a fenced code block never starts a section."""
    if not markdown:
        yield None, text
        return
    path: list[tuple[int, str]] = []
    body: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(_FENCES):
            fenced = not fenced
        found = None if fenced else heading(line)
        if found is None:
            body.append(line)
            continue
        yield _path(path), "\n".join(body)
        level, title = found
        path = [(lvl, name) for lvl, name in path if lvl < level]
        path.append((level, title))
        body = []
    yield _path(path), "\n".join(body)


def _path(path: list[tuple[int, str]]) -> str | None:
    return " > ".join(title for _, title in path) or None


def _paragraphs(body: str) -> list[str]:
    """Blank-line separated paragraphs, whitespace inside each made single."""
    paragraphs = []
    for block in _PARAGRAPH_BREAK.split(body):
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
