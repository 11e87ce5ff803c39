"""What request-time compaction saves on a long chat with large tool results, and what it costs.

hearth sends an earlier question's tool returns of 1,000 characters or more as one-line receipts
(`app/agent/capabilities/compaction.py`), in the outgoing request only;
`HEARTH_COMPACT_TOOL_RETURNS=false` (`Settings.compact_tool_returns`) sends
the history untouched. This script measures both sides.

(1) Input tokens. One scripted 30-turn chat is run twice through hearth's real request path,
    once with compaction off and once with it on, in the same process: hearth runs here
    (`create_app`, migrated SQLite in a temporary folder, uvicorn on a loopback port), a user
    registers and signs in over HTTP, and each turn's user message is posted to
    `POST /api/chats/{id}/messages`, its stream read to the end and the chat polled until idle.
    The two runs are two chats of that user; between them only `services.settings` changes
    (`model_copy(update={"compact_tool_returns": ...})`). The provider is the fake OpenAI server
    of `tests/fakes`, which records every request body and checks it against the SDK's request
    types. The model (`oai/gpt-4.1`) has a context window of 1,000,000 tokens, so no summary
    interrupts the chat (the fake's own usage estimate stays far below the 60 % threshold; the
    script checks that each turn sent exactly the requests it scripted).

    Every turn, the model calls one tool whose result is 5,000-20,000 characters, then answers
    with a short paragraph: 2 requests a turn (3 in the turn that also activates a group). The
    user has the benchmark catalogue of `bench/_catalogue.py` (10 MCP groups, as in
    `bench/tool_economy.py`), so the system prompt carries its table. 24 turns read a file of
    the user's with `read_file`: application log excerpts, markdown documents (runbooks, a
    postmortem, design notes) and CSV exports, written into the user's file root before the
    chat. 6 turns call a Jira tool (`search_issues`, `get_issue`, `list_comments`) through a
    replaced `services.group_call`, which answers with Jira-shaped JSON; the first of them
    activates the `jira` group first. Everything is generated from a fixed seed, sizes drawn
    uniformly so that each tool return, as the model receives it (`read_file` numbers the
    lines), falls between 5,000 and 20,000 characters; the script measures those sizes on the
    wire. Questions and answers are templated from each result (time ranges, counts, the worst
    figures), so the answers stay short and specific, as a model's would.

    Input tokens of a request = characters of the compact JSON of the recorded body's `messages`
    (system prompt, conversation, dynamic tail), divided by 4: one approximation for both runs,
    not any provider's tokenizer (the fake's reported usage is no tokenizer either). The tool
    definitions are left out; they are the same in both runs and their size is printed.
    Target: at least 40 % fewer input tokens per request with compaction on (mean over the
    chat's requests; with the same requests in both runs, the total falls by the same share).

(2) The builder's added cost. A 500-message chat is built in memory as `StoredMessage` and
    `StoredToolCall` rows (`app/agent/rows.py`), the shape the recorder stores: for each of 166
    answered questions a user message, an assistant round with one tool call whose result is
    5,000-20,000 characters (generated like those of (1)) and an assistant answer; then the
    question in progress, its user message and a round with a tool call (500 messages). Assistant
    rows carry `provider_details.response` as the recorder stores it; the same rows without it
    (rebuilt from columns, as for older rows) are timed too and held to the same target, but
    the summary's verdict is the one for the rows as recorded. Timed in this process, alternately
    so that drift falls on both alike: (a) `build_history(rows)`; (b) `build_history(rows)` then
    `compact_earlier_returns(history, question_id=<the last user message id>)`; and, to show
    the compaction on its own, (c) `compact_earlier_returns` on a history built once. Each is
    warmed up first, then run `--repeats` times (200) with `time.perf_counter_ns`; the garbage
    collector is off during the timed loop (collected before it): with it on, a full collection
    of the chat's objects now and then adds about 200 ms to one sample; the medians hardly move.
    Reported: median and p90 in ms, and the ratio of (b) to (a).
    Target: median (b) / median (a) <= 1.2 for the rows as recorded today.

    In a turn, the builder runs once and the compaction once before every model request (it is
    a `prepare_model_request` capability), so a turn of two requests compacts twice; the report
    gives that figure too, without a target.

Exit status 0 either way: this is a measurement, and its verdicts are printed.

    .venv/bin/python bench/compaction.py
    .venv/bin/python bench/compaction.py --repeats 500 --json figures.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import random
import secrets
import statistics
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from _catalogue import build_catalogue
from _figures import add_json_option, write_figures
from pydantic_ai.messages import (
    FinishReason,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.usage import RequestUsage

from app.agent.capabilities.compaction import MIN_CHARS, compact_earlier_returns
from app.agent.history import build_history
from app.agent.rows import StoredMessage, StoredToolCall
from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.files.roots import user_root
from app.llm.registry import ModelRegistry
from app.main import create_app
from app.settings import Settings
from tests.fakes.providers import FakeOpenAI, FakeProviderServer, Reply, ToolCall
from tests.support import Client, live_server, parse_stream, wait_until_idle

ROOT = Path(__file__).resolve().parents[1]
SEED = 20_240_611
KEY_ENV = "HEARTH_BENCH_PROVIDER_KEY"
MODEL = "oai/gpt-4.1"
PROVIDER_MODEL = "gpt-4.1"
CONTEXT_WINDOW = 1_000_000
TURNS = 30
MIN_RETURN = 5_000
MAX_RETURN = 20_000
LINE_MARGIN = 200
"""No generated line is longer, so a file whose target is drawn below `MAX_RETURN - LINE_MARGIN`
stays within bounds once its last line is added."""
ITEM_MARGIN = 1_000
"""The same for an item of a Jira answer (an issue or a comment, indented JSON)."""
REDUCTION_TARGET = 0.40
OVERHEAD_TARGET = 1.2
CHAT_MESSAGES = 500
RECEIPT_MARK = "from an earlier question, not shown"

# ============================================================================================
# Generated tool results: log excerpts, markdown documents, CSV exports, Jira JSON.
# ============================================================================================


def numbered(lines: Sequence[str]) -> str:
    """The text `read_file` answers for a file of `lines` (numbered, tab-separated)."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1))


