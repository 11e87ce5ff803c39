"""Worker processes that read untrusted documents: a hostile one costs a process, not the server.

Parsing a PDF is CPU-bound Python: in a thread of the server it holds the GIL that every turn
needs, and a loop inside pypdf can be stopped by nothing short of ending the process it runs in.
So documents are read in child processes (`python -m app.knowledge.worker`), started with
`asyncio.create_subprocess_exec`: a fresh interpreter (never a fork of the threaded server) that
imports only the chunker, pypdf and orjson, in a session of its own (a Ctrl-C meant for the server
does not reach it). The parent talks to it over its stdin and stdout with length-prefixed JSON
frames: a job (path, name, type, limits), then a reply (the passages, or why not).

Per document, the child caps its own address space (`RLIMIT_AS`, `Limits.memory_bytes`), so an
allocation past it raises `MemoryError` instead of starving the machine, and its CPU time
(`RLIMIT_CPU`, a second past the wall-clock limit), so a child whose parent died cannot spin on.
The parent gives each reply `Limits.seconds` of wall-clock time, counted from the job's sending
(the child's start-up is not counted), and kills the child when it is over. A child that ran
out of memory, was killed, or died is never reused: the next document starts a fresh one.
Children run at a lower CPU priority (nice 10): ingestion is background work, and the serving
process comes first when both want the cores.

`WorkerPool` keeps up to `size` idle children for the next documents (starting one costs about
0.3 s); it does not schedule: the `Ingestor` decides which documents run and how many at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from app.knowledge.chunking import Chunk
from app.knowledge.extract import IngestFailed, Limits, extract

log = logging.getLogger("hearth.knowledge")

_HEADER = 8
_READY = b"ready"
_MAX_REPLY = 1 << 30
START_SECONDS = 60.0
"""How long a new worker may take to start (import its modules) before it counts as broken."""
_APP_ROOT = Path(__file__).resolve().parents[2]


class WorkerFailed(Exception):
    """A worker process did not start, or failed in a way that is hearth's fault, not the
    document's."""


# ============================================================================================
# The parent's side.
# ============================================================================================


class Worker:
    """One child process; one document at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def start(cls) -> Worker:
        paths = [str(_APP_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.knowledge.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            start_new_session=True,
            limit=1 << 20,
        )
        worker = cls(process)
        try:
            async with asyncio.timeout(START_SECONDS):
                ready = await worker._read()
        except BaseException as exc:
            await worker.stop()
            if isinstance(exc, Exception):
                raise WorkerFailed(f"the worker did not start: {exc!r}") from exc
            raise
        if ready != _READY:
            await worker.stop()
            raise WorkerFailed(f"the worker did not start: it said {ready[:100]!r}")
        return worker

    async def run(self, job: dict[str, Any], limits: Limits) -> dict[str, Any]:
        """The child's reply to `job`; IngestFailed when the document took too long or the child
        died reading it (the child is gone then)."""
        assert self.process.stdin is not None
        frame = orjson.dumps({**job, "limits": asdict(limits)})
        try:
            self.process.stdin.write(len(frame).to_bytes(_HEADER, "big") + frame)
            await self.process.stdin.drain()
            async with asyncio.timeout(limits.seconds):
                reply: dict[str, Any] = orjson.loads(await self._read())
                return reply
        except TimeoutError:
            await self.stop()
            raise IngestFailed(
                f"reading the document took longer than the limit of {limits.seconds:g} s"
            ) from None
        except (OSError, EOFError, asyncio.IncompleteReadError, orjson.JSONDecodeError) as exc:
            returncode = await self.stop()
            if returncode == -signal.SIGXCPU:
                raise IngestFailed(
                    f"reading the document took longer than the limit of {limits.seconds:g} s"
                ) from None
            raise IngestFailed(
                "reading the document stopped unexpectedly",
                f"the worker ended with exit status {returncode}: {exc!r}",
            ) from None

    async def _read(self) -> bytes:
        assert self.process.stdout is not None
        size = int.from_bytes(await self.process.stdout.readexactly(_HEADER), "big")
        if size > _MAX_REPLY:
            raise EOFError(f"a reply of {size} bytes")
        return await self.process.stdout.readexactly(size)

    async def stop(self) -> int | None:
        """End the child (if it still runs) and wait for it; its exit status."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(self.process.wait())
        return self.process.returncode


