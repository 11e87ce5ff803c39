"""Citation status, citations and the capsule, derived from evidence rows alone."""

from __future__ import annotations

import uuid

from app.agent.capabilities.budget import budget_notice
from app.knowledge.evidence import (
    EvidenceRow,
    QuestionEvidence,
    capsule,
    citation_status,
    citations,
)

UPLOAD = uuid.UUID(int=7)


def row(kind: str, epoch: int, chunk: str | None = None, question: int = 1) -> EvidenceRow:
    return EvidenceRow(
        question_id=question,
        epoch=epoch,
        kind=kind,
        chunk_id=chunk,
        upload_id=UPLOAD if chunk else None,
        filename="notes.md" if chunk else None,
        mime="text/plain" if chunk else None,
        page=None,
        heading=None,
        text=f"text of {chunk}" if chunk else None,
    )


def test_no_retrieval_no_status() -> None:
    assert citation_status([]) is None
    assert citation_status([row("declared_none", 3)]) is None


def test_retrieved_without_declaration_is_missing() -> None:
    assert citation_status([row("retrieved", 3, "a-1")]) == "missing"


def test_a_declaration_grounds_and_evidence_after_it_makes_it_missing_again() -> None:
    grounded = [row("retrieved", 3, "a-1"), row("cited", 5, "a-1")]
    assert citation_status(grounded) == "grounded"
    assert citation_status([*grounded, row("retrieved", 7, "a-2")]) == "missing"
    assert citation_status([*grounded, row("retrieved", 7, "a-2"), row("cited", 9, "a-2")]) == (
        "grounded"
    )
    # Retrieved in the same request as the declaration: not after it.
    assert citation_status([*grounded, row("retrieved", 5, "a-3")]) == "grounded"


def test_an_empty_cite_is_ungrounded_alone_and_never_weakens_a_grounded_one() -> None:
    assert citation_status([row("retrieved", 3, "a-1"), row("declared_none", 5)]) == "ungrounded"
    assert (
        citation_status(
            [row("retrieved", 3, "a-1"), row("cited", 5, "a-1"), row("declared_none", 7)]
        )
        == "grounded"
    )


def test_citations_are_each_passage_once_in_the_order_first_cited() -> None:
    rows = [row("cited", 5, "a-2"), row("retrieved", 5, "a-1"), row("cited", 7, "a-1")]
    rows.append(row("cited", 9, "a-2"))
    assert [c["chunk_id"] for c in citations(rows)] == ["a-2", "a-1"]
    assert citations(rows)[0] == {
        "chunk_id": "a-2",
        "upload_id": UPLOAD,
        "filename": "notes.md",
        "page": None,
        "quote": "text of a-2",
    }


def test_the_capsule_groups_each_passage_under_the_latest_question_that_cited_it() -> None:
    rows = [
        row("retrieved", 2, "a-1", question=1),
        row("cited", 3, "a-1", question=1),
        row("cited", 3, "a-2", question=1),
        row("cited", 6, "a-2", question=4),
        row("cited", 6, "a-3", question=4),
    ]
    text = capsule(rows, {1: "First question?", 4: "Second\nquestion?"})
    assert text == (
        "[hearth/evidence] Passages cited in earlier questions, in full (their other search "
        "results are not shown):\n\n"
        'Cited for the question "First question?":\n\n'
        "[a-1] notes.md\ntext of a-1\n\n"
        'Cited for the question "Second question?":\n\n'
        "[a-2] notes.md\ntext of a-2\n\n"
        "[a-3] notes.md\ntext of a-3"
    )
    assert capsule([row("retrieved", 2, "a-1")], {}) == (
        "[hearth/evidence] Passages cited in earlier questions: none. "
        "Their other search results are not shown."
    )


def test_budget_notices() -> None:
    fresh = QuestionEvidence(question_id=1, budget=5)
    spent = QuestionEvidence(question_id=1, budget=5, searches=5)
    assert budget_notice(None, 1, 25) is None
    assert budget_notice(fresh, 3, 25) is None
    assert budget_notice(spent, 7, 25) == (
        "[hearth/budget] knowledge_search has spent its budget for this question (5 searches) "
        "and will not search again. Still available: knowledge_cite and your other tools, for "
        "18 more model requests in this turn."
    )
    assert budget_notice(spent, 24, 25) == (
        "[hearth/budget] One more model request is left in this turn after this one. "
        "knowledge_search has spent its budget too. Cite the passages that ground your answer "
        "with knowledge_cite, then answer."
    )
    assert budget_notice(None, 24, 25) == (
        "[hearth/budget] One more model request is left in this turn after this one. "
        "Answer in it at the latest."
    )
    assert budget_notice(fresh, 25, 25) == (
        "[hearth/budget] This is the last model request of this turn: no tool call can be "
        "answered any more. Answer now with what you have."
    )
