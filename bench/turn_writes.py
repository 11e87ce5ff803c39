"""The SQL statements one turn costs, for a round that ends at once and for a 5 s round.

A streaming round's text reaches its row while it streams (twice a second, every local turn in
one statement), and the lease, the stop flag and the sweep of dead turns are statements too. This
counts everything hearth's engine sends from a turn's request until its task has ended, by kind
(`UPDATE messages`, `SELECT chats`, ...), for `--turns` turns of each length (the median and
the spread are printed), in this process: hearth's app over `httpx.ASGITransport`, the fake
provider (`tests/fakes`) in a process of its own, a fresh database (`--db sqlite` or
`postgresql`). The 5 s round is the fake's first token after 200 ms, then 240 tokens 20 ms apart.

The figure that matters is the difference against an earlier revision, taken in the same run:

    .venv/bin/python bench/against.py --here REV turn_writes.py -- --db postgresql

Target (crash safety): a 5 s round costs at most 10 statements more than before partial rounds
were written. No exit status of its own beyond a failed turn (1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
from _loadgen import LOOPBACK
from _turns import DEFAULT_PG_URL, fresh_database, revision, stop_process
from turn_overhead import (
    INSTANT_SCHEDULE,
    PROVIDER_KEY,
    PROVIDER_KEY_ENV,
    PROVIDER_MODEL,
    start_fake,
    statement_kind,
    statements,
)

import app
from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.main import create_app
from app.settings import Settings

FIVE_SECONDS = "first_ms=200,tokens=240,interval_ms=20"
ROUNDS = {"instant": INSTANT_SCHEDULE, "5 s": FIVE_SECONDS}


def providers_yaml(ports: dict[str, int]) -> str:
    entries = "".join(
        f"""\
  - id: {name.replace(" ", "")}
    kind: openai
    base_url: http://{LOOPBACK}:{port}/v1
    api_key_env: {PROVIDER_KEY_ENV}
    models: [{{id: {PROVIDER_MODEL}, context_window: 1000000, max_output_tokens: 1024}}]
"""
        for name, port in ports.items()
    )
    return f"providers:\n{entries}"


async def one_turn(
    client: httpx.AsyncClient, engine: object, model: str, csrf: str
) -> tuple[Counter[str], float]:
    chat = await client.post("/api/chats", json={"model": model}, headers={"X-CSRF-Token": csrf})
    chat_id = chat.json()["id"]
    with statements(engine) as seen:
        started = time.perf_counter()
        response = await client.post(
            f"/api/chats/{chat_id}/messages",
            json={"content": "Tell me about write-ahead logs."},
            headers={"X-CSRF-Token": csrf},
        )
        if response.status_code != 200 or "data: [DONE]" not in response.text:
            raise RuntimeError(f"the turn answered {response.status_code}: {response.text[:300]}")
        running = [t for t in asyncio.all_tasks() if t.get_name() == f"hearth-turn-{chat_id}"]
        if running:
            await asyncio.wait_for(asyncio.gather(*running), 30)
        elapsed = time.perf_counter() - started
    return Counter(statement_kind(sql) for sql in seen), elapsed


async def run(args: argparse.Namespace, workdir: Path) -> bool:
    ok = True
    with (workdir / "fakes.log").open("wb") as log:
        fakes = {name: await start_fake(schedule, log) for name, schedule in ROUNDS.items()}
        try:
            async with fresh_database(args.db, args.pg_url, workdir, "writes") as url:
                engine = create_engine(url)
                try:
                    await upgrade(engine)
                finally:
                    await engine.dispose()
                providers = workdir / "providers.yaml"
                providers.write_text(providers_yaml({n: port for n, (_, port) in fakes.items()}))
                os.environ[PROVIDER_KEY_ENV] = PROVIDER_KEY
                settings = Settings(
                    _env_file=None,
                    database_url=url,
                    data_dir=workdir / "data",
                    secret_key=secrets.token_urlsafe(32),
                    providers_file=providers,
                )
                app = create_app(settings)
                async with (
                    app.router.lifespan_context(app),
                    httpx.AsyncClient(
                        transport=httpx.ASGITransport(app=app),
                        base_url=f"http://{LOOPBACK}",
                        timeout=120,
                    ) as client,
                ):
                    services = app.state.services
                    reply = await client.post(
                        "/api/auth/register",
                        json={"email": "bench-writes@example.com", "password": "correct horse"},
                    )
                    if reply.status_code != 201:
                        raise RuntimeError(f"register answered {reply.status_code}")
                    csrf = client.cookies["hearth_csrf"]
                    await one_turn(client, services.engine, f"instant/{PROVIDER_MODEL}", csrf)
                    for name in ROUNDS:
                        model = f"{name.replace(' ', '')}/{PROVIDER_MODEL}"
                        counts = []
                        times = []
                        for _ in range(args.turns):
                            kinds, elapsed = await one_turn(client, services.engine, model, csrf)
                            counts.append(kinds)
                            times.append(elapsed)
                        totals = [sum(c.values()) for c in counts]
                        median = statistics.median(totals)
                        typical = min(counts, key=lambda c: abs(sum(c.values()) - median))
                        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(typical.items()))
                        print(
                            f"  {name:>8} round: {median:g} statements per turn "
                            f"(min {min(totals)}, max {max(totals)}; "
                            f"turn {statistics.median(times):.2f} s): {kinds}"
                        )
        except RuntimeError as exc:
            print(f"  FAILED: {exc}")
            ok = False
        finally:
            for process, _ in fakes.values():
                stop_process(process)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--turns", type=int, default=5, help="turns of each length")
    args = parser.parse_args()
    tree = Path(app.__file__).resolve().parents[1]
    print(f"turn_writes: {args.db}, app at {revision(tree)}, {args.turns} turns of each length")
    with tempfile.TemporaryDirectory(prefix="hearth-writes-") as tmp:
        ok = asyncio.run(run(args, Path(tmp)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
