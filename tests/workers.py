"""Other hearth workers for a test: real `hearth serve` processes over the test's database.

Workers behind a load balancer share the database and the secret key; so do these. A test may
stop one gently (`stop`) or kill it as the kernel would (`kill`, SIGKILL: no handler runs, no
transaction ends well), which is what crash-safety tests need. A worker's log goes to a file whose
end is printed when it stops: pytest shows it beside a failing test, and only there.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.settings import Settings
from tests.support import ROOT, free_port, http_client, wait_until

LOG_LINES = 80
"""How much of a stopped worker's log is printed."""


@dataclass
class Worker:
    process: asyncio.subprocess.Process
    base_url: str
    log: Path | None = None

    def log_tail(self, lines: int = LOG_LINES) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def log_lines(self, *levels: str) -> str:
        """The lines of its JSON log at one of `levels`, whole (a failure's evidence)."""
        if self.log is None or not self.log.exists():
            return ""
        wanted = tuple(f'"level":"{level.lower()}"' for level in levels)
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if any(w in line for w in wanted))

    async def kill(self) -> None:
        """SIGKILL, as an out-of-memory killer or a crashed host would end it."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await self.process.wait()


def worker_env(
    *,
    database_url: str,
    secret_key: str,
    data_dir: Path,
    providers_file: Path,
    **settings: str,
) -> dict[str, str]:
    """The environment of a worker: this one's, less its `HEARTH_*`, plus `settings`
    (`turn_lease_seconds="2"` becomes `HEARTH_TURN_LEASE_SECONDS=2`)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")},
        "HEARTH_DATABASE_URL": database_url,
        "HEARTH_SECRET_KEY": secret_key,
        "HEARTH_DATA_DIR": str(data_dir),
        "HEARTH_PROVIDERS_FILE": str(providers_file),
        "HEARTH_AUTO_MIGRATE": "0",
        "HEARTH_TEST_PROVIDER_KEY": "test-key",
        "PYTHONPATH": str(ROOT),
        **{f"HEARTH_{name.upper()}": value for name, value in settings.items()},
    }


def beside(settings: Settings, providers_yaml: str, folder: Path, **extra: str) -> dict[str, str]:
    """The environment of another worker beside the test's own server: its database, secret
    key and data dir, and providers from `providers_yaml` (written to a file in `folder`)."""
    providers = folder / "providers-worker.yaml"
    providers.write_text(providers_yaml)
    return worker_env(
        database_url=settings.database_url,
        secret_key=settings.signing_key,
        data_dir=settings.data_dir,
        providers_file=providers,
        **extra,
    )


@asynccontextmanager
async def hearth_worker(
    env: dict[str, str], *, within: float = 30, args: Sequence[str] = ()
) -> AsyncIterator[Worker]:
    """A `hearth serve` process with `env` (and more `args`, such as `--workers 2`), once it
    answers `/healthz`; stopped after. One worker unless `args` say otherwise (the last
    `--workers` counts), since a test that kills a worker kills this process."""
    port = free_port()
    sink, log = tempfile.mkstemp(prefix=f"hearth-worker-{port}-", suffix=".log")
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "1", *args,
            cwd=ROOT, env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
    finally:
        os.close(sink)
    worker = Worker(process, f"http://127.0.0.1:{port}", Path(log))
    try:
        async with http_client() as probe:

            async def healthy() -> bool:
                assert process.returncode is None, "the worker stopped while starting"
                try:
                    return (await probe.get(f"{worker.base_url}/healthz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await wait_until(healthy, within=within, failure="the worker did not start")
        yield worker
    finally:
        await worker.stop()
        print(f"--- the end of the log of the worker at {worker.base_url} ---")
        print(worker.log_tail())
        os.remove(log)
