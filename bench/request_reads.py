"""What a request's transaction framing costs on PostgreSQL, with and without `statements_alone`.

Every request checks out one connection and authenticates with one read on it. Inside a
transaction that read is a `BEGIN`, the statement and a `ROLLBACK`; alone (autocommit, what
`app.core.db.engine.statements_alone` sets) it is the statement only. A request that writes then
hands the connection to a session (`in_transactions`), which opens its own transaction either way.
Four ways, each a checkout from the app's own engine, in rounds that rotate their order; this
process's CPU time and the wall time per request, median of the rounds:

- read, in a transaction: check out, read, roll back;
- read, alone: check out, `statements_alone`, read, roll back (nothing to roll back);
- read then write, in a transaction: read, roll back, write, commit;
- read then write, alone: `statements_alone`, read, `in_transactions`, write, commit.

Both statements are `SELECT 1`, the second committed: what differs between the ways is the
framing around them (`BEGIN`, `ROLLBACK`, `COMMIT`), not the statements.

    .venv/bin/python bench/request_reads.py [--pg-url URL] [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db.engine import create_engine, in_transactions, statements_alone

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
READ = text("SELECT 1")


def variants(engine: AsyncEngine) -> dict[str, Callable[[], Awaitable[None]]]:
    async def read_in_transaction() -> None:
        async with engine.connect() as connection:
            await connection.execute(READ)
            await connection.rollback()

    async def read_alone() -> None:
        async with engine.connect() as connection:
            await statements_alone(connection)
            await connection.execute(READ)
            await connection.rollback()

    async def write_in_transaction() -> None:
        async with engine.connect() as connection:
            await connection.execute(READ)
            await connection.rollback()
            await connection.execute(READ)
            await connection.commit()

    async def write_alone() -> None:
        async with engine.connect() as connection:
            await statements_alone(connection)
            await connection.execute(READ)
            await in_transactions(connection)
            await connection.execute(READ)
            await connection.commit()

    return {
        "read, in a transaction": read_in_transaction,
        "read, alone": read_alone,
        "read then write, in a transaction": write_in_transaction,
        "read then write, alone": write_alone,
    }


async def main_async(args: argparse.Namespace) -> None:
    engine = create_engine(args.pg_url)
    try:
        ways = variants(engine)
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        wall: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                way = ways[name]
                for _ in range(args.requests // 10):  # warm: connections made, statements known
                    await way()
                started_cpu, started = time.process_time(), time.perf_counter()
                for _ in range(args.requests):
                    await way()
                cpu[name].append((time.process_time() - started_cpu) / args.requests * 1e6)
                wall[name].append((time.perf_counter() - started) / args.requests * 1e6)
        print(f"{args.requests} requests a round, {args.rounds} rounds; medians per request:")
        print(f"  {'':36}{'CPU (us)':>10}{'wall (us)':>11}")
        for name in names:
            print(
                f"  {name:36}{statistics.median(cpu[name]):>10.0f}"
                f"{statistics.median(wall[name]):>11.0f}"
            )
        for kind in ("read", "read then write"):
            before, after = cpu[f"{kind}, in a transaction"], cpu[f"{kind}, alone"]
            saved = statistics.median(b - a for b, a in zip(before, after, strict=True))
            print(f"  {kind}: alone saves {saved:.0f} us of this process's CPU a request")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