class WorkerPool:
    """Worker processes for documents: up to `size` kept idle between documents."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self.started = 0
        """Workers started so far (a broken or killed one is replaced by a new one)."""

    def pids(self) -> set[int]:
        """The process ids of the live workers."""
        return {worker.pid for worker in (*self._idle, *self._busy)}

    async def extract(self, path: Path, filename: str, mime: str, limits: Limits) -> list[Chunk]:
        """The passages of a document, read in a worker; IngestFailed says why not."""
        worker = await self._take()
        self._busy.add(worker)
        keep = False
        try:
            reply = await worker.run(
                {"path": str(path), "filename": filename, "mime": mime}, limits
            )
            keep = not reply.get("replace", False)
        finally:
            self._busy.discard(worker)
            if keep and len(self._idle) < self.size:
                self._idle.append(worker)
            else:
                await worker.stop()
        if "chunks" in reply:
            return [Chunk(text, heading, page) for text, heading, page in reply["chunks"]]
        if "failed" in reply:
            raise IngestFailed(reply["failed"], reply.get("detail"))
        raise WorkerFailed(f"the worker failed on {path.name!r}: {reply.get('error')}")

    async def _take(self) -> Worker:
        """An idle worker that is still alive, else a new one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.process.returncode is None:
                return worker
            log.warning(
                "worker %d ended while idle (exit status %s)", worker.pid, worker.process.returncode
            )
        worker = await Worker.start()
        self.started += 1
        return worker

    async def close(self) -> None:
        """Stop every worker (a busy one's document is left to its caller)."""
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        await asyncio.gather(*(worker.stop() for worker in workers))


# ============================================================================================
# The child's side.
# ============================================================================================


def _send(out: BinaryIO, payload: bytes) -> None:
    out.write(len(payload).to_bytes(_HEADER, "big") + payload)
    out.flush()


def _receive(source: BinaryIO) -> bytes | None:
    header = source.read(_HEADER)
    if len(header) < _HEADER:
        return None  # the parent is gone
    return source.read(int.from_bytes(header, "big"))


def _bound(limits: Limits) -> None:
    """Cap this process's address space, and its CPU time to a second past the time limit."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = limits.memory_bytes if hard == resource.RLIM_INFINITY else min(hard, limits.memory_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    seconds = int(usage.ru_utime + usage.ru_stime + limits.seconds) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        seconds = min(seconds, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, hard))


def _answer(job: dict[str, Any]) -> dict[str, Any]:
    limits = Limits(**job["limits"])
    try:
        _bound(limits)
        chunks = extract(Path(job["path"]), job["filename"], job["mime"], limits)
    except IngestFailed as exc:
        return {"failed": str(exc), "detail": exc.detail}
    except MemoryError:
        return {
            "failed": "reading the document needed more than the limit of "
            f"{limits.memory_bytes // (1024 * 1024)} MiB of memory",
            "replace": True,
        }
    except OSError as exc:
        return {"failed": "the file cannot be read", "detail": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # a bug here, not in the document: the parent logs it
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"chunks": [(chunk.text, chunk.heading, chunk.page) for chunk in chunks]}


def main() -> None:
    """Answer jobs from stdin until the parent closes it."""
    import resource
    import warnings

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(OSError):
        os.nice(10)  # background work: the serving process comes first for the cores
    warnings.simplefilter("ignore")
    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # hostile files warn a lot
    import pypdf  # noqa: F401  (imported before the first job, not inside its time limit)

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print goes to stderr, never into the replies
    source = sys.stdin.buffer
    _send(out, _READY)
    while (frame := _receive(source)) is not None:
        reply = _answer(orjson.loads(frame))
        try:
            payload = orjson.dumps(reply)
        except Exception as exc:  # out of memory, or text JSON cannot carry
            reply = {"error": f"the reply cannot be sent: {exc!r}", "replace": True}
            payload = orjson.dumps(reply)
        _send(out, payload)
        if reply.get("replace"):
            return


if __name__ == "__main__":
    main()
