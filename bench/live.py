"""Following running turns: delivery to readers in another worker, their CPU, a stalled reader.

Two hearth workers (`hearth serve` processes A and B) share one PostgreSQL database and secret
key, as workers behind a load balancer do; the provider is the fake one, in a process of its
own, on a fixed schedule (`--schedule`, default: the first token after 100 ms, then 100 tokens
20 ms apart). Turns are sent to A; their readers (`GET /api/chats/{id}/stream`) go to B, so
every event they get has travelled through the database (`app.agent.relay`). A turn's readers
connect once its POST has been answered (the head of its stream arrived: the turn holds the
chat), as a reload or a second tab follows a turn that runs; a reader sent with the POST would
mostly be told 204 (no turn runs yet) and ask again, and measure those requests instead.

1. Delivery latency: N concurrent turns (100), each with one reader on B. For each event that
   the turn emitted after its reader was following (the replay of the turn's start is not
   delivery), the time from its arrival at the turn's own client on A to its arrival at the
   reader on B. The POST client on A stands for the moment the turn emits it: it gets the
   event from the process that made it, on loopback. Targets: p50 <= 20 ms, p99 <= 100 ms.
2. CPU: N concurrent turns, each followed by two readers on B, against the same turns without
   readers, alternating in the same run (`--rounds` of each); the CPU both hearth processes
   used (from /proc), per turn. Target: the median of the rounds' ratios (each round's turns
   with readers over its turns without) <= 1.15x, as `turn_overhead.py --parts o` judges its
   rounds; the ratio of the means is printed too. The floor, in rounds of their own in the
   same rotation: the same turns, each read by two streams of as many events from uvicorn and
   Starlette alone (`_sse_floor.py`, paced as the provider paces them), that server's CPU
   counted with the workers'. It is measured beside the turns because the two cores slow each
   other: the same Python loop takes 45 % more CPU time while the other core is busy (3.24 s
   alone, 4.71 s beside a spinning process, on this machine), so what readers cost includes
   what they make the turn's worker lose. The same streams alone, after the rounds, are printed
   too. Each burst prints how many requests a reader made (a 204 would be asked again 20 ms
   later).
3. Memory: one turn of 20,000 events with a stalled reader (a socket that reads nothing) on A,
   against the same turn with none: how much A's resident memory grew while it ran (peak over
   the level before). Target: the stalled reader's turn grows A by <= 16 MiB.

Every turn is checked: the reader's events equal the POST client's, byte for byte, in order.

    .venv/bin/python bench/live.py [--turns 100] [--rounds 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loadgen import LOOPBACK, build_request
from _turns import (
    DEFAULT_PG_URL,
    ROOT,
    Account,
    Connection,
    Exchange,
    cpu_seconds,
    free_port,
    fresh_database,
    quantile,
    register,
    revision,
    start_process,
    stop_process,
    wait_answering,
)
from turn_overhead import (
    PROVIDER_KEY,
    PROVIDER_KEY_ENV,
    create_chat,
    providers_yaml,
    start_fake,
    turn_request,
)

SCHEDULE = "first_ms=100,tokens=100,interval_ms=20"
LONG_SCHEDULE = "first_ms=50,tokens=20000,interval_ms=0"
LATENCY_P50_MS = 20.0
LATENCY_P99_MS = 100.0
CPU_TARGET = 1.15
MEMORY_TARGET_MIB = 16.0


@dataclass
class Workers:
    a: Any
    b: Any
    a_port: int
    b_port: int
    floor: Any = None
    """The floor's server (`_sse_floor.py`) while the same-run floor is measured."""
    floor_port: int = 0
    floor_request: bytes = b""


