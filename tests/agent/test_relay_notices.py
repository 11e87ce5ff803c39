"""The notices that carry a published turn's events to the other workers: every event once, in
order, each notice within PostgreSQL's limit, an event too large left to the rows, and a
notice that is not hearth's sending the replicas to the rows."""

from __future__ import annotations

import uuid

import orjson

from app.agent.live import LiveTurns, TurnLog
from app.agent.relay import CHANNEL, NOTICE_BYTES, PostgresRelay, Replica, event_notices
from app.clock import Clock


def carried(notices: list[str]) -> dict[str, list[tuple[int, str]]]:
    got: dict[str, list[tuple[int, str]]] = {}
    for notice in notices:
        assert notice.startswith("d ")
        assert len(notice.encode()) <= NOTICE_BYTES
        for owner, first, events in orjson.loads(notice[2:]):
            got.setdefault(owner, []).extend(
                (first + offset, data) for offset, data in enumerate(events)
            )
    return got


def test_small_events_of_several_turns_share_one_notice_in_order() -> None:
    rows = [
        ("a", 1, 'data: {"type":"start"}\n\n'),
        ("b", 4, 'data: {"type":"text-delta","delta":"x"}\n\n'),
        ("a", 2, 'data: {"type":"text-delta","delta":"é \\" \\n"}\n\n'),
        ("b", 5, "data: [DONE]\n\n"),
    ]
    notices, left = event_notices(rows)
    assert len(notices) == 1 and left == []
    assert carried(notices) == {
        "a": [(1, rows[0][2]), (2, rows[2][2])],
        "b": [(4, rows[1][2]), (5, rows[3][2])],
    }


def test_many_events_spread_over_notices_each_within_the_limit() -> None:
    rows: list[tuple[str, int, str]] = []
    for seq in range(1, 401):
        for owner in ("one", "two", "three"):
            delta = "ü" * (seq % 97)  # two bytes a character: the limit counts bytes
            rows.append((owner, seq, f'data: {{"type":"text-delta","delta":"{delta}"}}\n\n'))
    notices, left = event_notices(rows)
    assert left == [] and len(notices) > 3
    expected: dict[str, list[tuple[int, str]]] = {}
    for owner, seq, data in rows:
        expected.setdefault(owner, []).append((seq, data))
    assert carried(notices) == expected
    assert min(len(n.encode()) for n in notices[:-1]) > NOTICE_BYTES // 2  # packed, not one each


def test_an_event_too_large_leaves_it_and_the_turns_later_events_to_the_rows() -> None:
    rows = [
        ("a", 1, "data: small\n\n"),
        ("a", 2, "data: " + "x" * NOTICE_BYTES + "\n\n"),
        ("b", 1, "data: other\n\n"),
        ("a", 3, "data: after it\n\n"),
    ]
    notices, left = event_notices(rows)
    assert left == ["a"]
    assert carried(notices) == {"a": [(1, "data: small\n\n")], "b": [(1, "data: other\n\n")]}


def test_nothing_to_carry_sends_no_notice() -> None:
    assert event_notices([]) == ([], [])


async def test_a_notice_that_is_not_hearths_sends_the_replicas_to_the_rows() -> None:
    """Anything else on the channel is not taken for events: the replicas read the rows."""
    relay = PostgresRelay("postgresql+asyncpg://u@127.0.0.1/db", LiveTurns(), Clock())
    replica = Replica(TurnLog(uuid.uuid4(), "elsewhere"))
    relay._replicas["elsewhere"] = replica
    for payload in ("d not json", 'd [["elsewhere", "x", 3]]', "d {}", 'd [["elsewhere"]]'):
        relay._dirty.clear()
        relay._notice(None, 1, CHANNEL, payload)
        assert relay._dirty == {"elsewhere"} and len(replica.log) == 0, payload
    relay._dirty.clear()
    relay._notice(None, 1, CHANNEL, 'd [["elsewhere", 1, ["data: a\\n\\n"]]]')
    assert replica.log.data == ["data: a\n\n"] and not relay._dirty
