"""A generated corpus with planted facts, for retrieval tests and bench/knowledge.py.

Documents are Markdown sections of filler prose drawn from a fixed vocabulary (so every word
is common and none gives a passage away), with one planted fact every few paragraphs: a
sentence about a made-up entity (`the Quorvane archive`) and an attribute, worded differently
from the question asked about it (other inflections, other word order), so a search has to
stem and rank, not match a string. Everything comes from one seeded `random.Random`: the same
seed gives the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FILLER = [
    "system",
    "report",
    "team",
    "project",
    "market",
    "value",
    "process",
    "result",
    "energy",
    "network",
    "account",
    "record",
    "service",
    "region",
    "period",
    "policy",
    "support",
    "member",
    "method",
    "figure",
    "measure",
    "source",
    "manner",
    "detail",
    "review",
    "design",
    "pattern",
    "budget",
    "office",
    "season",
    "station",
    "signal",
    "volume",
    "surface",
    "target",
    "version",
    "balance",
    "border",
    "camera",
    "channel",
    "circle",
    "climate",
    "colour",
    "course",
    "credit",
    "device",
    "driver",
    "engine",
    "estate",
    "factor",
    "family",
    "finger",
    "flight",
    "garden",
    "ground",
    "guitar",
    "handle",
    "height",
    "island",
    "kitchen",
    "ladder",
    "letter",
    "limit",
    "machine",
    "meeting",
    "memory",
    "metal",
    "minute",
    "mirror",
    "morning",
    "nation",
    "notice",
    "number",
    "option",
    "owner",
    "paper",
    "parent",
    "people",
    "piece",
    "planet",
    "plant",
    "player",
    "pocket",
    "poem",
    "position",
    "powder",
    "prison",
    "profit",
    "quarter",
    "question",
    "radio",
    "rain",
    "range",
    "reason",
    "river",
    "road",
    "rock",
    "room",
    "sample",
    "scale",
    "school",
    "screen",
    "secret",
    "sense",
    "shadow",
    "shape",
    "sheet",
    "shore",
    "silver",
    "skill",
    "society",
    "soil",
    "sound",
    "space",
    "speech",
    "spring",
    "square",
    "staff",
    "stage",
    "standard",
    "start",
    "steel",
    "stone",
    "storm",
    "story",
    "street",
    "strength",
    "structure",
    "student",
    "study",
    "style",
    "subject",
    "summer",
    "supply",
    "table",
    "task",
    "teacher",
    "term",
    "theory",
    "thought",
    "ticket",
    "title",
    "tongue",
    "topic",
    "tower",
    "track",
    "trade",
    "train",
    "travel",
    "treatment",
    "truth",
    "unit",
    "valley",
    "vessel",
    "victory",
    "village",
    "visit",
    "voice",
    "water",
    "wealth",
    "weather",
    "week",
    "weight",
    "wheel",
    "window",
    "winter",
    "wood",
    "worker",
    "world",
    "writer",
    "yard",
    "year",
    "youth",
]
VERBS = [
    "shows",
    "reviews",
    "covers",
    "changes",
    "follows",
    "reaches",
    "holds",
    "keeps",
    "moves",
    "opens",
    "builds",
    "carries",
    "checks",
    "draws",
    "earns",
    "finds",
    "gives",
    "leads",
    "makes",
    "meets",
    "offers",
    "plans",
    "raises",
    "sets",
    "turns",
    "wins",
]
ATTRIBUTES = (
    ("access code", "What is the access code of {e}?", "The access code for {e} is {v}."),
    ("founding year", "When was {e} founded?", "{e} was founded in the year {v}."),
    ("chief engineer", "Who is the chief engineer at {e}?", "{e} has {v} as its chief engineer."),
    ("storage capacity", "How much can {e} store?", "Storage at {e} reaches {v} terabytes."),
    ("opening hours", "At what time does {e} open?", "{e} opens its doors at {v} every day."),
    ("mascot", "What animal is the mascot of {e}?", "The mascot chosen by {e} is a {v}."),
)
SYLLABLES = [
    "qu",
    "or",
    "va",
    "ne",
    "zel",
    "tra",
    "mi",
    "ko",
    "ba",
    "ris",
    "fen",
    "dul",
    "wex",
    "ta",
    "lo",
    "sen",
    "gri",
    "pa",
    "hul",
    "nex",
]
NAMES = [
    "Adaeze",
    "Bertil",
    "Chiara",
    "Dmitri",
    "Esperanza",
    "Fumiko",
    "Gwendolyn",
    "Hamid",
    "Ingrid",
    "Jasper",
]
ANIMALS = ["heron", "badger", "otter", "lynx", "falcon", "marten", "ibex", "puffin"]


@dataclass(frozen=True)
class Fact:
    entity: str
    question: str
    sentence: str
    document: int
    """Index of the document it was planted in."""


@dataclass(frozen=True)
class Corpus:
    documents: list[tuple[str, str]]
    """(filename, Markdown text)."""
    facts: list[Fact]


def _entity(rng: random.Random, taken: set[str]) -> str:
    while True:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4))).capitalize()
        if word not in taken:
            taken.add(word)
            return f"the {word} {rng.choice(['archive', 'observatory', 'foundry', 'library'])}"


def _value(rng: random.Random, attribute: str) -> str:
    if attribute == "chief engineer":
        return rng.choice(NAMES)
    if attribute == "mascot":
        return rng.choice(ANIMALS)
    if attribute == "opening hours":
        return f"{rng.randint(5, 11)}:{rng.choice(['00', '15', '30', '45'])}"
    return str(rng.randint(100, 99999))


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(7, 14))]
    words.insert(rng.randint(1, len(words) - 1), rng.choice(VERBS))
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(3, 6)))


def generate(documents: int, paragraphs: int, facts_every: int = 4, seed: int = 7) -> Corpus:
    """`documents` Markdown documents of `paragraphs` paragraphs, a fact every `facts_every`."""
    rng = random.Random(seed)
    taken: set[str] = set()
    texts: list[tuple[str, str]] = []
    facts: list[Fact] = []
    for index in range(documents):
        blocks = [f"# Report {index + 1}"]
        for n in range(paragraphs):
            if n % 5 == 0:
                blocks.append(f"## {rng.choice(FILLER).capitalize()} {rng.choice(FILLER)}")
            paragraph = _paragraph(rng)
            if n % facts_every == facts_every - 1:
                entity = _entity(rng, taken)
                _, question, sentence = rng.choice(ATTRIBUTES)
                attribute = next(a for a, q, _ in ATTRIBUTES if q == question)
                planted = sentence.format(e=entity, v=_value(rng, attribute))
                planted = planted[0].upper() + planted[1:]
                paragraph = f"{paragraph} {planted} {_sentence(rng)}"
                facts.append(Fact(entity, question.format(e=entity), planted, index))
            blocks.append(paragraph)
        texts.append((f"report-{index + 1:05d}.md", "\n\n".join(blocks) + "\n"))
    return Corpus(texts, facts)


def recall_at(k: int, results: list[list[str]], facts: list[Fact]) -> float:
    """The share of facts whose sentence is in one of the first `k` passages found for it."""
    found = sum(
        any(fact.sentence in text for text in texts[:k])
        for fact, texts in zip(facts, results, strict=True)
    )
    return found / len(facts) if facts else 0.0
