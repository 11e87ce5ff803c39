"""A `/healthz` prober in a process of its own, steered over stdin, for bench/adversarial.py.

It runs apart from the benchmark so that nothing the benchmark itself does (building inputs,
serving the fake provider, parsing large answers) can delay a probe and pass for the server's
slowness. It uses the standard library only, so it starts fast and shares nothing.

Protocol, one line each way: `start` -> `ok` (probing has begun); `stop` -> one JSON object
`{"latencies_ms": [...], "unanswered": n, "connects": n}`; `quit` (or the end of stdin) ends
the process.

Probes are scheduled every `interval` on one keep-alive connection, and each probe's latency
runs from the moment it was *due*, not from when it could be sent: a server that stops
answering for 2 s leaves some 200 due probes behind, each counted with the time it waited.
Timing from the send instead would count a 2 s stall as one slow probe among many fast ones,
and the p99 would hide exactly what this prober is for. After `stop`, the probes that fell
due before it are still sent (the backlog drains in a few milliseconds once the server
answers); when the server does not answer within `STOP_GRACE` seconds, the probe in flight and
every due one are counted as unanswered, with the time they had waited so far.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

HOST = "127.0.0.1"
REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
STOP_GRACE = 5.0
"""Seconds a stop waits for a probe in flight before it counts the rest as unanswered."""
READ_STEP = 0.2
MAX_PROBES = 200_000
"""A bound on one window's probes (over half an hour at 10 ms)."""


class Window:
    """One start-to-stop window of probes."""

    def __init__(self, port: int, interval: float, sock: socket.socket | None) -> None:
        self.port = port
        self.interval = interval
        self.sock = sock
        self.latencies: list[float] = []
        self.unanswered = 0
        self.connects = 0
        self.stop_at: float | None = None
        self.give_up_at: float | None = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def stop(self) -> None:
        with self.lock:
            self.stop_at = time.perf_counter()
            self.give_up_at = self.stop_at + STOP_GRACE
        self.thread.join(STOP_GRACE + 10)

    def _stopping(self) -> tuple[float | None, float | None]:
        with self.lock:
            return self.stop_at, self.give_up_at

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((HOST, self.port), timeout=5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(READ_STEP)
        return sock

    def _exchange(self) -> bool:
        """One probe; False when it was given up because a stop's grace ran out."""
        if self.sock is None:
            self.sock = self._connect()
            self.connects += 1
        self.sock.sendall(REQUEST)
        data = b""
        while True:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                head = data[:end].lower()
                length = 0
                at = head.find(b"content-length:")
                if at >= 0:
                    length = int(head[at + 15 :].split(b"\r\n", 1)[0])
                if len(data) >= end + 4 + length:
                    if b"connection: close" in head:
                        self._drop()
                    return True
            try:
                piece = self.sock.recv(65536)
            except TimeoutError:
                _, give_up = self._stopping()
                if give_up is not None and time.perf_counter() > give_up:
                    self._drop()
                    return False
                continue
            if not piece:
                raise ConnectionError("the server closed the connection")
            data += piece

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def run(self) -> None:
        clock = time.perf_counter
        due = clock()
        while len(self.latencies) + self.unanswered < MAX_PROBES:
            stop_at, give_up = self._stopping()
            if stop_at is not None and due >= stop_at:
                return
            now = clock()
            if due > now:
                time.sleep(min(due - now, 0.05))
                continue
            try:
                answered = self._exchange()
            except OSError:
                self._drop()
                answered = False
                if give_up is None or clock() < give_up:
                    # A dropped connection is retried at once, still timed from `due`.
                    try:
                        self.sock = self._connect()
                        self.connects += 1
                        answered = self._exchange()
                    except OSError:
                        self._drop()
                        time.sleep(self.interval)
            waited = clock() - due
            if answered:
                self.latencies.append(waited * 1000)
            else:
                self.unanswered += 1
                self.latencies.append(waited * 1000)
                stop_at, give_up = self._stopping()
                if give_up is not None and clock() > give_up:
                    assert stop_at is not None
                    # Every probe due before the stop waited at least until now.
                    now = clock()
                    due += self.interval
                    while due < stop_at:
                        self.unanswered += 1
                        self.latencies.append((now - due) * 1000)
                        due += self.interval
                    return
            due += self.interval


def main(argv: list[str]) -> int:
    port = int(argv[1])
    interval = float(argv[2]) / 1000 if len(argv) > 2 else 0.01
    sock: socket.socket | None = None
    while True:
        command = sys.stdin.readline().strip()
        if command == "start":
            window = Window(port, interval, sock)
            window.thread.start()
            print("ok", flush=True)
            command = sys.stdin.readline().strip()
            window.stop()
            sock = window.sock
            print(
                json.dumps(
                    {
                        "latencies_ms": window.latencies,
                        "unanswered": window.unanswered,
                        "connects": window.connects,
                    }
                ),
                flush=True,
            )
            if command != "stop":
                break
        elif command == "quit" or not command:
            break
    if sock is not None:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
