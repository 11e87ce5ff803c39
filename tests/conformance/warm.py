"""A warm start for the conformance adapter, so the tests pay for importing hearth only once.

The suite's CLI starts its client afresh for every scenario, and most of an adapter run (some six
seconds of eight on a small machine) is Python importing hearth and the fake provider. So the
tests start `serve` once: it imports the adapter and waits on a Unix socket. The command the CLI
runs is then `run <socket> <url>`, which imports nothing of hearth: it hands its arguments and the
scenario's environment to the server, which forks a child of the warm process to run
`adapter.main` as a fresh process would (with that environment, the connection as its stdout and
stderr), and sends back what it printed and its exit status. The suite sees the same client,
sooner. Forking is safe because the warm process has done nothing but import: one thread, no
event loop, no socket but the listening one; it serves one scenario at a time, as the tests run
them, and every child bounds itself (`adapter.DEADLINE_SECONDS`).

`python -m tests.conformance.adapter <url>` stays the command to run by hand.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from pathlib import Path

READY = "ready"
"""What `serve` prints once it listens."""
TRAILER = b"\0"
"""Separates the child's output from its exit status; no client prints it."""


def serve(path: Path) -> None:
    """Import the adapter, then run each request on the socket at `path` in a forked child,
    until the process that started this one ends."""
    # Only the server imports these: `run` must start in a moment.
    import asyncio
    import time

    from tests.conformance import adapter

    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        listener.settimeout(1.0)
        print(READY, flush=True)
        parent = os.getppid()
        while os.getppid() == parent:  # a test run that died takes its server along
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                request = json.loads(connection.makefile("rb").readline())
                sys.stdout.flush()
                sys.stderr.flush()
                child = os.fork()
                if child == 0:
                    listener.close()
                    os.dup2(connection.fileno(), 1)
                    os.dup2(connection.fileno(), 2)
                    os.environ.clear()
                    os.environ.update(request["env"])
                    sys.argv = [adapter.__file__, *request["argv"]]
                    adapter.STARTED = time.monotonic()  # its log counts from here
                    try:
                        status = asyncio.run(adapter.main(request["argv"]))
                    except BaseException:
                        traceback.print_exc()
                        status = 1
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(status)
                _, waited = os.waitpid(child, 0)
                status = os.waitstatus_to_exitcode(waited)
                connection.sendall(TRAILER + str(status).encode())


def run(path: Path, argv: list[str]) -> int:
    """What the CLI runs: the adapter's run in the warm server, its output and its status."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(path))
        request = {"argv": argv, "env": dict(os.environ)}
        connection.sendall(json.dumps(request).encode() + b"\n")
        received = bytearray()
        while chunk := connection.recv(65536):
            received += chunk
    output, trailer, status = bytes(received).rpartition(TRAILER)
    if not trailer:  # the server went away before the child's end
        output, status = bytes(received), b"1"
    sys.stdout.buffer.write(output)
    sys.stdout.flush()
    return int(status)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "serve":
        serve(Path(argv[1]))
        return 0
    if len(argv) >= 2 and argv[0] == "run":
        return run(Path(argv[1]), argv[2:])
    print("usage: python -m tests.conformance.warm serve <socket> | run <socket> <url>")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
