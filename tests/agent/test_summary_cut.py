"""Where a summary cuts: the kept window starts at a user message, a round is never split."""

from __future__ import annotations

from datetime import UTC, datetime

from app.agent.rows import StoredMessage
from app.agent.summaries import plan_cut

AT = datetime(2026, 11, 30, tzinfo=UTC)


def rows(roles: str) -> list[StoredMessage]:
    return [
        StoredMessage(n, "user" if r == "u" else "assistant", "", None, "ok", None, None, {}, AT)
        for n, r in enumerate(roles, start=1)
    ]


def test_the_cut_moves_back_to_a_user_message() -> None:
    chat = rows("uaaauauaaa")  # a question answered in three rounds, then two more
    assert plan_cut(chat, keep=2, covered_up_to=0) == 6  # keeps u7 a8 a9 a10
    assert plan_cut(chat, keep=4, covered_up_to=0) == 6
    assert plan_cut(chat, keep=5, covered_up_to=0) == 4  # keeps u5 a6 u7 a8 a9 a10


def test_nothing_to_cover() -> None:
    assert plan_cut(rows("ua"), keep=10, covered_up_to=0) is None  # shorter than the window
    assert (
        plan_cut(rows("uaaa"), keep=2, covered_up_to=0) is None
    )  # one question: no user to cut at
    assert plan_cut(rows("uauaua"), keep=2, covered_up_to=4) is None  # covered already
    assert plan_cut(rows("uauaua"), keep=2, covered_up_to=2) == 4
