"""Chunking: headings and paragraphs guide the cuts, sizes stay bounded, overlap is small."""

from __future__ import annotations

import itertools

from app.knowledge.chunking import (
    MAX_CHARS,
    OVERLAP_CHARS,
    chunk_pages,
    chunk_text,
    looks_like_markdown,
)


def test_markdown_sections_carry_their_heading_path_and_never_mix() -> None:
    text = (
        "Intro line.\n\n# Guide\n\nWelcome.\n\n## Install\n\nRun the installer.\n\n"
        "```\n# not a heading inside a fence\n```\n\n## Use\n\nOpen it.\n\n# Other\n\nBye.\n"
    )
    chunks = chunk_text(text, markdown=True)
    assert [(c.heading, c.text) for c in chunks] == [
        (None, "Intro line."),
        ("Guide", "Welcome."),
        ("Guide > Install", "Run the installer.\n\n``` # not a heading inside a fence ```"),
        ("Guide > Use", "Open it."),
        ("Other", "Bye."),
    ]
    assert all(c.page is None for c in chunks)


def test_plain_text_ignores_hash_lines_and_packs_paragraphs() -> None:
    text = "#hashtag is not a heading\n\nSecond paragraph\nwrapped over lines.\n"
    chunks = chunk_text(text, markdown=False)
    assert [c.text for c in chunks] == [
        "#hashtag is not a heading\n\nSecond paragraph wrapped over lines."
    ]


def test_long_text_is_bounded_with_a_sentence_of_overlap() -> None:
    sentences = [f"Sentence number {n} says something about topic {n % 7}." for n in range(300)]
    paragraphs = [" ".join(sentences[i : i + 6]) for i in range(0, 300, 6)]
    chunks = chunk_text("\n\n".join(paragraphs), markdown=False)
    assert len(chunks) > 5
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    for before, after in itertools.pairwise(chunks):
        last = before.text.rsplit(". ", 1)[-1].split("\n\n")[-1]
        assert len(last) <= OVERLAP_CHARS and after.text.startswith(last)
    joined = " ".join(c.text for c in chunks)
    assert all(s in joined for s in sentences)  # nothing is lost


def test_a_paragraph_without_sentence_ends_is_cut_at_spaces() -> None:
    word_soup = " ".join(f"word{n}" for n in range(2000))
    chunks = chunk_text(word_soup, markdown=False)
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    assert all(not c.text.startswith(" ") and not c.text.endswith(" ") for c in chunks)
    assert {w for c in chunks for w in c.text.split()} == set(word_soup.split())


def test_pdf_pages_are_numbered_and_never_share_a_chunk() -> None:
    chunks = chunk_pages(["First page.", "", "Third page.\n\nMore on three."])
    assert [(c.page, c.text) for c in chunks] == [
        (1, "First page."),
        (3, "Third page.\n\nMore on three."),
    ]


def test_chunking_is_stable_and_markdown_is_recognised() -> None:
    text = "# A\n\n" + "Some words here. " * 200
    assert chunk_text(text, markdown=True) == chunk_text(text, markdown=True)
    assert looks_like_markdown("notes.MD", "plain")
    assert looks_like_markdown("notes.txt", "intro\n## Section\nbody")
    assert not looks_like_markdown("notes.txt", "#tag\nplain")
