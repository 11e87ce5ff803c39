"""Prometheus metrics, kept across every worker process of one `hearth serve`.

With `HEARTH_METRICS_TOKEN` unset there are no metrics at all: `NO_METRICS` answers every call
with nothing, so a hearth that is not scraped pays one empty method call per event. With it set,
each process writes its values to memory-mapped files in one directory (`prometheus-client`'s
multi-process mode) and `GET /metrics`, whichever worker answers it, reads and sums them all. The
directory is `PROMETHEUS_MULTIPROC_DIR`, or one `hearth serve` makes for its workers and removes
after (`app.cli`); a process without either gets a temporary one of its own.

Names and units follow Prometheus' conventions: a `hearth_` prefix, `_total` on counters,
`_seconds` and `_bytes` in base units. Every label has a bounded set of values — a configured
model or provider, a route template, a status from a fixed list, a configured tool group — and
never a user, chat, message or request id.

A gauge of this process's own state (turns running, live readers, MCP servers by status) is
summed over the live processes (`livesum`): a worker that stops sets its share to zero, and a
worker starting forgets the shares of processes that are gone (killed ones included), as
`mark_process_dead` would. The ingestion queue is the database's, the same whichever worker counts
it: the worker answering a scrape sets it (`mostrecent`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

TIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""Seconds, from a cached page to a long model answer."""

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


class Reporter:
    """What the rest of hearth reports. This one drops every report (metrics are off);
    `Metrics` records them."""

    enabled = False

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        pass

    def turn_started(self) -> None:
        pass

    def turn_finished(self, status: str) -> None:
        pass

    def model_request(
        self,
        provider: str,
        model: str,
        outcome: str,
        seconds: float,
        first_token_seconds: float | None,
        tokens: Mapping[str, int],
    ) -> None:
        pass

    def tool_call(self, group: str, status: str) -> None:
        pass

    def mcp_servers(self, by_status: Mapping[str, int]) -> None:
        pass

    def upload(self, size: int) -> None:
        pass

    def live_readers(self, change: int) -> None:
        pass

    def quota_refused(self, quota: str) -> None:
        pass


NO_METRICS = Reporter()

MCP_STATUSES = ("starting", "available", "unavailable")