@contextlib.asynccontextmanager
async def workers(
    database_url: str, workdir: Path, fake_port: int, log: IO[bytes], count: int = 2
) -> AsyncIterator[Workers]:
    providers = workdir / "providers.yaml"
    providers.write_text(providers_yaml(fake_port))
    env = {
        "HEARTH_DATABASE_URL": database_url,
        "HEARTH_DATA_DIR": str(workdir / "data"),
        "HEARTH_SECRET_KEY": secrets.token_urlsafe(32),
        "HEARTH_PROVIDERS_FILE": str(providers),
        "HEARTH_AUTO_MIGRATE": "1",
        PROVIDER_KEY_ENV: PROVIDER_KEY,
    }
    started = []
    try:
        for _ in range(count):
            port = free_port()
            command = [sys.executable, "-m", "app.cli", "serve", "--host", LOOPBACK]
            command += ["--port", str(port), "--workers", "1"]
            process = start_process(command, log, env)
            started.append((process, port))
            await wait_answering(port, "/healthz", process)
        (a, a_port), (b, b_port) = started[0], started[-1]
        yield Workers(a, b, a_port, b_port)
    finally:
        for process, _ in started:
            stop_process(process)


def follow_request(account: Account, chat_id: str) -> bytes:
    return build_request("GET", f"/api/chats/{chat_id}/stream", account.headers())


@dataclass
class Followed:
    post: Exchange
    readers: list[Exchange]
    asks: int = 0
    """The readers' requests, any 204 included."""


async def one_turn(
    account: Account, w: Workers, chat_id: str, readers: int, index: int, floor: bool
) -> Followed:
    """One turn on A and its `readers` on B; with `floor`, the readers are streams of the
    floor's server instead (as many events, paced as the provider paces them)."""
    a_port, b_port = w.a_port, w.floor_port if floor else w.b_port
    post_conn = await Connection.open(a_port)
    reader_conns = [await Connection.open(b_port) for _ in range(readers)]
    try:
        answered = asyncio.Event()
        post = asyncio.create_task(
            post_conn.exchange(
                turn_request(account, chat_id, f"turn {index}"), wait=120, answered=answered
            )
        )
        await answered.wait()
        asks = 0

        async def follow(conn: Connection) -> Exchange:
            """A reader of the running turn: it asks once the POST's answer has begun, as a
            reload or a second tab does (a 204 all the same: ask again 20 ms later)."""
            if floor:
                return await conn.exchange(w.floor_request, wait=120)
            nonlocal asks
            while True:
                if not conn.usable:
                    await conn.reopen()
                asks += 1
                reply = await conn.exchange(follow_request(account, chat_id), wait=120)
                if reply.status != 204 or post.done():
                    return reply
                await asyncio.sleep(0.02)

        followed = await asyncio.gather(*(follow(conn) for conn in reader_conns))
        return Followed(await post, list(followed), asks)
    finally:
        post_conn.close()
        for conn in reader_conns:
            conn.close()


async def burst(
    account: Account, chats: list[str], w: Workers, readers: int, floor: bool = False
) -> tuple[list[Followed], float]:
    """`chats`' turns at once, each with `readers`; the CPU of A, B (and the floor's server)."""
    pids = [w.a.pid, w.b.pid] + ([w.floor.pid] if floor else [])
    before = [cpu_seconds(pid) or 0.0 for pid in pids]
    outcomes = await asyncio.gather(
        *(one_turn(account, w, chat, readers, i, floor) for i, chat in enumerate(chats))
    )
    await asyncio.sleep(0.3)  # the workers' last writes after the streams ended
    after = [cpu_seconds(pid) or 0.0 for pid in pids]
    used = [a - b for a, b in zip(after, before, strict=True)]
    each = [seconds / len(chats) * 1000 for seconds in used]
    shown = f"A {each[0]:.1f} ms, B {each[1]:.1f} ms" + (
        f", floor {each[2]:.1f} ms" if floor else ""
    )
    shown += " per turn"
    if asks := sum(outcome.asks for outcome in outcomes):
        shown += f"; {asks / (readers * len(chats)):.1f} requests a reader"
    print(f"   ({shown})")
    return list(outcomes), sum(used)


def check(outcomes: list[Followed]) -> list[str]:
    problems = []
    for n, outcome in enumerate(outcomes):
        post = outcome.post
        if not post.complete or post.status != 200:
            problems.append(f"turn {n}: POST {post.status} {post.error}")
            continue
        sent = [data for _, data in post.events]
        if sent[-1] != b"[DONE]":
            problems.append(f"turn {n}: the POST stream did not end with [DONE]")
        for r, reader in enumerate(outcome.readers):
            got = [data for _, data in reader.events]
            if reader.status != 200 or got != sent:
                problems.append(
                    f"turn {n} reader {r}: {reader.status} {reader.error}, "
                    f"{len(got)} events of {len(sent)}"
                )
    return problems