def grow_lines(target: int, make: Callable[[int], list[str]]) -> list[str]:
    """Lines from `make(index)` until `read_file`'s answer reaches `target` characters."""
    lines: list[str] = []
    size = -1  # no newline before the first line
    while size < target:
        for line in make(len(lines)):
            lines.append(line)
            size += 8 + len(line)  # "%6d\t" and the newline
    return lines


def draw_target(rng: random.Random, margin: int = LINE_MARGIN) -> int:
    return rng.randint(MIN_RETURN, MAX_RETURN - margin)


def hexid(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def order_id(rng: random.Random) -> str:
    return "ord_" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(8))


SERVICES = (
    "payments-worker",
    "checkout-api",
    "ledger-sync",
    "gateway-proxy",
    "refund-worker",
    "webhook-relay",
)
GATEWAYS = ("adyen", "stripe", "worldpay")
REGIONS = ("eu-west-1", "eu-central-1", "us-east-1")

LOG_LINES: dict[str, tuple[str, ...]] = {
    "INFO": (
        "capture ok order={order} amount={amount} EUR gateway={gateway} took={ms}ms",
        "GET /api/orders/{order} 200 {small}ms",
        "POST /api/checkout/{order}/confirm 201 {ms}ms",
        "webhook delivered event=payment.captured id=evt_{hex} attempt=1 took={small}ms",
        "ledger batch committed entries={count} lag={small}ms",
        "refund queued order={order} amount={amount} EUR reason=requested_by_customer",
    ),
    "WARN": (
        "gateway slow: capture took {ms}ms (threshold 3000ms) order={order} gateway={gateway}",
        "retrying capture order={order} attempt={attempt} after GatewayTimeout",
        "connection pool at {pct}% of 50 (waiting={attempt})",
        "webhook endpoint answered 503, next attempt in {attempt}0s id=evt_{hex}",
    ),
    "ERROR": (
        "capture timed out after 8000ms order={order} attempt={attempt} gateway={gateway}",
        "ledger write failed: deadlock detected on ledger_entries (order={order})",
        "refund re_{hex} rejected by gateway: insufficient balance order={order}",
        "unhandled GatewayTimeout in capture_order trace={hex}{hex}",
    ),
    "DEBUG": (
        "idempotency key capture:{order}:{attempt}",
        "cache miss merchant=m_{hex} key=fees:{gateway}",
    ),
}
ERROR_KINDS = (
    "capture timeouts",
    "ledger deadlocks",
    "rejected refunds",
    "unhandled gateway timeouts",
)
ERROR_READING = {
    "capture timeouts": "Those are captures that ran into the 8 s gateway limit; each was "
    "retried with the same idempotency key, so none should have been charged twice.",
    "ledger deadlocks": "The deadlocks all hit ledger_entries while a batch commit ran, which "
    "points at the batch size rather than at the gateway.",
    "rejected refunds": "The gateway turned the refunds down for insufficient balance, so this "
    "is a funding question for finance, not a code fault.",
    "unhandled gateway timeouts": "Those escaped the retry loop altogether, which is worth a "
    "ticket: the traces show where capture_order lets the exception through.",
}


@dataclass(frozen=True)
class LogFacts:
    first: str
    last: str
    middle: str
    lines: int
    levels: Counter[str]
    top_service: str
    top_service_errors: int
    top_kind: str


