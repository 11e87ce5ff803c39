"""Chunking: headings and paragraphs guide the cuts, sizes stay bounded, overlap is small, and
no line, however hostile, takes more than linear time."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.knowledge.chunking import (
    MAX_CHARS,
    OVERLAP_CHARS,
    chunk_pages,
    chunk_text,
    heading,
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


MARKDOWN_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
"""The CommonMark-ish rule headings were once matched with (quadratic on a line of blanks)."""


def test_heading_reads_lines_as_the_markdown_rule_does() -> None:
    rng = random.Random(5)
    alphabet = "#  \t\u00a0ab\\\r\x0c"
    lines = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(50_000)
    ]
    lines += ["# Title #", "###### Six", "####### Seven", "#\tTab", "# ", "#  ", "##", "# a # b #"]
    for line in lines:
        match = MARKDOWN_HEADING.match(line)
        expected = None if match is None else (len(match.group(1)), match.group(2).strip())
        assert heading(line) == expected, line


HOSTILE = [
    # (document, markdown): lines a backtracking pattern takes time quadratic in.
    ("# a" + " " * 60_000 + "b", True),
    ("# a" + " " * 600_000 + "b", True),
    ("# a" + " \t#" * 200_000 + "b", True),
    ("#" * 6 + " " + "#" * 600_000 + " x", True),
    ("intro\n" + "# a" + " " * 600_000 + "b", False),
    ("\n" + " \t" * 300_000 + "x\n" * 3, False),
    ("." + "')\"]" * 150_000 + "x", False),
    ("Yes. " * 120_000, False),
]


def chunk_in_child(document: str, markdown: bool) -> list[list[object]]:
    """The chunks of `document`, computed in a fresh interpreter that is stopped if it hangs."""
    program = (
        "import json, sys\n"
        "from app.knowledge.chunking import chunk_text, looks_like_markdown\n"
        "text, markdown = json.load(sys.stdin)\n"
        "markdown = markdown or looks_like_markdown('notes.txt', text)\n"
        "chunks = chunk_text(text, markdown=markdown)\n"
        "json.dump([[c.heading, len(c.text), c.text[:20]] for c in chunks], sys.stdout)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", program],
        input=json.dumps([document, markdown]),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # a guard against a hang: linear chunking takes milliseconds here
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(("document", "markdown"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lines_are_chunked_in_linear_time(document: str, markdown: bool) -> None:
    chunks = chunk_in_child(document, markdown)
    assert chunks == [
        [c.heading, len(c.text), c.text[:20]]
        for c in chunk_text(document, markdown=markdown or looks_like_markdown("n.txt", document))
    ]
    if document.startswith("# a "):
        assert chunks == [] or chunks[0][0].startswith("a ")