def check_floor(outcomes: list[Followed], events: int) -> list[str]:
    """The turns of a floor round, and their floor streams: each complete."""
    problems = [
        f"turn {n}: POST {o.post.status}" for n, o in enumerate(outcomes) if not o.post.complete
    ]
    problems += [
        f"turn {n}: a floor stream did not complete"
        for n, o in enumerate(outcomes)
        for r in o.readers
        if not r.complete or len(r.events) != events + 1
    ]
    return problems


def delivery_ms(outcomes: list[Followed]) -> list[float]:
    """For each event emitted while its reader followed, its delay from A's client to B's."""
    delays = []
    for outcome in outcomes:
        posted = outcome.post.events
        for reader in outcome.readers:
            got = reader.events
            if not got or len(got) != len(posted):
                continue
            joined = got[0][0]  # the reader had the replay of the start by then
            delays.extend(
                (arrived - sent_at) / 1e6
                for (sent_at, _), (arrived, _) in zip(posted, got, strict=True)
                if sent_at > joined
            )
    return delays


async def prepare(port: int, count: int) -> tuple[Account, list[str]]:
    conn = await Connection.open(port)
    try:
        account = await register(conn)
    finally:
        conn.close()
    return account, await new_chats(port, account, count)


async def new_chats(port: int, account: Account, count: int) -> list[str]:
    """Chats of their own for each burst: a chat's next turn would read a longer history."""
    conn = await Connection.open(port)
    try:
        return [await create_chat(conn, account) for _ in range(count)]
    finally:
        conn.close()


