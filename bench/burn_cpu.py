"""Keep every core busy for a bounded time, to run timing-sensitive tests on a loaded machine.

    python bench/burn_cpu.py --seconds 300 &      # then run the tests meanwhile

Why it is shaped so:

* One process per core (`--workers`, default `os.cpu_count()`), each spinning on pure Python
  arithmetic: processes, not threads, since the GIL would let threads fill one core only. They
  run at normal priority, so the tests really compete with them.
* It stops by itself: each worker stops at the deadline (`--seconds`, capped at an hour) on its
  own clock, and also as soon as its parent is gone (its parent process id changes), so a
  killed or crashed burner never leaves a spinning orphan behind. SIGTERM and SIGINT end it
  within milliseconds, with its figures.
* At the end it prints what it did: for each worker the CPU seconds it used over the wall time,
  so a run can show that the cores were in fact busy (a worker near 1.0 had its core to
  itself; two workers sharing a core with a test show less). `--json` writes the same figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import add_json_option, write_figures

MAX_SECONDS = 3600.0
CHECK_EVERY = 200_000
"""Loop iterations between looks at the clock and the parent: a few milliseconds of work."""


def burn(deadline: float, parent: int, stop: Any, results: Any, index: int) -> None:
    """Spin until the deadline, a stop or the parent's end; report the CPU time used."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    started, cpu = time.monotonic(), time.process_time()
    value = 0
    while True:
        for i in range(CHECK_EVERY):
            value = (value * 31 + i) & 0xFFFF_FFFF
        if time.monotonic() >= deadline or stop.is_set() or os.getppid() != parent:
            break
    results[index] = (time.process_time() - cpu) / max(time.monotonic() - started, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long (default 120)")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes (default: cores)"
    )
    add_json_option(parser)
    args = parser.parse_args()
    seconds = min(max(args.seconds, 0.0), MAX_SECONDS)

    deadline = time.monotonic() + seconds
    results = multiprocessing.Array("d", args.workers)
    stop = multiprocessing.Event()
    workers = [
        multiprocessing.Process(
            target=burn, args=(deadline, os.getpid(), stop, results, i), daemon=True
        )
        for i in range(args.workers)
    ]
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    for worker in workers:
        worker.start()
    print(f"burning {args.workers} cores for {seconds:.0f} s (pid {os.getpid()})", flush=True)
    for worker in workers:
        worker.join()
    shares = [round(share, 3) for share in results[:]]
    print("CPU share per worker: " + ", ".join(f"{share:.2f}" for share in shares), flush=True)
    write_figures({"seconds": seconds, "workers": args.workers, "cpu_share": shares}, args.json)


if __name__ == "__main__":
    main()