def log_excerpt(rng: random.Random, target: int, start: datetime) -> tuple[list[str], LogFacts]:
    clock = [start]
    errors: Counter[tuple[str, str]] = Counter()
    levels: Counter[str] = Counter()
    # Each excerpt has a service in trouble, as an excerpt someone asks about would.
    troubled = rng.choice(SERVICES)

    def make(_index: int) -> list[str]:
        clock[0] += timedelta(milliseconds=rng.randint(40, 4000))
        level = rng.choices(("INFO", "WARN", "ERROR", "DEBUG"), (70, 15, 8, 7))[0]
        service = troubled if level in ("WARN", "ERROR") and rng.random() < 0.6 else None
        service = service or rng.choice(SERVICES)
        which = rng.randrange(len(LOG_LINES[level]))
        message = LOG_LINES[level][which].format(
            order=order_id(rng),
            amount=f"{rng.randint(5, 900)}.{rng.randint(0, 99):02d}",
            gateway=rng.choice(GATEWAYS),
            ms=rng.randint(120, 7900),
            small=rng.randint(3, 180),
            hex=hexid(rng, 12),
            count=rng.randint(20, 500),
            attempt=rng.randint(1, 3),
            pct=rng.randint(60, 98),
        )
        levels[level] += 1
        if level == "ERROR":
            errors[(service, ERROR_KINDS[which])] += 1
        at = clock[0]
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S") + f".{at.microsecond // 1000:03d}Z"
        return [f"{stamp} {level:<5} {service}[{rng.randint(1, 4)}] {message}"]

    lines = grow_lines(target, make)
    by_service: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for (service, kind), n in errors.items():
        by_service[service] += n
        by_kind[kind] += n
    top_service, top_errors = by_service.most_common(1)[0] if by_service else ("none", 0)
    top_kind = by_kind.most_common(1)[0][0] if by_kind else ERROR_KINDS[0]
    return lines, LogFacts(
        first=lines[0][11:19],
        last=lines[-1][11:19],
        middle=lines[len(lines) // 2][11:16],
        lines=len(lines),
        levels=levels,
        top_service=top_service,
        top_service_errors=top_errors,
        top_kind=top_kind,
    )


SENTENCES = (
    "Captures go through {service}, which calls the {gateway} gateway with an 8 s timeout.",
    "Every capture carries an idempotency key built from the order id and the payment attempt.",
    "A retried capture sends the same key, so the gateway answers with the first result.",
    "The ledger is written by {service} in batches of up to {count} entries.",
    "On-call checks the capture.attempts dashboard first; a rise above {pct} per minute pages.",
    "Settlement reports are produced nightly at 02:00 UTC from the ledger, not from the gateway.",
    "Refunds are queued by {service} and sent to the gateway within {count} seconds.",
    "Webhook deliveries are retried for 24 hours with backoff, then parked for manual replay.",
    "p99 capture latency was {ms} ms in {region} during the busiest hour of the week.",
    "The connection pool of {service} holds 50 connections; the pool alarm fires at {pct} %.",
    "We agreed to keep the old capture path behind CAPTURE_V1 until 2.4 has run a week.",
    "Finance asked for the settlement report to be checked with retried captures included.",
    "Support needs the idempotency key format to answer merchants' questions about retries.",
    "The gateway timeout of 8 s stays until the payments team has reviewed the p99 figures.",
    "A backfill of ledger_entries.amount runs in chunks of {count} rows to keep locks short.",
    "Alerts for {service} go to #payments-oncall and page the primary after five minutes.",
)
DOCS = (
    ("docs/runbook-capture-retries.md", "Runbook: capture retries"),
    ("docs/postmortem-0611-capture-timeouts.md", "Postmortem: capture timeouts on 11 June"),
    ("docs/design-idempotency-keys.md", "Design: idempotency keys for captures"),
    ("docs/adr-014-ledger-numeric-amounts.md", "ADR 14: ledger amounts as numeric(14,2)"),
    ("docs/runbook-webhook-backlog.md", "Runbook: webhook backlog"),
    ("docs/oncall-handbook-payments.md", "On-call handbook: payments"),
)
SECTIONS = (
    "Summary",
    "Context",
    "How it works",
    "Steps",
    "Risks",
    "Decisions",
    "Open questions",
    "Appendix: commands",
)


@dataclass(frozen=True)
class DocFacts:
    title: str
    sections: list[str]
    summary: str
    decisions: int
    open_questions: int


def sentence(rng: random.Random) -> str:
    return rng.choice(SENTENCES).format(
        service=rng.choice(SERVICES),
        gateway=rng.choice(GATEWAYS),
        count=rng.randint(5, 60) * 10,
        pct=rng.randint(5, 95),
        ms=rng.randint(900, 6200),
        region=rng.choice(REGIONS),
    )


def markdown_doc(rng: random.Random, target: int, title: str) -> tuple[list[str], DocFacts]:
    sections: list[str] = []
    bullets: Counter[str] = Counter()
    first_sentence: list[str] = []

    def make(index: int) -> list[str]:
        if index == 0:
            return [f"# {title}", "", "Owner: payments team. Last reviewed 2024-06-12."]
        if not sections or rng.random() < 0.12:
            name = SECTIONS[len(sections) % len(SECTIONS)]
            if len(sections) >= len(SECTIONS):
                name = f"{name} ({len(sections) // len(SECTIONS) + 1})"
            sections.append(name)
            return ["", f"## {name}", ""]
        current = sections[-1]
        if current.startswith(("Decisions", "Open questions", "Steps")) or rng.random() < 0.25:
            bullets[current.split(" (")[0]] += 1
            return [f"- {sentence(rng)}"]
        text = sentence(rng)
        if not first_sentence:
            first_sentence.append(text)
        return [text]

    lines = grow_lines(target, make)
    return lines, DocFacts(
        title=title,
        sections=sections,
        summary=first_sentence[0] if first_sentence else "",
        decisions=bullets["Decisions"],
        open_questions=bullets["Open questions"],
    )


CSV_HEADER = "timestamp,region,gateway,requests,p50_ms,p99_ms,errors,timeouts"


@dataclass(frozen=True)
class CsvFacts:
    rows: int
    first: str
    last: str
    worst_p99: int
    worst_at: str
    worst_region: str
    timeouts: int
    requests: int


def csv_export(rng: random.Random, target: int, start: datetime) -> tuple[list[str], CsvFacts]:
    worst = (0, "", "")
    totals = [0, 0]

    def make(index: int) -> list[str]:
        nonlocal worst
        if index == 0:
            return [CSV_HEADER]
        at = start + timedelta(minutes=5 * ((index - 1) // len(REGIONS)))
        region = REGIONS[(index - 1) % len(REGIONS)]
        requests = rng.randint(800, 5200)
        p50 = rng.randint(180, 420)
        p99 = rng.randint(1800, 4200) if rng.random() < 0.9 else rng.randint(5000, 8000)
        timeouts = rng.randint(0, 3) if p99 < 5000 else rng.randint(4, 40)
        errors = timeouts + rng.randint(0, 6)
        totals[0] += requests
        totals[1] += timeouts
        if p99 > worst[0]:
            worst = (p99, at.strftime("%H:%M"), region)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        gateway = GATEWAYS[index % len(GATEWAYS)]
        return [f"{stamp},{region},{gateway},{requests},{p50},{p99},{errors},{timeouts}"]

    lines = grow_lines(target, make)
    return lines, CsvFacts(
        rows=len(lines) - 1,
        first=lines[1][11:16],
        last=lines[-1][11:16],
        worst_p99=worst[0],
        worst_at=worst[1],
        worst_region=worst[2],
        timeouts=totals[1],
        requests=totals[0],
    )


PEOPLE = ("Dana Kowalski", "Priya Shah", "Tomasz Wójcik", "Li Wei", "Amara Okafor", "Jonas Berg")
ISSUE_SUMMARIES = (
    "Capture retries double-count in the settlement report",
    "Document the idempotency key format for support",
    "Migrate ledger_entries.amount to numeric(14,2)",
    "Webhook relay parks events after 24 h without alerting",
    "Refund worker ignores gateway rate limits",
    "Capture latency alarm fires on single slow requests",
    "Ledger batch commit deadlocks under load",
    "Remove the CAPTURE_V1 code path",
    "Gateway timeout should be configurable per merchant",
    "Dashboard for capture.attempts per gateway",
)
STATUSES = ("To Do", "In Progress", "In Review", "Done")


def june_time(rng: random.Random) -> str:
    return f"2024-06-{rng.randint(1, 12):02d}T{rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:00Z"


def jira_issue(rng: random.Random, number: int) -> dict[str, Any]:
    key = f"PAY-{number}"
    return {
        "key": key,
        "summary": rng.choice(ISSUE_SUMMARIES),
        "status": rng.choice(STATUSES),
        "priority": rng.choice(("High", "Medium", "Low")),
        "assignee": rng.choice(PEOPLE),
        "labels": rng.sample(("payments", "ledger", "release-2.4", "oncall", "gateway"), 2),
        "updated": june_time(rng),
        "description": sentence(rng),
        "url": f"https://acme.atlassian.net/browse/{key}",
    }


def jira_comment(rng: random.Random, number: int) -> dict[str, Any]:
    return {
        "id": str(93_000 + number),
        "author": rng.choice(PEOPLE),
        "created": june_time(rng),
        "body": sentence(rng),
    }


def grow_json(target: int, base: dict[str, Any], key: str, make: Callable[[int], Any]) -> str:
    """`base` with items `make(i)` appended under `key` until its JSON reaches `target`."""
    items: list[Any] = []
    payload = {**base, key: items}
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    while len(text) < target:
        items.append(make(len(items)))
        text = json.dumps(payload, indent=2, ensure_ascii=False)
    return text


# ============================================================================================
# The chat: 30 turns, one large tool result each.
# ============================================================================================


@dataclass(frozen=True)
class Step:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    number: int
    user: str
    steps: tuple[Step, ...]
    answer: str
    label: str
    """What the turn's large result is, for the tables."""
    file: tuple[str, str] | None = None
    """(path, content) of the file `read_file` reads, written before the chat."""
    result: str | None = None
    """What the group tool answers."""


LOG_QUESTIONS = (
    "Can you look at {path} and tell me what went wrong around {middle}?",
    "We got paged at {middle}. Anything alarming in {path}?",
    "Please go through {path}: which service is failing, and how often?",
)
DOC_QUESTIONS = (
    "What does {path} say, in short? I need the gist before the review.",
    "Read {path} for me: what was decided, and what is still open?",
)
CSV_QUESTIONS = (
    "What does {path} show? Where is the worst p99, and how many timeouts?",
    "Check {path}: was latency within our targets, region by region?",
)


def log_turn(number: int, rng: random.Random, index: int) -> Turn:
    start = datetime(2024, 6, 11, 6, 0, tzinfo=UTC) + timedelta(minutes=47 * index)
    path = f"logs/{rng.choice(SERVICES)}-{start:%Y%m%dT%H%M}.log"
    lines, f = log_excerpt(rng, draw_target(rng), start)
    question = LOG_QUESTIONS[index % len(LOG_QUESTIONS)].format(path=path, middle=f.middle)
    answer = (
        f"The excerpt runs from {f.first} to {f.last} UTC, {f.lines} lines. It has "
        f"{f.levels['ERROR']} errors and {f.levels['WARN']} warnings; {f.top_service} logged "
        f"the most errors ({f.top_service_errors}), and the commonest kind is {f.top_kind}. "
        f"{ERROR_READING[f.top_kind]}"
    )
    return Turn(
        number,
        question,
        (Step("read_file", {"path": path}),),
        answer,
        path,
        file=(path, "\n".join(lines) + "\n"),
    )


def doc_turn(number: int, rng: random.Random, index: int) -> Turn:
    path, title = DOCS[index % len(DOCS)]
    lines, f = markdown_doc(rng, draw_target(rng), title)
    question = DOC_QUESTIONS[index % len(DOC_QUESTIONS)].format(path=path)
    names = ", ".join(name for name in f.sections[:5])
    answer = (
        f'"{f.title}" has {len(f.sections)} sections ({names}, ...). In short: {f.summary} '
        f"Its decisions list has {f.decisions} entries and {f.open_questions} questions are "
        "still open; the open ones are mostly about the gateway timeout and the settlement "
        "report, so those are the ones to bring to the review."
    )
    return Turn(
        number,
        question,
        (Step("read_file", {"path": path}),),
        answer,
        path,
        file=(path, "\n".join(lines) + "\n"),
    )


def csv_turn(number: int, rng: random.Random, index: int) -> Turn:
    start = datetime(2024, 6, 3, tzinfo=UTC) + timedelta(days=index)
    path = f"data/gateway-latency-{start:%Y-%m-%d}.csv"
    lines, f = csv_export(rng, draw_target(rng), start)
    question = CSV_QUESTIONS[index % len(CSV_QUESTIONS)].format(path=path)
    rate = f.timeouts / f.requests * 100 if f.requests else 0.0
    answer = (
        f"{f.rows} rows, 5-minute buckets from {f.first} to {f.last} UTC across "
        f"{len(REGIONS)} regions. The worst p99 is {f.worst_p99:,} ms at {f.worst_at} in "
        f"{f.worst_region}; {f.timeouts} timeouts in {f.requests:,} requests ({rate:.3f} %). "
        "Outside the few spikes p99 stays under 4.2 s, so the 8 s timeout has headroom, but the "
        "spikes are where the retries come from."
    )
    return Turn(
        number,
        question,
        (Step("read_file", {"path": path}),),
        answer,
        path,
        file=(path, "\n".join(lines) + "\n"),
    )


def jira_turn(number: int, rng: random.Random, index: int, activate: bool) -> Turn:
    target = draw_target(rng, ITEM_MARGIN)
    kind = index % 3
    if kind == 0:
        query = (
            "project = PAY AND statusCategory != Done AND labels in (payments, ledger) "
            f"AND updated >= -{7 + index}d ORDER BY priority DESC"
        )
        step = Step("mcp__jira__search_issues", {"query": query, "limit": 50})
        base: dict[str, Any] = {"jql": query, "total": rng.randint(60, 140), "next_cursor": "50"}
        result = grow_json(target, base, "issues", lambda i: jira_issue(rng, 2200 + 7 * i))
        question = "Which PAY issues changed this week that are not done yet?"
        shown = json.loads(result)["issues"]
        high = sum(1 for issue in shown if issue["priority"] == "High")
        answer = (
            f"{len(shown)} open PAY issues changed this week, {high} of them high priority. "
            "Most are about capture retries and the ledger; the settlement double count and the "
            "ledger deadlocks are the two I would look at first, since both touch the release."
        )
    elif kind == 1:
        key = f"PAY-{2270 + index}"
        step = Step("mcp__jira__get_issue", {"issue_key": key})
        base = {**jira_issue(rng, 2270 + index), "key": key, "watchers": 6}
        result = grow_json(target, base, "comments", lambda i: jira_comment(rng, 10 * index + i))
        question = f"Catch me up on {key}: where does it stand and who said what?"
        comments = json.loads(result)["comments"]
        authors = Counter(c["author"] for c in comments).most_common(2)
        answer = (
            f"{key} has {len(comments)} comments; most come from {authors[0][0]} and "
            f"{authors[-1][0]}. The thread agrees on the cause and is waiting on the gateway "
            "timeout review; nobody has objected to the proposed fix."
        )
    else:
        key = f"PAY-{2280 + index}"
        step = Step("mcp__jira__list_comments", {"issue_key": key, "limit": 100})
        base = {"issue_key": key, "next_cursor": None}
        result = grow_json(target, base, "comments", lambda i: jira_comment(rng, 20 * index + i))
        question = f"Summarise the discussion on {key}."
        comments = json.loads(result)["comments"]
        answer = (
            f"The {len(comments)} comments on {key} go back and forth on the retry limits; the "
            "last few settle on three attempts with backoff and a dashboard per gateway, and "
            "ask support to be told about the idempotency key format."
        )
    steps = (Step("activate_tools", {"groups": ["jira"]}), step) if activate else (step,)
    label = f"{step.tool.removeprefix('mcp__jira__')} ({'JQL' if kind == 0 else key})"
    return Turn(number, question, steps, answer, label, result=result)


def build_chat(turns: int = TURNS, seed: int = SEED) -> list[Turn]:
    """The script: every 5th turn from the 3rd calls Jira; the others read a file."""
    rng = random.Random(seed)
    chat: list[Turn] = []
    counts: Counter[str] = Counter()
    files = ("log", "doc", "log", "csv")
    for number in range(1, turns + 1):
        jira = number % 5 == 3
        kind = "jira" if jira else files[(number - 1 - counts["jira"]) % len(files)]
        index = counts[kind]
        counts[kind] += 1
        if kind == "jira":
            chat.append(jira_turn(number, rng, index, activate=index == 0))
        elif kind == "log":
            chat.append(log_turn(number, rng, index))
        elif kind == "doc":
            chat.append(doc_turn(number, rng, index))
        else:
            chat.append(csv_turn(number, rng, index))
    return chat


# ============================================================================================
# Running hearth against the fake, twice.
# ============================================================================================

_ALNUM = string.ascii_letters + string.digits


class CallIds:
    """OpenAI-style tool call ids, the same sequence for both runs."""

    def __init__(self) -> None:
        self.rng = random.Random(f"{SEED}-calls")

    def next(self) -> str:
        return "call_" + "".join(self.rng.choice(_ALNUM) for _ in range(24))


def providers_yaml(fake: FakeProviderServer) -> str:
    return f"""\
providers:
  - id: oai
    kind: openai
    base_url: {fake.base_url}
    api_key_env: {KEY_ENV}
    models:
      - id: {PROVIDER_MODEL}
        context_window: {CONTEXT_WINDOW}
        max_output_tokens: 4096
"""


@dataclass
class Sent:
    """One recorded request."""

    turn: int
    messages: list[dict[str, Any]]
    tools_chars: int


@dataclass
class Run:
    compact: bool
    requests: list[Sent] = field(default_factory=list)
    call_ids: dict[int, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def run_chat(user: Client, fake: FakeProviderServer, chat: Sequence[Turn], run: Run) -> None:
    started = time.monotonic()
    ids = CallIds()
    created = await user.post("/api/chats", json={"model": MODEL})
    if created.status_code != 201:
        raise SystemExit(f"creating a chat answered {created.status_code}")
    chat_id = created.json()["id"]
    for turn in chat:
        before = len(fake.model_requests)
        calls = [ids.next() for _ in turn.steps]
        run.call_ids[turn.number] = calls
        fake.script(
            *(
                Reply(tool_calls=[ToolCall(step.tool, step.arguments, id=call)])
                for step, call in zip(turn.steps, calls, strict=True)
            ),
            Reply(text=turn.answer),
        )
        response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": turn.user})
        chunks = parse_stream(response.text) if response.status_code == 200 else []
        errors = [c for c in chunks if c["type"] in ("error", "tool-output-error")]
        if response.status_code != 200 or errors:
            raise SystemExit(f"turn {turn.number}: {response.status_code} {errors}")
        await wait_until_idle(user, chat_id, within=30)
        sent = fake.model_requests[before:]
        if fake.pending or len(sent) != len(turn.steps) + 1:
            raise SystemExit(
                f"turn {turn.number}: {len(sent)} requests (expected {len(turn.steps) + 1}), "
                f"{fake.pending} scripted replies left"
            )
        for request in sent:
            if request.validation_error is not None:
                raise SystemExit(f"turn {turn.number}: invalid body: {request.validation_error}")
            body = request.body
            tools = compact_json(body.get("tools") or [])
            run.requests.append(Sent(turn.number, body["messages"], len(tools)))
    run.seconds = time.monotonic() - started


async def record_runs(chat: Sequence[Turn]) -> tuple[Run, Run, str]:
    """The chat with compaction off, then on, through one hearth app; and hearth's settings."""
    catalogue, _groups = build_catalogue()
    results = {
        compact_json(turn.steps[-1].arguments): turn.result
        for turn in chat
        if turn.result is not None
    }

    async def group_call(group: str, tool: str, arguments: dict[str, Any]) -> str:
        result = results.get(compact_json(arguments))
        if result is None:
            raise SystemExit(f"the script has no result for {tool} {arguments}")
        return result

    fake = FakeOpenAI(flavour="openai")
    await fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="hearth-compaction-") as folder:
            work = Path(folder)
            url = f"sqlite+aiosqlite:///{work / 'hearth.db'}"
            engine = create_engine(url)
            await upgrade(engine)
            await engine.dispose()
            providers = work / "providers.yaml"
            providers.write_text(providers_yaml(fake))
            settings = Settings(
                _env_file=None,
                database_url=url,
                data_dir=work / "data",
                secret_key="bench-" + secrets.token_hex(16),
                providers_file=providers,
                mcp_file=ROOT / "config" / "mcp.yaml",
            )
            app = create_app(settings)
            services = app.state.services
            services.registry = ModelRegistry(
                ModelRegistry.from_file(providers).providers, env={KEY_ENV: "bench-key"}
            )
            services.catalogue = catalogue
            services.group_call = group_call
            shown = f"summary threshold {services.settings.compact_threshold} of it"
            async with (
                live_server(app) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=60) as http,
            ):
                email = f"dana-{secrets.token_hex(4)}@example.com"
                response = await http.post(
                    "/api/auth/register", json={"email": email, "password": "correct horse"}
                )
                if response.status_code != 201:
                    raise SystemExit(f"registering answered {response.status_code}")
                user = Client(http, user=response.json())
                root = user_root(settings.data_dir, user.user["id"])
                for turn in chat:
                    if turn.file is not None:
                        target = root / turn.file[0]
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(turn.file[1])
                runs = (Run(compact=False), Run(compact=True))
                for run in runs:
                    services.settings = services.settings.model_copy(
                        update={"compact_tool_returns": run.compact}
                    )
                    await run_chat(user, fake, chat, run)
    finally:
        await fake.stop()
    return runs[0], runs[1], shown


# ============================================================================================
# Figures of (1).
# ============================================================================================


def tokens(chars: int) -> int:
    return round(chars / 4)


def message_chars(sent: Sent) -> int:
    return len(compact_json(sent.messages))


def tool_messages(sent: Sent) -> dict[str, str]:
    return {
        m["tool_call_id"]: m["content"] if isinstance(m.get("content"), str) else ""
        for m in sent.messages
        if m.get("role") == "tool"
    }


@dataclass
class Check:
    receipts: int = 0
    expected_receipts: int = 0
    problems: list[str] = field(default_factory=list)


def check_runs(chat: Sequence[Turn], off: Run, on: Run) -> tuple[Check, dict[int, int]]:
    """What each run sent: receipts exactly for earlier questions' large returns, when on.

    Also the size of each turn's large result as the model received it (the off run's text).
    """
    check = Check()
    sizes: dict[int, int] = {}
    large_ids = {turn.number: off.call_ids[turn.number][-1] for turn in chat}
    turn_of = {call: number for number, call in large_ids.items()}
    for run in (off, on):
        for index, sent in enumerate(run.requests, 1):
            for call, content in tool_messages(sent).items():
                number = turn_of.get(call)
                if number is None:
                    continue  # the activation's return: small, and never compacted
                is_receipt = RECEIPT_MARK in content and len(content) < MIN_CHARS
                should = run.compact and number < sent.turn
                if not run.compact:
                    sizes.setdefault(number, len(content))
                if should:
                    check.expected_receipts += 1
                    check.receipts += is_receipt
                if is_receipt != should:
                    state = "a receipt" if is_receipt else f"{len(content):,} characters"
                    check.problems.append(
                        f"{'on' if run.compact else 'off'} request {index} (turn {sent.turn}): "
                        f"turn {number}'s return went out as {state}"
                    )
    if off.call_ids != on.call_ids:
        check.problems.append("the two runs used different tool call ids")
    if [s.turn for s in off.requests] != [s.turn for s in on.requests]:
        check.problems.append("the two runs sent different numbers of requests per turn")
    for number in large_ids:
        size = sizes.get(number)
        if size is None or not MIN_RETURN <= size <= MAX_RETURN:
            check.problems.append(f"turn {number}'s result is {size} characters, out of range")
    return check, sizes


def report_one(
    chat: Sequence[Turn], off: Run, on: Run, settings_note: str
) -> tuple[bool, dict[str, Any]]:
    check, sizes = check_runs(chat, off, on)
    tool_sizes = sorted({s.tools_chars for s in off.requests + on.requests})
    values = sorted(sizes.values())
    sample = next(
        (c for c in tool_messages(on.requests[-1]).values() if RECEIPT_MARK in c), "none sent"
    )
    kinds = Counter("jira" if t.result is not None else t.label.split("/")[0] + "/" for t in chat)
    print(
        f"(1) a {len(chat)}-turn chat, compaction off then on: {len(off.requests)} requests each "
        f"({off.seconds:.1f} s, {on.seconds:.1f} s); {MODEL} on the fake\n"
        f"    OpenAI server, context window {CONTEXT_WINDOW:,}, {settings_note}: no summary runs\n"
        f"    tool results {min(values):,}-{max(values):,} characters (mean "
        f"{statistics.mean(values):,.0f}) as received: "
        + ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        + "\n    input tokens = characters of the messages' compact JSON / 4; tool definitions "
        "not counted\n    (the same in both runs: "
        + " / ".join(f"{tokens(c):,}" for c in tool_sizes)
        + f" tokens a request, before / after the jira activation)\n    a receipt: {sample}"
    )
    print(
        f"  {'turn':>4} {'result':<40}{'chars':>7}{'req':>4}{'off mean':>9}{'off total':>10}"
        f"{'on mean':>8}{'on total':>9}{'less':>6}"
    )
    per_turn: list[dict[str, Any]] = []
    for turn in chat:
        off_t = [tokens(message_chars(s)) for s in off.requests if s.turn == turn.number]
        on_t = [tokens(message_chars(s)) for s in on.requests if s.turn == turn.number]
        less = 1 - sum(on_t) / sum(off_t)
        label = turn.label if len(turn.label) <= 40 else turn.label[:37] + "..."
        print(
            f"  {turn.number:>4} {label:<40}{sizes.get(turn.number, 0):>7,}{len(off_t):>4}"
            f"{statistics.mean(off_t):>9,.0f}{sum(off_t):>10,}{statistics.mean(on_t):>8,.0f}"
            f"{sum(on_t):>9,}{less * 100:>5.1f}%"
        )
        per_turn.append(
            {
                "turn": turn.number,
                "result": turn.label,
                "result_chars": sizes.get(turn.number),
                "requests": len(off_t),
                "off_tokens": off_t,
                "on_tokens": on_t,
            }
        )
    off_all = [tokens(message_chars(s)) for s in off.requests]
    on_all = [tokens(message_chars(s)) for s in on.requests]
    mean_off, mean_on = statistics.mean(off_all), statistics.mean(on_all)
    reduction = 1 - mean_on / mean_off
    total_reduction = 1 - sum(on_all) / sum(off_all)
    print(
        f"  {'input tokens':<16}{'requests':>9}{'mean / request':>16}{'total':>12}{'largest':>10}"
    )
    for name, figures in (("compaction off", off_all), ("compaction on", on_all)):
        print(
            f"  {name:<16}{len(figures):>9}{statistics.mean(figures):>16,.0f}"
            f"{sum(figures):>12,}{max(figures):>10,}"
        )
    print(
        f"  {'fewer with it on':<16}{'':>9}{reduction * 100:>15.1f}%{total_reduction * 100:>11.1f}%"
        f"{(1 - max(on_all) / max(off_all)) * 100:>9.1f}%"
    )
    print(
        f"  checked: earlier returns went as receipts when on ({check.receipts} of "
        f"{check.expected_receipts}), never when off; own returns in full"
        if not check.problems
        else f"  CHECK FAILED ({len(check.problems)} problems), first: {check.problems[:3]}"
    )
    passed = reduction >= REDUCTION_TARGET and not check.problems
    print(
        f"  {'PASS' if passed else 'FAIL'}  {reduction * 100:.1f} % fewer input tokens per "
        f"request with compaction on (target >= {REDUCTION_TARGET * 100:.0f} %)"
    )
    dump = {
        "requests": len(off_all),
        "mean_tokens_off": mean_off,
        "mean_tokens_on": mean_on,
        "total_tokens_off": sum(off_all),
        "total_tokens_on": sum(on_all),
        "reduction": reduction,
        "pass": passed,
        "problems": check.problems,
        "turns": per_turn,
    }
    return passed, dump


# ============================================================================================
# (2) The builder's added cost on a 500-message chat.
# ============================================================================================


def long_chat(messages: int, stored_responses: bool, seed: int = SEED) -> list[StoredMessage]:
    """`messages` rows: answered questions of 3 rows each, then the question in progress."""
    if messages % 3 != 2:
        raise ValueError("a chat of 3 rows per answered question plus 2 needs 3n + 2 messages")
    rng = random.Random(f"{seed}-long")
    start = datetime(2024, 6, 1, 8, 0, tzinfo=UTC)
    kinds = ("log", "doc", "log", "csv")
    rows: list[StoredMessage] = []

    def at(index: int) -> datetime:
        return start + timedelta(minutes=3 * index, seconds=rng.random())

    def assistant(
        parts: list[ModelResponsePart], when: datetime, finish: FinishReason
    ) -> dict[str, Any] | None:
        if not stored_responses:
            return None
        response = ModelResponse(
            parts=parts,
            usage=RequestUsage(
                input_tokens=rng.randint(2_000, 90_000), output_tokens=rng.randint(20, 400)
            ),
            model_name=PROVIDER_MODEL,
            timestamp=when,
            provider_name="openai",
            provider_response_id=f"chatcmpl-{hexid(rng, 24)}",
            finish_reason=finish,
        )
        return {"response": ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]}

    questions = (messages + 1) // 3
    for q in range(questions):
        kind = kinds[q % len(kinds)]
        index = q // len(kinds)
        if kind == "log":
            turn = log_turn(q + 1, rng, index)
        elif kind == "doc":
            turn = doc_turn(q + 1, rng, index)
        else:
            turn = csv_turn(q + 1, rng, index)
        assert turn.file is not None
        result = numbered(turn.file[1].splitlines())
        step = turn.steps[-1]
        question_id = len(rows) + 1
        rows.append(
            StoredMessage(
                question_id, "user", turn.user, None, "ok", None, None, {}, at(question_id)
            )
        )
        call_id = f"call_{hexid(rng, 24)}"
        round_id = len(rows) + 1
        when = at(round_id)
        parts: list[ModelResponsePart] = [
            ToolCallPart(tool_name=step.tool, args=step.arguments, tool_call_id=call_id)
        ]
        call = StoredToolCall(q + 1, call_id, step.tool, step.arguments, "done", result)
        rows.append(
            StoredMessage(
                round_id,
                "assistant",
                "",
                None,
                "ok",
                MODEL,
                assistant(parts, when, "tool_call"),
                {"question_id": question_id},
                when,
                tool_calls=(call,),
            )
        )
        if len(rows) == messages:
            break
        answer_id = len(rows) + 1
        when = at(answer_id)
        rows.append(
            StoredMessage(
                answer_id,
                "assistant",
                turn.answer,
                None,
                "ok",
                MODEL,
                assistant([TextPart(content=turn.answer)], when, "stop"),
                {"question_id": question_id},
                when,
            )
        )
    return rows


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Timing:
    variant: str
    build: list[float]
    both: list[float]
    compact: list[float]
    history_messages: int
    receipts: int
    kept_full: bool

    @property
    def ratio(self) -> float:
        return statistics.median(self.both) / statistics.median(self.build)

    @property
    def ratio_p90(self) -> float:
        return quantile(self.both, 0.9) / quantile(self.build, 0.9)


def time_builder(rows: list[StoredMessage], variant: str, repeats: int) -> Timing:
    question_id = max(row.id for row in rows if row.role == "user")

    def build() -> list[ModelMessage]:
        return build_history(rows)

    def both() -> list[ModelMessage]:
        return compact_earlier_returns(build_history(rows), question_id=question_id)

    built = build()
    compacted = compact_earlier_returns(built, question_id=question_id)
    returns = [
        p
        for m in compacted
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    receipts = sum(RECEIPT_MARK in p.model_response_str() for p in returns)
    kept_full = RECEIPT_MARK not in returns[-1].model_response_str()

    def compact_only() -> list[ModelMessage]:
        return compact_earlier_returns(built, question_id=question_id)

    measures: dict[str, tuple[Callable[[], list[ModelMessage]], list[float]]] = {
        "build": (build, []),
        "both": (both, []),
        "compact": (compact_only, []),
    }
    for _ in range(max(10, repeats // 10)):  # warm up
        for fn, _times in measures.values():
            fn()
    order = list(measures)
    gc.collect()
    gc.disable()
    try:
        for r in range(repeats):
            for name in order if r % 2 == 0 else reversed(order):
                fn, times = measures[name]
                t0 = time.perf_counter_ns()
                fn()
                times.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        gc.enable()
        gc.collect()
    return Timing(
        variant,
        measures["build"][1],
        measures["both"][1],
        measures["compact"][1],
        len(built),
        receipts,
        kept_full,
    )


LABELS = {"stored": "as recorded (response kept)", "columns": "older (from columns)"}


def report_two(repeats: int) -> tuple[bool, dict[str, Any]]:
    timings: list[Timing] = []
    chars = 0
    calls = 0
    for variant, stored in (("stored", True), ("columns", False)):
        rows = long_chat(CHAT_MESSAGES, stored_responses=stored)
        results = [c.result or "" for row in rows for c in row.tool_calls]
        chars, calls = sum(map(len, results)), len(results)
        low, high = min(map(len, results)), max(map(len, results))
        timings.append(time_builder(rows, variant, repeats))
    print(
        f"(2) the builder's added cost, {CHAT_MESSAGES} messages: {calls - 1} answered questions "
        f"(user, tool round, answer) + 1;\n    tool results {low:,}-{high:,} characters "
        f"({chars / 1e6:.2f} M); {repeats} runs each, interleaved, warmed up, gc off; "
        "ms median / p90"
    )
    print(
        f"  {'assistant rows':<27}{'history':>8}{'(a) build':>16}{'(b) + compact':>16}"
        f"{'(c) compact':>15}{'(b) / (a)':>15}"
    )
    for t in timings:
        print(
            f"  {LABELS[t.variant]:<27}{t.history_messages:>8}"
            f"{statistics.median(t.build):>9.2f} /{quantile(t.build, 0.9):>5.2f}"
            f"{statistics.median(t.both):>9.2f} /{quantile(t.both, 0.9):>5.2f}"
            f"{statistics.median(t.compact):>8.2f} /{quantile(t.compact, 0.9):>5.2f}"
            f"{t.ratio:>8.3f} /{t.ratio_p90:>5.2f}"
        )
    failed = [t for t in timings if t.receipts != calls - 1 or not t.kept_full]
    for t in failed:
        print(
            f"  CHECK FAILED ({t.variant}): {t.receipts} receipts for {calls - 1} earlier "
            f"returns; the question in progress's return {'kept' if t.kept_full else 'lost'}"
        )
    if not failed:
        print(
            f"  checked: all {calls - 1} earlier returns became receipts; the question in "
            "progress's return stayed in full"
        )
    per_turn = [
        (statistics.median(t.build) + 2 * statistics.median(t.compact)) / statistics.median(t.build)
        for t in timings
    ]
    print(
        "  compaction runs before each model request: a 2-request turn = "
        + " / ".join(f"x{x:.2f}" for x in per_turn)
        + " of the build (no target)"
    )
    verdicts = []
    for t in timings:
        ok = t.ratio <= OVERHEAD_TARGET and t.receipts == calls - 1 and t.kept_full
        verdicts.append(ok)
        print(
            f"  {'PASS' if ok else 'FAIL'}  {LABELS[t.variant]}: (b) / (a) = x{t.ratio:.3f}, "
            f"medians (target <= {OVERHEAD_TARGET})"
        )
    dump = {
        "messages": CHAT_MESSAGES,
        "repeats": repeats,
        "variants": {
            t.variant: {
                "build_ms": {"median": statistics.median(t.build), "p90": quantile(t.build, 0.9)},
                "build_and_compact_ms": {
                    "median": statistics.median(t.both),
                    "p90": quantile(t.both, 0.9),
                },
                "compact_ms": {
                    "median": statistics.median(t.compact),
                    "p90": quantile(t.compact, 0.9),
                },
                "ratio": t.ratio,
                "pass": ok,
            }
            for t, ok in zip(timings, verdicts, strict=True)
        },
    }
    # The target is on the rows as hearth records them today; older rows are shown beside.
    return verdicts[0], dump


# ============================================================================================
# Running it.
# ============================================================================================


async def main_async(repeats: int) -> dict[str, Any]:
    started = time.monotonic()
    chat = build_chat()
    print(
        f"hearth request-time compaction (receipts for earlier returns >= {MIN_CHARS:,} "
        f"characters), Python {platform.python_version()}, {platform.machine()}"
    )
    off, on, note = await record_runs(chat)
    one, dump_one = report_one(chat, off, on, note)
    two, dump_two = report_two(repeats)
    older = dump_two["variants"]["columns"]["pass"]
    print(
        f"summary: (1) {'PASS' if one else 'FAIL'}, (2) {'PASS' if two else 'FAIL'} (rows as "
        f"recorded; older rows {'PASS' if older else 'FAIL'})  {time.monotonic() - started:.1f} s"
    )
    return {"input_tokens": dump_one, "builder": dump_two}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--repeats", type=int, default=200, help="timed runs of each measure in (2)"
    )
    add_json_option(parser)
    args = parser.parse_args(argv)
    if not 10 <= args.repeats <= 10_000:
        parser.error("--repeats must be in [10, 10000]")
    dump = asyncio.run(main_async(args.repeats))
    write_figures(dump, args.json)


if __name__ == "__main__":
    main()
