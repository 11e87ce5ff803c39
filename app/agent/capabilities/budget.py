"""Budget notices: what a model is told, at the end of each request, about the limits it nears.

Two limits bound a turn: searches per question (`HEARTH_SEARCH_BUDGET`, counted by the
knowledge group) and model requests per turn (`HEARTH_MAX_ROUNDS`). A spent tool stays declared
and answers that its budget is spent; the notice says so before the model tries, names what
still has budget, and when nothing does, tells the model to cite what grounds its answer and
answer. Notices live in the request's dynamic tail (docs/wire.md §2c), so they never disturb the
cached prefix.
"""

from __future__ import annotations

from app.knowledge.evidence import KNOWLEDGE_CITE, KNOWLEDGE_SEARCH, QuestionEvidence


def budget_notice(
    evidence: QuestionEvidence | None, request_number: int, max_rounds: int
) -> str | None:
    """The notice for request `request_number` (from 1) of a turn, if any limit is reached."""
    after_this = max_rounds - request_number
    searched = evidence is not None and evidence.searches > 0
    cite = f" Cite the passages that ground your answer with {KNOWLEDGE_CITE}, then answer."
    if after_this <= 0:
        return (
            "[hearth/budget] This is the last model request of this turn: no tool call can be "
            "answered any more. Answer now with what you have."
        )
    if after_this == 1:
        spent = (
            f" {KNOWLEDGE_SEARCH} has spent its budget too."
            if evidence is not None and evidence.searches_spent
            else ""
        )
        return (
            "[hearth/budget] One more model request is left in this turn after this one."
            + spent
            + (cite if searched else " Answer in it at the latest.")
        )
    if evidence is not None and evidence.searches_spent:
        return (
            f"[hearth/budget] {KNOWLEDGE_SEARCH} has spent its budget for this question "
            f"({evidence.budget} searches) and will not search again. Still available: "
            f"{KNOWLEDGE_CITE} and your other tools, for {after_this} more model requests in "
            "this turn."
        )
    return None
