"""A small HTTP/1.1 load generator for loopback benchmarks.

Each connection is a keep-alive socket that sends one request, reads the whole response
(headers, then exactly `Content-Length` bytes of body) and sends the next one: a closed loop,
so the number of connections is the number of requests in flight. The client does as little
per request as it can (one prebuilt request, one header scan, no header dict), so a Python
server on the same machine saturates long before the client does.

Only `127.0.0.1` is accepted as a target, and every run is bounded both in time and in
request count.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
HEADER_END = b"\r\n\r\n"
#: Grace on top of a run's duration before the run is abandoned as hung.
HANG_GRACE_SECONDS = 30.0


@dataclass
class Sample:
    """What one run of one route measured."""

    requests: int = 0
    errors: int = 0
    elapsed: float = 0.0
    client_cpu: float = 0.0
    """CPU seconds this (the client's) process spent during the run."""
    latencies_ns: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed if self.elapsed > 0 else 0.0

    def merge(self, other: Sample) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.elapsed += other.elapsed
        self.client_cpu += other.client_cpu
        self.latencies_ns.extend(other.latencies_ns)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header_values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending sequence (0 for an empty one)."""
    if not sorted_values:
        return 0
    rank = max(1, min(len(sorted_values), math.ceil(fraction * len(sorted_values))))
    return sorted_values[rank - 1]


def build_request(
    method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: keep-alive"]
    lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _content_length(head: bytes) -> int:
    lowered = head.lower()
    start = lowered.find(b"\r\ncontent-length:")
    if start < 0:
        if b"\r\ntransfer-encoding:" in lowered:
            raise ValueError("chunked responses are not supported")
        return 0
    start += len(b"\r\ncontent-length:")
    end = lowered.find(b"\r\n", start)
    return int(lowered[start:end])


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection(LOOPBACK, port, limit=1 << 20), 10)


async def request_once(
    port: int,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    wait: float = 30.0,
) -> Reply:
    """One request on a fresh connection, with its status, headers and body."""
    reader, writer = await _open(port)
    try:
        writer.write(build_request(method, path, headers, body))
        head = await asyncio.wait_for(reader.readuntil(HEADER_END), wait)
        payload = await asyncio.wait_for(reader.readexactly(_content_length(head)), wait)
    finally:
        writer.close()
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    parsed = []
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            parsed.append((key.strip(), value.strip()))
    return Reply(status, parsed, payload)


async def _connection_loop(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    payload: bytes,
    stop_at_ns: int,
    budget: list[int],
    sample: Sample,
) -> None:
    clock = time.perf_counter_ns
    latencies = sample.latencies_ns
    while budget[0] > 0:
        started = clock()
        if started >= stop_at_ns:
            return
        budget[0] -= 1
        writer.write(payload)
        head = await reader.readuntil(HEADER_END)
        length = _content_length(head)
        if length:
            await reader.readexactly(length)
        latencies.append(clock() - started)
        sample.requests += 1
        if head[9:12] != b"200":
            sample.errors += 1
            if b"\r\nconnection: close" in head.lower():
                return


async def run_load(
    port: int, request: bytes, *, connections: int, seconds: float, max_requests: int
) -> Sample:
    """Keep `connections` requests in flight for `seconds` (or `max_requests` in all).

    The clock starts once every connection is open; `elapsed` runs until the last response of
    the run has arrived, so requests/s counts only whole requests.
    """
    if connections < 1 or seconds <= 0 or max_requests < 1:
        raise ValueError("connections, seconds and max_requests must be positive")
    streams = [await _open(port) for _ in range(connections)]
    sample = Sample()
    budget = [max_requests]
    try:
        cpu_started = time.process_time()
        started = time.perf_counter_ns()
        stop_at = started + int(seconds * 1e9)
        loops = [
            _connection_loop(reader, writer, request, stop_at, budget, sample)
            for reader, writer in streams
        ]
        await asyncio.wait_for(asyncio.gather(*loops), seconds + HANG_GRACE_SECONDS)
        sample.elapsed = (time.perf_counter_ns() - started) / 1e9
        sample.client_cpu = time.process_time() - cpu_started
    finally:
        for _, writer in streams:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for _, w in streams), return_exceptions=True)
    return sample
