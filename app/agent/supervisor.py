"""The turns running in this process: starting them, stopping them, keeping their leases, and
settling the turns of processes that died.

One background loop per process serves every local turn with a few cheap statements, whatever
the number of turns: every half second it writes the new text of every streaming round (so a
killed process loses at most that half second) and asks which turns were asked to stop (a
`/stop` that reached another worker), both in one statement while every turn streams text
(`leases.save_partial` returns the stop flags of the rounds it wrote; a second statement asks
for the other turns only), and every third of the lease time it renews all their leases at
once. A turn whose lease could not be renewed in time (the database was away
longer than the lease) has lost its chat, which another worker may have settled or taken: it is
stopped.

A second loop, every `SWEEP_SECONDS`, settles the chats whose lease lapsed with their owner
gone (`leases.sweep`): a killed worker's rounds and calls are closed within the lease time and
one period, whoever writes in the chat next and whether or not anyone does.
A summary made on request holds the chat's lease the same way (`holding`): however long the
summary request takes, no turn starts beside it. The renewal interval follows the lease setting
as it is at each tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent import leases
from app.agent.live import LiveTurns
from app.agent.relay import PostgresRelay
from app.agent.runtime import TurnRuntime
from app.agent.turn import Turn, TurnPlan
from app.core.db.retry import transaction

log = logging.getLogger("hearth.turns")

POLL_SECONDS = 0.5
SWEEP_SECONDS = 3.0


class TurnSupervisor:
    def __init__(self, services: TurnRuntime) -> None:
        self.services = services
        self._turns: dict[str, Turn] = {}
        """owner -> running turn."""
        self._held: set[str] = set()
        """Owners of leases held by something other than a turn (a summary on request)."""
        self._loop_tasks: list[asyncio.Task[None]] = []
        self.live = LiveTurns()
        """The event logs of the turns running here, which readers follow."""
        self.relay: PostgresRelay | None = None
        """On PostgreSQL: the turns of other processes, followed through the database."""
        url = services.settings.database_url
        self._postgres = make_url(url).get_backend_name() == "postgresql"
        if self._postgres:
            self.relay = PostgresRelay(url, self.live, services.clock)

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.services.settings.turn_lease_seconds)

    @staticmethod
    def new_owner() -> str:
        return secrets.token_hex(16)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._loop_tasks = [
            asyncio.create_task(self._watch(), name="hearth-turn-supervisor"),
            asyncio.create_task(self._sweep(), name="hearth-lease-sweeper"),
        ]
        if self.relay is not None:
            self.relay.start()

    async def close(self) -> None:
        if self.relay is not None:
            await self.relay.close()
        for loop in self._loop_tasks:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        tasks = [turn.task for turn in self._turns.values() if turn.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- turns -------------------------------------------------------------------------------

    def launch(self, plan: TurnPlan) -> Turn:
        """Run a turn whose lease the caller acquired; it owns the lease from now on."""
        turn = Turn(self.services, plan, self.live.open(plan.chat_id, plan.owner))
        self._turns[plan.owner] = turn
        turn.task = asyncio.create_task(self._run(turn), name=f"hearth-turn-{plan.chat_id}")
        return turn

    async def _run(self, turn: Turn) -> None:
        self.services.metrics.turn_started()
        try:
            tracing = self.services.tracing
            if tracing is None:
                await turn.run()
            else:
                plan = turn.plan
                attributes = {"hearth.chat.id": str(plan.chat_id), "hearth.model": plan.model.id}
                with tracing.turn(attributes) as span:
                    try:
                        await turn.run()
                    finally:
                        span.set_attribute("hearth.turn.outcome", turn.outcome)
        finally:
            self.services.metrics.turn_finished(turn.outcome)
            self._turns.pop(turn.plan.owner, None)
            try:
                if turn.end_stored:  # else the lease lapses, and a sweep settles the chat
                    await asyncio.shield(self._release(turn))
            except Exception:
                log.exception("closing the turn in chat %s failed", turn.plan.chat_id)
            finally:
                turn.end_stream()
                self.live.close(turn.log)

    async def _release(self, turn: Turn) -> None:
        """Close what the turn left open and let go of its chat, all or nothing: if it fails,
        the lease lapses and a sweep settles the chat (`app.agent.leases.sweep`).

        On PostgreSQL that is one statement, run alone (`leases.release_after`); elsewhere one
        transaction."""
        plan = turn.plan
        closing, values = turn.leftovers()
        values = {**values, "of_chat": plan.chat_id, "owner": plan.owner}
        values["now"] = values.get("now") or self.services.clock.now()
        if self._postgres:
            statement = leases.release_after(closing)

            async def release(db: AsyncSession) -> None:
                await db.execute(statement, values)

            await transaction(self.services.alone, release, what="closing a turn")
            return

        async def release_in_steps(db: AsyncSession) -> None:
            for statement in closing:
                await db.execute(statement, values)
            await leases.release(db, plan.chat_id, plan.owner, values["now"])

        await transaction(self.services.sessions, release_in_steps, what="closing a turn")

    @contextlib.asynccontextmanager
    async def holding(self, owner: str) -> AsyncIterator[None]:
        """Keep renewing the lease `owner` acquired while the block runs (it releases it)."""
        self._held.add(owner)
        try:
            yield
        finally:
            self._held.discard(owner)

    def local_turn(self, chat_id: uuid.UUID) -> Turn | None:
        return next((t for t in self._turns.values() if t.plan.chat_id == chat_id), None)

    async def stop(self, chat_id: uuid.UUID, user_id: uuid.UUID) -> bool:
        """Stop the chat's running turn wherever it runs; False when none runs."""
        turn = self.local_turn(chat_id)
        if turn is not None and turn.plan.user_id == user_id:
            turn.stop()
            return True
        async with self.services.sessions() as db:
            flagged = await leases.request_stop(db, chat_id, user_id, self.services.clock.now())
            await db.commit()
        return flagged

    async def stop_and_wait(self, chat_id: uuid.UUID, user_id: uuid.UUID) -> None:
        """Stop a local turn and wait until it has stored its end (used before deleting a chat)."""
        turn = self.local_turn(chat_id)
        await self.stop(chat_id, user_id)
        if turn is not None and turn.task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(turn.task), timeout=10)

    async def stop_user(self, user_id: uuid.UUID) -> None:
        """Stop this process's turns of the user and wait until they have stored their end
        (other workers' turns are stopped through their chats' stop flags)."""
        turns = [t for t in self._turns.values() if t.plan.user_id == user_id]
        for turn in turns:
            turn.stop()
        tasks = [turn.task for turn in turns if turn.task is not None]
        if tasks:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks)), timeout=10)

    # -- the watch loop ----------------------------------------------------------------------

    async def _watch(self) -> None:
        clock = self.services.clock
        renewed_at = clock.monotonic()
        while True:
            await asyncio.sleep(POLL_SECONDS)
            renew_every = max(POLL_SECONDS, self.lease.total_seconds() / 3)
            turns = list(self._turns)
            owners = turns + list(self._held)
            if not owners:
                continue
            partial = [(turn, mark) for turn in self._turns.values() if (mark := turn.unsaved())]
            renewed: set[str] | None = None
            try:
                # Each statement alone: none needs another's transaction, and the tick runs
                # twice a second while any turn does.
                async with self.services.alone() as db:
                    written, stopping = await leases.save_partial(
                        db, [mark.row() for _, mark in partial]
                    )
                    asked = {t.plan.owner for t, m in partial if m.round.message_id in written}
                    unasked = [owner for owner in turns if owner not in asked]
                    stopping |= set(await leases.stop_requested(db, unasked))
                    for owner in stopping:
                        if (turn := self._turns.get(owner)) is not None:
                            turn.stop()
                    if clock.monotonic() - renewed_at >= renew_every:
                        renewed = await leases.renew(db, owners, clock.now(), self.lease)
                    await db.commit()
            except Exception:  # the database may be briefly away; the next tick tries again
                log.exception("turn supervisor tick failed")
                continue
            for turn, mark in partial:
                turn.saved(mark)
            if renewed is not None:
                renewed_at = clock.monotonic()
                for owner in set(turns) - renewed:
                    if (turn := self._turns.get(owner)) is not None:
                        log.warning("the turn in chat %s lost its lease", turn.plan.chat_id)
                        turn.lose_lease()

    async def _sweep(self) -> None:
        """Settle, at start and every `SWEEP_SECONDS`, the chats whose turn's process died: a
        process restarted after a crash settles its own dead turns as soon as it is up."""
        while True:
            await self._sweep_once()
            await asyncio.sleep(SWEEP_SECONDS)

    async def _sweep_once(self) -> None:
        live = set(self._turns) | self._held
        try:
            async with self.services.sessions() as db:
                settled = await leases.sweep(db, self.services.clock.now(), live)
                await db.commit()
        except Exception:  # the database may be briefly away; the next sweep tries again
            log.exception("settling lapsed turns failed")
            return
        for chat_id in settled:
            log.warning("settled chat %s, whose turn's process stopped", chat_id)