async def part_latency_and_cpu(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {"db": "postgresql"}
    log_path = workdir / "processes.log"
    with log_path.open("wb") as log:
        async with fresh_database("postgresql", args.pg_url, workdir, "live") as url:
            fake, fake_port = await start_fake(args.schedule, log)
            try:
                async with workers(url, workdir, fake_port, log) as w:
                    account, chats = await prepare(w.a_port, args.turns)
                    # Warm both workers (models built, connections made, the relay listening).
                    await burst(account, await new_chats(w.a_port, account, 10), w, 1)

                    print(f"1. delivery: {args.turns} turns on A, one reader each on B")
                    outcomes, _ = await burst(account, chats, w, 1)
                    figures["events_per_turn"] = len(outcomes[0].post.events) - 1
                    problems = check(outcomes)
                    for problem in problems[:5]:
                        print(f"   PROBLEM {problem}")
                    delays = delivery_ms(outcomes) or [float("nan")]
                    p50, p99 = quantile(delays, 0.5), quantile(delays, 0.99)
                    print(
                        f"   {len(delays)} events delivered live: p50 {p50:.1f} ms "
                        f"(target <= {LATENCY_P50_MS:g}), p99 {p99:.1f} ms "
                        f"(target <= {LATENCY_P99_MS:g}), max {max(delays):.1f} ms"
                    )
                    figures |= {
                        "latency.p50_ms": round(p50, 2),
                        "latency.p99_ms": round(p99, 2),
                        "latency.events": len(delays),
                    }

                    print(
                        f"2. CPU: {args.turns} turns, without readers, with 2 each on B, and "
                        "with 2 streams each from Starlette alone (the floor, same run)"
                    )
                    events = figures["events_per_turn"]
                    async with floor_server(args, workdir, events, log, w):
                        series: dict[str, list[float]] = {"plain": [], "followed": [], "floor": []}
                        variants = [("plain", 0, False), ("followed", 2, False), ("floor", 2, True)]
                        for round_ in range(args.rounds):
                            shift = round_ % len(variants)
                            for name, readers, floor in variants[shift:] + variants[:shift]:
                                chats = await new_chats(w.a_port, account, args.turns)
                                outcomes, used = await burst(account, chats, w, readers, floor)
                                problems += check_floor(outcomes, events) if floor else []
                                problems += [] if floor else check(outcomes)
                                series[name].append(used / args.turns * 1000)
                                print(
                                    f"   round {round_ + 1}, {name}: {series[name][-1]:.1f} ms/turn"
                                )
                    plain, followed, floored = (
                        statistics.mean(series[k]) for k in ("plain", "followed", "floor")
                    )
                    ratio, floor_ratio = followed / plain, floored / plain
                    # Each round's own ratios, and their median: a round the host slowed as a
                    # whole moves all three of its figures together, not the ratio.
                    ratios = [
                        f / p for f, p in zip(series["followed"], series["plain"], strict=True)
                    ]
                    floors = [f / p for f, p in zip(series["floor"], series["plain"], strict=True)]
                    median, floor_median = statistics.median(ratios), statistics.median(floors)
                    print(
                        f"   server CPU per turn: {plain:.1f} ms without readers, "
                        f"{followed:.1f} ms with 2: {ratio:.3f}x; with 2 Starlette streams "
                        f"instead, the same run's floor: {floored:.1f} ms, {floor_ratio:.3f}x"
                    )
                    print(
                        "   each round's ratio: "
                        + ", ".join(f"{r:.3f}" for r in ratios)
                        + f"; their median {median:.3f}x (target <= {CPU_TARGET}); the floor's: "
                        + ", ".join(f"{r:.3f}" for r in floors)
                        + f"; median {floor_median:.3f}x"
                    )
                    figures |= {
                        "cpu.plain_ms_per_turn": round(plain, 2),
                        "cpu.followed_ms_per_turn": round(followed, 2),
                        "cpu.ratio_of_means": round(ratio, 3),
                        "cpu.ratio": round(median, 3),
                        "cpu.round_ratios": [round(r, 3) for r in ratios],
                        "cpu.floor_same_run_ms_per_turn": round(floored, 2),
                        "cpu.floor_same_run_ratio": round(floor_median, 3),
                        "cpu.floor_round_ratios": [round(r, 3) for r in floors],
                    }
            finally:
                stop_process(fake)
    figures["problems"] = problems
    for problem in problems[:10]:
        print(f"   PROBLEM {problem}")
    return figures


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stalled_reader(port: int, account: Account, chat_id: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((LOOPBACK, port))
    sock.sendall(follow_request(account, chat_id))
    return sock


async def long_turn(port: int, pid: int, account: Account, chat_id: str, stall: bool) -> float:
    """Run one long turn on A; A's resident memory growth (MiB) while it ran."""
    base = rss_mib(pid)
    peak = base
    conn = await Connection.open(port)
    stalled = None
    try:
        post = asyncio.create_task(conn.exchange(turn_request(account, chat_id, "long"), wait=600))
        if stall:
            await asyncio.sleep(0.5)  # the turn has started (it streams for several seconds)
            stalled = stalled_reader(port, account, chat_id)
        while not post.done():
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.05)
        outcome = await post
        if not outcome.complete or outcome.events[-1][1] != b"[DONE]":
            raise RuntimeError(f"the long turn did not complete: {outcome.error}")
        events = len(outcome.events)
    finally:
        conn.close()
        if stalled is not None:
            stalled.close()
    print(
        f"   {'with' if stall else 'without'} a stalled reader: {events} events, "
        f"A grew {peak - base:.1f} MiB"
    )
    return peak - base


async def part_memory(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    print("3. memory: a turn of 20,000 events, with a stalled reader and without")
    log_path = workdir / "memory.log"
    with log_path.open("wb") as log:
        async with fresh_database("postgresql", args.pg_url, workdir, "livemem") as url:
            fake, fake_port = await start_fake(LONG_SCHEDULE, log)
            try:
                async with workers(url, workdir / "m", fake_port, log, count=1) as w:
                    account, chats = await prepare(w.a_port, 4)
                    await long_turn(w.a_port, w.a.pid, account, chats[0], False)  # warm-up
                    plain = await long_turn(w.a_port, w.a.pid, account, chats[1], False)
                    stalled = await long_turn(w.a_port, w.a.pid, account, chats[2], True)
            finally:
                stop_process(fake)
    print(
        f"   growth with the stalled reader: {stalled:.1f} MiB (target <= "
        f"{MEMORY_TARGET_MIB:g}); without: {plain:.1f} MiB"
    )
    return {
        "memory.stalled_growth_mib": round(stalled, 2),
        "memory.plain_growth_mib": round(plain, 2),
    }


@contextlib.asynccontextmanager
async def floor_server(
    args: argparse.Namespace, workdir: Path, events: int, log: IO[bytes], w: Workers
) -> AsyncIterator[None]:
    """The floor's server (`_sse_floor.py`) beside the workers, streaming `events` events
    paced as the provider paces them, for the rounds that measure the floor in the same run."""
    interval = float(dict(p.split("=") for p in args.schedule.split(","))["interval_ms"])
    port = free_port()
    command = [sys.executable, str(Path(__file__).parent / "_sse_floor.py"), "--port", str(port)]
    server = start_process(command, log)
    try:
        await wait_answering(port, "/healthz", server)
        w.floor, w.floor_port = server, port
        w.floor_request = build_request("GET", f"/events?count={events}&interval_ms={interval:g}")
        yield
    finally:
        w.floor = None
        stop_process(server)


async def part_floor(args: argparse.Namespace, workdir: Path, events: int) -> dict[str, Any]:
    """The CPU of 2 x `turns` streams of `events` events, paced as the provider paces them, from
    uvicorn and Starlette alone (`_sse_floor.py`): what two readers per turn cost at the least."""
    interval = float(dict(p.split("=") for p in args.schedule.split(","))["interval_ms"])
    port = free_port()
    with (workdir / "floor.log").open("wb") as log:
        command = [sys.executable, str(Path(__file__).parent / "_sse_floor.py")]
        server = start_process([*command, "--port", str(port)], log)
        try:
            await wait_answering(port, "/healthz", server)
            request = build_request("GET", f"/events?count={events}&interval_ms={interval:g}")
            used = []
            for _ in range(args.rounds):
                conns = [await Connection.open(port) for _ in range(2 * args.turns)]
                before = cpu_seconds(server.pid) or 0.0
                replies = await asyncio.gather(*(c.exchange(request, wait=120) for c in conns))
                used.append((cpu_seconds(server.pid) or 0.0) - before)
                for conn in conns:
                    conn.close()
                if not all(r.complete and len(r.events) == events + 1 for r in replies):
                    raise RuntimeError("a floor stream did not complete")
        finally:
            stop_process(server)
    floor = statistics.mean(used) / args.turns * 1000
    print(
        f"   floor: two paced streams of {events} events from uvicorn and Starlette alone: "
        f"{floor:.1f} ms of CPU per turn"
    )
    return {"cpu.floor_two_streams_ms_per_turn": round(floor, 2)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    print(f"hearth: {revision(ROOT)}")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hearth-live-") as tmp:
        workdir = Path(tmp)
        (workdir / "m").mkdir()
        if "latency" in args.parts or "cpu" in args.parts:
            figures |= await part_latency_and_cpu(args, workdir)
        if "cpu" in args.parts:
            figures |= await part_floor(args, workdir, figures.get("events_per_turn", 110))
            extra = figures["cpu.followed_ms_per_turn"] - figures["cpu.plain_ms_per_turn"]
            floor = figures["cpu.floor_two_streams_ms_per_turn"]
            plain = figures["cpu.plain_ms_per_turn"]
            allowed = (CPU_TARGET - 1) * plain
            figures["cpu.floor_ratio"] = round((plain + floor) / plain, 3)
            print(
                f"   the 2 readers cost {extra:.1f} ms per turn; the target allows "
                f"{allowed:.1f} ms; their streams alone cost {floor:.1f} ms on an idle machine "
                f"({figures['cpu.floor_ratio']:.3f}x), and beside the turns, where the two "
                "cores slow each other, the same run's floor is "
                f"{figures['cpu.floor_same_run_ratio']:.3f}x"
            )
        if "memory" in args.parts:
            figures |= await part_memory(args, workdir)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--schedule", default=SCHEDULE)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--parts", default="latency,cpu,memory")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.monotonic()
    figures = asyncio.run(main_async(args))
    print(f"({time.monotonic() - started:.0f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