@contextlib.contextmanager
def serving_directory(*, enabled: bool) -> Iterator[None]:
    """The directory of one `hearth serve` and its workers: `PROMETHEUS_MULTIPROC_DIR` emptied
    of an earlier run's values, or a new one removed after."""
    if not enabled:
        yield
        return
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
        yield
        return
    made = tempfile.mkdtemp(prefix="hearth-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    try:
        yield
    finally:
        shutil.rmtree(made, ignore_errors=True)


def multiprocess_dir() -> Path:
    """The directory every process of this hearth writes its values to, made if none is set."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        path = tempfile.mkdtemp(prefix="hearth-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    from prometheus_client import values

    # The value class is chosen when prometheus-client is first imported; a process that
    # imported it before the directory was known is switched here, before any metric exists.
    if not getattr(values.ValueClass, "_multiprocess", False):
        values.ValueClass = values.MultiProcessValue()
    return Path(path)


class Metrics(Reporter):
    """The metrics of one process, written where every worker's are summed."""

    enabled = True

    def __init__(self) -> None:
        self.directory = multiprocess_dir()
        forget_dead_processes(self.directory)
        from prometheus_client import Counter, Gauge, Histogram

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return Counter(name, doc, labels, registry=None)

        def histogram(name: str, doc: str, labels: tuple[str, ...]) -> Any:
            return Histogram(name, doc, labels, buckets=TIME_BUCKETS, registry=None)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = (), mode: str = "livesum") -> Any:
            return Gauge(name, doc, labels, multiprocess_mode=mode, registry=None)  # type: ignore[arg-type]

        self._http = counter(
            "hearth_http_requests_total",
            "HTTP requests answered, by method, route template and status code.",
            ("method", "route", "status"),
        )
        self._http_seconds = histogram(
            "hearth_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer (a stream's last byte).",
            ("method", "route"),
        )
        self._turns_started = counter("hearth_turns_started_total", "Turns started.")
        self._turns_finished = counter(
            "hearth_turns_finished_total",
            "Turns finished, by how they ended: ok, stopped, failed, incomplete, interrupted.",
            ("status",),
        )
        self._turns_running = gauge("hearth_turns_running", "Turns running now.")
        self._model_requests = counter(
            "hearth_model_requests_total",
            "Requests to model providers, by provider, model and outcome (ok, error, cancelled).",
            ("provider", "model", "outcome"),
        )
        self._model_seconds = histogram(
            "hearth_model_request_duration_seconds",
            "Time from sending a model request to the end of its response.",
            ("provider", "model"),
        )
        self._first_token = histogram(
            "hearth_model_time_to_first_token_seconds",
            "Time from sending a streamed model request to its first part.",
            ("provider", "model"),
        )
        self._tokens = counter(
            "hearth_model_tokens_total",
            "Tokens of model requests, by model and kind (input, output, cache_read, "
            "cache_write); input includes the cached tokens, as providers report it.",
            ("model", "kind"),
        )
        self._tool_calls = counter(
            "hearth_tool_calls_total",
            "Tool calls finished, by tool group and status (done, failed, rejected).",
            ("group", "status"),
        )
        self._mcp = gauge(
            "hearth_mcp_servers",
            "MCP server connections by status, summed over the worker processes.",
            ("status",),
        )
        self._uploads = counter("hearth_uploads_total", "Files uploaded.")
        self._upload_bytes = counter("hearth_upload_bytes_total", "Bytes of the files uploaded.")
        self._live = gauge("hearth_live_readers", "Readers following a running turn's stream.")
        self._quota = counter(
            "hearth_quota_refusals_total",
            "Turns refused or ended by a quota, by quota (daily_tokens, monthly_cost).",
            ("quota",),
        )
        self._ingestion = gauge(
            "hearth_ingestion_queue_length",
            "Uploaded documents waiting to be made searchable.",
            mode="mostrecent",
        )

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self._http.labels(method, route, str(status)).inc()
        self._http_seconds.labels(method, route).observe(seconds)

    def turn_started(self) -> None:
        self._turns_started.inc()
        self._turns_running.inc()

    def turn_finished(self, status: str) -> None:
        self._turns_finished.labels(status).inc()
        self._turns_running.dec()

    def model_request(
        self,
        provider: str,
        model: str,
        outcome: str,
        seconds: float,
        first_token_seconds: float | None,
        tokens: Mapping[str, int],
    ) -> None:
        self._model_requests.labels(provider, model, outcome).inc()
        self._model_seconds.labels(provider, model).observe(seconds)
        if first_token_seconds is not None:
            self._first_token.labels(provider, model).observe(first_token_seconds)
        for kind in TOKEN_KINDS:
            if amount := tokens.get(kind, 0):
                self._tokens.labels(model, kind).inc(amount)

    def tool_call(self, group: str, status: str) -> None:
        self._tool_calls.labels(group, status).inc()

    def mcp_servers(self, by_status: Mapping[str, int]) -> None:
        for status in MCP_STATUSES:
            self._mcp.labels(status).set(by_status.get(status, 0))

    def upload(self, size: int) -> None:
        self._uploads.inc()
        self._upload_bytes.inc(size)

    def live_readers(self, change: int) -> None:
        self._live.inc(change)

    def quota_refused(self, quota: str) -> None:
        self._quota.labels(quota).inc()

    def ingestion_queue(self, length: int) -> None:
        self._ingestion.set(length)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """Every live and past worker's values, summed, and their media type: OpenMetrics for a
        scraper that asks for it (Prometheus does), the Prometheus text format otherwise."""
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import choose_encoder
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.directory))
        encode, media_type = choose_encoder(accept)
        return encode(registry), media_type

    def close(self) -> None:
        """This app stops: its share of the live gauges goes. (The files stay: another app in
        this process, as in tests, writes to the same ones.)"""
        self._turns_running.set(0)
        self._live.set(0)
        self.mcp_servers({})


def forget_dead_processes(directory: Path) -> None:
    """Drop the live gauges of processes that are gone, a killed worker's among them."""
    from prometheus_client import multiprocess

    for path in directory.glob("gauge_live*_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, str(directory))
        except PermissionError:
            pass  # another user's live process


def metrics_for(token: object | None) -> Reporter:
    return Metrics() if token else NO_METRICS


def report_model_request(
    reporter: Reporter, row: Mapping[str, Any], first_token_seconds: float | None = None
) -> None:
    """Count a model request from the values of its request-log row (whatever made it: a
    turn's round, a sampling request, a summary), so the two always agree."""
    if not reporter.enabled:
        return
    error = row.get("error")
    outcome = "ok" if error is None else "cancelled" if error == "cancelled" else "error"
    reporter.model_request(
        row["provider"],
        row["model"],
        outcome,
        row["duration_ms"] / 1000,
        first_token_seconds,
        {kind: row.get(f"{kind}_tokens") or 0 for kind in TOKEN_KINDS},
    )
