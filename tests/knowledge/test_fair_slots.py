"""The ingestion queue: at most `size` at once, waiters let in round-robin across owners, and a
waiter cancelled as it was let in passes its slot on."""

from __future__ import annotations

import asyncio

from app.knowledge.ingest import FairSlots


async def run_all(slots: FairSlots, jobs: list[tuple[str, str]]) -> list[str]:
    """Start every job (owner, name) at once; the names in the order they got a slot."""
    order: list[str] = []
    running = 0
    most = 0
    release = asyncio.Event()

    async def job(owner: str, name: str) -> None:
        nonlocal running, most
        async with slots.hold(owner):
            order.append(name)
            running += 1
            most = max(most, running)
            await release.wait()
            await asyncio.sleep(0)
            running -= 1

    tasks = [asyncio.create_task(job(owner, name)) for owner, name in jobs]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*tasks)
    assert most <= slots.size
    return order


async def test_waiters_take_turns_across_owners() -> None:
    jobs = [("alice", f"a{n}") for n in range(5)] + [("bob", "b0"), ("bob", "b1"), ("carol", "c0")]
    order = await run_all(FairSlots(1), jobs)
    assert order == ["a0", "a1", "b0", "c0", "a2", "b1", "a3", "a4"]


async def test_at_most_size_hold_a_slot() -> None:
    jobs = [("alice", f"a{n}") for n in range(6)] + [("bob", "b0")]
    order = await run_all(FairSlots(2), jobs)
    assert order[:2] == ["a0", "a1"] and order.index("b0") <= 3


async def test_a_cancelled_waiter_gives_up_its_place_or_its_slot() -> None:
    slots = FairSlots(1)
    first = asyncio.Event()
    got: list[str] = []

    async def holder() -> None:
        async with slots.hold("alice"):
            await first.wait()

    async def waiter(name: str) -> None:
        async with slots.hold(name):
            got.append(name)

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    gone = asyncio.create_task(waiter("bob"))
    later = asyncio.create_task(waiter("carol"))
    await asyncio.sleep(0)
    gone.cancel()  # cancelled while waiting: its place goes
    first.set()
    await asyncio.gather(held, later, gone, return_exceptions=True)
    assert got == ["carol"]

    # Let in and cancelled before it ran: the slot passes on instead of being lost.
    first.clear()
    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    unlucky = asyncio.create_task(waiter("bob"))
    after = asyncio.create_task(waiter("dave"))
    await asyncio.sleep(0)
    first.set()
    await held
    unlucky.cancel()
    await asyncio.gather(unlucky, after, return_exceptions=True)
    assert got[-1] == "dave"
    async with asyncio.timeout(5):
        async with slots.hold("erin"):  # nothing leaked: a slot is free
            pass
