"""What deferred tool loading saves: tool-definition tokens and the reusable request prefix.

A user with many MCP servers has hundreds of tools. Sending every definition on every request
costs tokens the model mostly does not need; deferring them (docs/wire.md §2) should cut that
without breaking the provider's prompt cache, which only reuses a request's leading bytes.
This script measures both, for each DTL mode, on one realistic chat.

The catalogue is generated (`bench/_catalogue.py`): 10 MCP groups (github, gmail, calendar,
jira, slack, drive, notion, postgres, stripe, linear) of 21 or 22 tools each, 219 in all, named
`mcp__<group>__<tool>`, each description starting with `[<group>] `, with schemas shaped like
real servers' (typed properties with descriptions, enums, required lists, nested objects and
arrays). Everything that varies (which verbs a resource gets, which filters a listing has,
which optional fields a create takes) is drawn from a seeded generator, so every run sends the
same bytes. Tool calls are answered by a local function with a few hundred bytes to a few KB
of JSON, as a server would answer.

The chat is hearth's real request path, not a model of it: hearth runs in this process
(`create_app`, migrated SQLite in a temporary folder, uvicorn on a loopback port), a user
registers and signs in through the HTTP API, and each of the 10 user messages is posted to
`POST /api/chats/{id}/messages`, its stream read to the end and the chat polled until idle.
The providers are the fake Anthropic, OpenAI and Moonshot servers of `tests/fakes`, which
record every request body and check it against the provider SDK's request types. Each mode
has a model of its own: Anthropic with `tool_search` (`anthropic_tool_reference`), Moonshot
with `tool_search` (`kimi_system_tools`), OpenAI without it (`none`). Every model has a 1M
context window so that no summary interrupts the chat. All three get the same script: turn 1
activates `github`, calls one of its tools and answers; turn 4 activates `jira` the same way;
the other turns call an active tool, read or list the user's files, or just answer. Tool call
ids follow each provider's style (`toolu_...`, `call_...`, `functions.<name>:<n>`).

The baseline is "every tool on every request": the `none` mode's recorded bodies with their
`tools` array replaced by every always-on tool and every catalogue tool. Those definitions
are not rebuilt here: a separate chat on the `none` model activates all 10 groups, and the
tools array hearth sends after that is taken as is (the script checks that each definition
in the measured `none` bodies is byte-for-byte the one in that array). It is a cost model, not
a request every provider would take: OpenAI accepts at most 128 functions per request.

Per request, two figures:

* Tool-definition tokens: characters of the compact JSON of each tool definition the model has
  in context, divided by 4 (one approximation for every mode, so the modes compare; real
  tokenisers differ by provider). "In context" means: for `none` and the baseline, the
  top-level `tools` array; for `anthropic_tool_reference`, the tools without `defer_loading`
  plus the deferred ones a `tool_reference` block of this request's messages names (a
  deferred, unreferenced definition is not shown to the model); for `kimi_system_tools`, the
  top-level `tools` plus the tools of every `{"role": "system", "tools": [...]}` message.
  Definitions are counted as they were sent, in each provider's own shape. The OpenAI shape
  wraps each definition in `{"type": "function", "function": ...}`, so for
  `anthropic_tool_reference` the summary also gives the saving against an all-tools baseline in
  the Anthropic shape.
* Reusable prefix: a provider cache reuses what comes before the first byte that changed since
  the previous request. The request is serialised in the provider's prompt order, compact
  JSON keeping the recorded key order: `[tools, system, messages]` for Anthropic (its cache
  order), `[tools, messages]` for OpenAI-compatible APIs (system messages are in `messages`).
  The share is the longest common byte prefix with the previous request's serialisation over
  this request's length. Markers count as bytes too: Anthropic's moving `cache_control`
  breakpoint ends the common prefix a few bytes before the end of the previous request, and
  the dynamic tail (date and time) is last, so it only ever costs what follows it.

The share counts everything new in a request against it, cache break or not: a request that
keeps all of the previous one but appends a large tool result or a group's definitions has a
low share although the cache lost nothing. So each table also shows the common prefix over the
*previous* request's length ("previous request kept"): near 100% means the cache kept all it
had and the request only grew; well below means something before the end changed (in `none`,
an activation grows the tools array, which comes first). The verdicts use the share; the
last column says why a request falls short. The header gives each group's definition tokens
and from which request each activated group is in context, which is what bounds the saving:
two groups of ten, in context for most of a 20-request chat.

Targets, for `anthropic_tool_reference` and `kimi_system_tools`: at least 85% fewer
tool-definition tokens than the baseline in total over the chat, and from the second request
on at least 95% of every request a reusable prefix. A request that falls short is named with
its figures; nothing is adjusted to make it pass. Exit status 0 either way: this is a
measurement, and its verdicts are printed.

    .venv/bin/python bench/tool_economy.py
    .venv/bin/python bench/tool_economy.py --json figures.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import string
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from _catalogue import SEED, USER_FILES, Group, build_catalogue, group_call
from _figures import add_json_option, write_figures

from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.files.roots import user_root
from app.llm.registry import ModelRegistry
from app.main import create_app
from app.settings import Settings
from app.tools.catalogue import Catalogue
from tests.fakes.providers import FakeAnthropic, FakeOpenAI, FakeProviderServer, Reply, ToolCall
from tests.support import Client, live_server, parse_stream, wait_until_idle

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "HEARTH_BENCH_PROVIDER_KEY"
Mode = Literal["none", "anthropic_tool_reference", "kimi_system_tools"]
MODES: tuple[Mode, ...] = ("none", "anthropic_tool_reference", "kimi_system_tools")
DEFERRED_MODES: tuple[Mode, ...] = ("anthropic_tool_reference", "kimi_system_tools")
FAKE_OF: dict[Mode, str] = {
    "none": "openai",
    "anthropic_tool_reference": "anthropic",
    "kimi_system_tools": "moonshot",
}
MODEL_OF: dict[Mode, str] = {
    "none": "oai/gpt-4.1",
    "anthropic_tool_reference": "anth/claude-sonnet-4-5",
    "kimi_system_tools": "kimi/kimi-k3",
}
REDUCTION_TARGET = 0.85
PREFIX_TARGET = 0.95
BASELINE = "baseline"

# ============================================================================================
# The chat: 10 user messages, the same model behaviour in every mode.
# ============================================================================================


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    user: str
    steps: tuple[Call, ...]
    answer: str


REPO = {"owner": "acme", "repo": "checkout-service"}

CHAT: tuple[Turn, ...] = (
    Turn(
        "Which pull requests on acme/checkout-service are waiting for my review? I'd like to "
        "get through them before the 2.4 release on Thursday.",
        (
            Call("activate_tools", {"groups": ["github"]}),
            Call(
                "mcp__github__list_pull_requests",
                {**REPO, "state": "open", "limit": 20},
            ),
        ),
        "Four open pull requests are waiting for your review. #482 (Priya, retry idempotent "
        "captures on gateway timeouts) has green checks and is the one the release depends "
        "on most. #479 (Tomasz, refunds in the same transaction as the payment update) is "
        "also on the release list, but its CI is red, so it makes sense to wait for a fix. "
        "#476 is Renovate's bump of stripe-python to 9.12 with a pinned API version: six "
        "lines, green, quick to approve. #471 (Li Wei, the 3-D Secure modal on mobile) is "
        "large and its checks are still running. I'd start with #476, then #482.",
    ),
    Turn(
        "I keep my release checklist in notes/release-2.4.md. What is still open on it?",
        (Call("read_file", {"path": "notes/release-2.4.md"}),),
        "Of the four must-ship items, two are done (the 3-D Secure modal and the Stripe SDK "
        "bump). Still open: #482 needs a second review, and #479 has red CI on the ledger "
        "tests. Before the deploy, none of the four tasks is ticked: the ledger migration of "
        "`amount` to numeric(14,2) needs a backfill plan and a ticket, finance wants the "
        "settlement report checked with retried captures, the runbook needs the new retry "
        "metrics, and support needs to hear about the idempotency key format.",
    ),
    Turn(
        "Summarise what PR #482 changes, and tell me whether the retry logic looks safe.",
        (Call("mcp__github__get_pull_request_diff", {**REPO, "pull_number": 482}),),
        "#482 makes `GatewayClient.capture` take an idempotency key, send it as the "
        "`Idempotency-Key` header and retry on `GatewayTimeout` up to `max_attempts` with "
        "backoff; `capture_order` builds the key from the order id and its payment attempt "
        "and counts attempts in a new metric. The retry is safe as far as the gateway "
        "honours the key: every attempt of one capture sends the same key, so a capture that "
        "went through before the timeout is not charged twice. Two things to raise: "
        "`time.sleep` blocks the worker during backoff, and there is no test that the key "
        "stays the same across attempts.",
    ),
    Turn(
        "The ledger migration isn't tracked anywhere yet. Please open a Jira task for it in "
        "the PAY project, high priority, for 2.4.0.",
        (
            Call("activate_tools", {"groups": ["jira"]}),
            Call(
                "mcp__jira__create_issue",
                {
                    "project_key": "PAY",
                    "summary": "Migrate ledger_entries.amount to numeric(14,2)",
                    "issue_type": "Task",
                    "description": "Change `ledger_entries.amount` from numeric(12,2) to "
                    "numeric(14,2) before the 2.4 deploy. Needs a backfill plan for the 41M "
                    "existing rows and a check of the settlement report afterwards.",
                    "priority": "High",
                    "fix_versions": ["2.4.0"],
                    "labels": ["release-2.4", "ledger"],
                },
            ),
        ),
        'Done: PAY-2291, "Migrate ledger_entries.amount to numeric(14,2)", a high-priority '
        "task for 2.4.0 with the labels release-2.4 and ledger. The description asks for a "
        "backfill plan for the existing rows and a check of the settlement report. It is "
        "unassigned for now.",
    ),
    Turn(
        "Which reports do I have for this sprint?",
        (Call("list_files", {"path": "reports"}),),
        "You have three reports: the sprint 24 burndown as CSV, the June gateway latency "
        "summary, and the write-up of the 11 June incident with the capture timeouts. The "
        "incident report is probably the useful one for the #482 review.",
    ),
    Turn(
        "Is anything else assigned to me in PAY that could block the release?",
        (
            Call(
                "mcp__jira__search_issues",
                {
                    "query": "project = PAY AND assignee = currentUser() AND statusCategory "
                    "!= Done AND fixVersion = 2.4.0 ORDER BY priority DESC",
                    "limit": 20,
                },
            ),
        ),
        "Three issues for 2.4.0 are assigned to you and not done. PAY-2274 (capture retries "
        "double-count in the settlement report, high, in review) is the real risk: it is the "
        "same area as #482, and finance asked about it. PAY-2291 is the ledger migration "
        "created a moment ago. PAY-2261 (documenting the idempotency key format for support) "
        "is medium and won't block the deploy, but it is on your checklist.",
    ),
    Turn(
        "How would you word the release note for the retry fix, for customers rather than "
        "engineers?",
        (),
        '"Payments are now more reliable when our payment provider is slow to respond: if a '
        "payment confirmation times out, we retry it safely, and you are never charged twice "
        'for the same order." If you want one more sentence for merchants: "You may notice '
        "fewer orders stuck in 'payment pending' during busy periods.\"",
    ),
    Turn(
        "Leave a comment on #482 asking Priya to add a test that the idempotency key stays the "
        "same across retried captures.",
        (
            Call(
                "mcp__github__create_review_comment",
                {
                    **REPO,
                    "pull_number": 482,
                    "path": "checkout/gateway/client.py",
                    "line": 96,
                    "body": "Could you add a test that every retried attempt of one capture "
                    "sends the same `Idempotency-Key`? That is what makes the retry safe, "
                    "and nothing pins it yet. Thanks!",
                },
            ),
        ),
        "I left the comment on line 96 of checkout/gateway/client.py in #482, where the retry "
        "loop starts, asking Priya for a test that every attempt of one capture sends the "
        "same idempotency key.",
    ),
    Turn(
        "And move PAY-2291 to In Progress, I'm starting on it now.",
        (
            Call(
                "mcp__jira__transition_issue",
                {
                    "issue_key": "PAY-2291",
                    "transition": "In Progress",
                    "comment": "Starting on the migration and the backfill plan.",
                },
            ),
        ),
        "PAY-2291 is now In Progress, assigned to you, with a comment that you started on the "
        "migration and the backfill plan.",
    ),
    Turn(
        "Thanks. Give me three bullets on what we got done today, for the stand-up.",
        (),
        "- Reviewed the open pull requests for 2.4: #482 (capture retries) looks safe, with a "
        "requested test for the idempotency key; #479 is blocked on red CI.\n"
        "- Tracked the ledger migration as PAY-2291 and started on it.\n"
        "- Checked the release risks: PAY-2274 (settlement double count) is the one to watch "
        "before Thursday.",
    ),
)

_ALNUM = string.ascii_letters + string.digits


class CallIds:
    """Tool call ids in each provider's own style, the same for every run."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.count = 0
        self.rng = random.Random(f"{SEED}-{mode}")

    def next(self, tool: str) -> str:
        n, self.count = self.count, self.count + 1
        if self.mode == "kimi_system_tools":
            return f"functions.{tool}:{n}"
        token = "".join(self.rng.choice(_ALNUM) for _ in range(24))
        return (
            f"toolu_01{token[:22]}" if self.mode == "anthropic_tool_reference" else f"call_{token}"
        )


def replies(turn: Turn, ids: CallIds) -> list[Reply]:
    steps = [
        Reply(tool_calls=[ToolCall(c.tool, c.arguments, id=ids.next(c.tool))]) for c in turn.steps
    ]
    return [*steps, Reply(text=turn.answer)]


def check_script(groups: Sequence[Group]) -> None:
    """Every scripted call names a real tool, gives its required arguments and no others."""
    schemas = {tool.name: tool.parameters for group in groups for tool in group.tools}
    for turn in CHAT:
        for call in turn.steps:
            if call.tool in ("activate_tools", "read_file", "list_files"):
                continue
            schema = schemas.get(call.tool)
            if schema is None:
                raise SystemExit(f"the script calls {call.tool}, which the catalogue lacks")
            unknown = set(call.arguments) - set(schema["properties"])
            missing = set(schema.get("required", ())) - set(call.arguments)
            if unknown or missing:
                raise SystemExit(
                    f"{call.tool}: unknown {unknown or '{}'}, missing {missing or '{}'}"
                )


# ============================================================================================
# Running hearth against the fakes.
# ============================================================================================


def providers_yaml(fakes: dict[str, FakeProviderServer]) -> str:
    return f"""\
providers:
  - id: anth
    kind: anthropic
    base_url: {fakes["anthropic"].base_url}
    api_key_env: {KEY_ENV}
    models:
      - id: claude-sonnet-4-5
        capabilities: [vision, document, tool_search]
        context_window: 1000000
        max_output_tokens: 4096
  - id: kimi
    kind: moonshot
    base_url: {fakes["moonshot"].base_url}
    api_key_env: {KEY_ENV}
    models:
      - id: kimi-k3
        capabilities: [tool_search]
        context_window: 1000000
        max_output_tokens: 4096
  - id: oai
    kind: openai
    base_url: {fakes["openai"].base_url}
    api_key_env: {KEY_ENV}
    models:
      - id: gpt-4.1
        context_window: 1000000
        max_output_tokens: 4096
"""


@dataclass
class Recorded:
    """The request bodies one chat sent, and the turn each belongs to."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)


async def run_chat(
    user: Client, fake: FakeProviderServer, model: str, turns: Sequence[Turn], mode: Mode
) -> Recorded:
    ids = CallIds(mode)
    created = await user.post("/api/chats", json={"model": model})
    if created.status_code != 201:
        raise SystemExit(f"creating a chat on {model} answered {created.status_code}")
    chat_id = created.json()["id"]
    recorded = Recorded()
    for turn_number, turn in enumerate(turns, 1):
        before = len(fake.model_requests)
        fake.script(*replies(turn, ids))
        response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": turn.user})
        chunks = parse_stream(response.text) if response.status_code == 200 else []
        errors = [c for c in chunks if c["type"] == "error"]
        if response.status_code != 200 or errors:
            raise SystemExit(f"{mode}, turn {turn_number}: {response.status_code} {errors}")
        await wait_until_idle(user, chat_id, within=30)
        sent = fake.model_requests[before:]
        if fake.pending or len(sent) != len(turn.steps) + 1:
            raise SystemExit(
                f"{mode}, turn {turn_number}: {len(sent)} requests, {fake.pending} left"
            )
        for request in sent:
            if request.validation_error is not None:
                raise SystemExit(
                    f"{mode}, turn {turn_number}: invalid body: {request.validation_error}"
                )
            recorded.bodies.append(request.body)
            recorded.turns.append(turn_number)
    return recorded


async def record_everything(
    catalogue: Catalogue, groups: Sequence[Group]
) -> tuple[dict[Mode, Recorded], list[dict[str, Any]]]:
    """Each mode's chat through hearth, and the tools array of a chat with every group active."""
    fakes: dict[str, FakeProviderServer] = {
        "anthropic": FakeAnthropic(),
        "openai": FakeOpenAI(flavour="openai"),
        "moonshot": FakeOpenAI(flavour="moonshot"),
    }
    for fake in fakes.values():
        await fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="hearth-tool-economy-") as folder:
            work = Path(folder)
            url = f"sqlite+aiosqlite:///{work / 'hearth.db'}"
            engine = create_engine(url)
            await upgrade(engine)
            await engine.dispose()
            providers = work / "providers.yaml"
            providers.write_text(providers_yaml(fakes))
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
                for relative, content in USER_FILES.items():
                    (root / relative).parent.mkdir(parents=True, exist_ok=True)
                    (root / relative).write_text(content)
                chats: dict[Mode, Recorded] = {}
                for mode in MODES:
                    chats[mode] = await run_chat(
                        user, fakes[FAKE_OF[mode]], MODEL_OF[mode], CHAT, mode
                    )
                everything = Turn(
                    "Turn on every tool group, please.",
                    (Call("activate_tools", {"groups": [g.name for g in groups]}),),
                    "Every group is active.",
                )
                census = await run_chat(
                    user, fakes["openai"], MODEL_OF["none"], [everything], "none"
                )
                all_tools = census.bodies[-1]["tools"]
    finally:
        for fake in fakes.values():
            await fake.stop()
    return chats, all_tools


# ============================================================================================
# The figures.
# ============================================================================================


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tool_name(definition: dict[str, Any]) -> str:
    return str(definition.get("name") or definition["function"]["name"])


def referenced(messages: list[dict[str, Any]]) -> set[str]:
    """Tool names named by `tool_reference` blocks in Anthropic `tool_result` contents."""
    names: set[str] = set()
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(inner, list):
                names |= {b["tool_name"] for b in inner if b.get("type") == "tool_reference"}
    return names


def in_context(mode: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool definitions the model has in context for this request (see the docstring)."""
    tools: list[dict[str, Any]] = body.get("tools") or []
    if mode == "anthropic_tool_reference":
        named = referenced(body["messages"])
        return [t for t in tools if not t.get("defer_loading") or t["name"] in named]
    if mode == "kimi_system_tools":
        declared = [
            t
            for m in body["messages"]
            if m.get("role") == "system" and isinstance(m.get("tools"), list)
            for t in m["tools"]
        ]
        return [*tools, *declared]
    return list(tools)


def definition_chars(definitions: Sequence[dict[str, Any]]) -> int:
    return sum(len(compact(d)) for d in definitions)


def serialise(provider: str, body: dict[str, Any]) -> bytes:
    """The request in the provider's prompt order, as compact JSON in the recorded key order."""
    if provider == "anthropic":
        parts = [body.get("tools") or [], body.get("system"), body["messages"]]
    else:
        parts = [body.get("tools") or [], body["messages"]]
    return compact(parts).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    limit = min(len(a), len(b))
    step, start = 4096, 0
    while start < limit and a[start : start + step] == b[start : start + step]:
        start += step
    end = min(start + step, limit)
    while start < end and a[start] == b[start]:
        start += 1
    return start


@dataclass
class Row:
    request: int
    turn: int
    tool_tokens: int
    size: int
    prefix_share: float | None
    previous_reused: float | None
    """The common prefix over the previous request's length: what of it the cache kept."""


@dataclass
class Figures:
    name: str
    provider: str
    rows: list[Row]

    @property
    def total_tokens(self) -> int:
        return sum(r.tool_tokens for r in self.rows)

    def min_prefix(self) -> Row | None:
        later = [r for r in self.rows if r.prefix_share is not None]
        return min(later, key=lambda r: r.prefix_share or 0.0) if later else None

    def short(self) -> list[Row]:
        return [
            r for r in self.rows if r.prefix_share is not None and r.prefix_share < PREFIX_TARGET
        ]


def figures(name: str, provider: str, mode: str, recorded: Recorded) -> Figures:
    rows: list[Row] = []
    previous: bytes | None = None
    for index, (body, turn) in enumerate(zip(recorded.bodies, recorded.turns, strict=True), 1):
        wire = serialise(provider, body)
        common = None if previous is None else common_prefix(previous, wire)
        share = None if common is None else common / len(wire)
        kept = None if common is None or previous is None else common / len(previous)
        tokens = round(definition_chars(in_context(mode, body)) / 4)
        rows.append(Row(index, turn, tokens, len(wire), share, kept))
        previous = wire
    return Figures(name, provider, rows)


def baseline_of(none: Recorded, all_tools: list[dict[str, Any]]) -> Recorded:
    """The `none` bodies with every tool on every request (checked against what was sent)."""
    by_name = {tool_name(t): compact(t) for t in all_tools}
    for body in none.bodies:
        for tool in body.get("tools") or []:
            if by_name.get(tool_name(tool)) != compact(tool):
                raise SystemExit(f"{tool_name(tool)} differs from the all-groups chat's array")
    return Recorded([{**body, "tools": all_tools} for body in none.bodies], list(none.turns))


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def print_table(fig: Figures, title: str) -> None:
    print(f"\n{title}")
    print(
        f"  {'req':>3}  {'turn':>4}  {'tool-def tokens':>15}  {'request bytes':>13}  "
        f"{'reusable prefix':>15}  {'previous request kept':>21}"
    )
    for r in fig.rows:
        mark = "  < target" if r.prefix_share is not None and r.prefix_share < PREFIX_TARGET else ""
        print(
            f"  {r.request:>3}  {r.turn:>4}  {r.tool_tokens:>15,}  {r.size:>13,}  "
            f"{percent(r.prefix_share):>15}  {percent(r.previous_reused):>21}{mark}"
        )


def describe_short(fig: Figures, row: Row) -> str:
    before = fig.rows[row.request - 2]
    grown = row.tool_tokens - before.tool_tokens
    added = f", {grown:+,} tool-def tokens" if grown else ""
    new_bytes = row.size - round((row.prefix_share or 0.0) * row.size)
    return (
        f"request {row.request} (turn {row.turn}): {percent(row.prefix_share)}, "
        f"{new_bytes:,} of {row.size:,} bytes after the first changed byte{added}; "
        f"{percent(row.previous_reused)} of request {before.request} kept"
    )


def report(results: dict[str, Figures], anthropic_all_chars: int, started: float) -> dict[str, Any]:
    baseline = results[BASELINE]
    titles = {
        BASELINE: "baseline: every always-on and catalogue tool on every request "
        "(the none bodies, OpenAI shape)",
        "none": "none (OpenAI gpt-4.1): always-on tools + the tools of activated groups",
        "anthropic_tool_reference": "anthropic_tool_reference (Anthropic claude-sonnet-4-5): "
        "every catalogue tool deferred, activations as tool_reference blocks",
        "kimi_system_tools": "kimi_system_tools (Moonshot kimi-k3): always-on tools, "
        "activations as system-tools messages",
    }
    for name, fig in results.items():
        print_table(fig, titles[name])

    print("\nsummary (tool-def tokens summed over the chat's requests)")
    print(
        f"  {'mode':<26}  {'requests':>8}  {'tool-def tokens':>15}  {'vs baseline':>11}  "
        f"{'min reusable prefix, req 2+':>28}"
    )
    dump: dict[str, Any] = {"modes": {}, "targets": []}
    for name, fig in results.items():
        reduction = 1 - fig.total_tokens / baseline.total_tokens
        low = fig.min_prefix()
        low_text = f"{percent(low.prefix_share)} (req {low.request})" if low else "—"
        vs = "—" if name == BASELINE else f"{reduction * 100:.1f} % less"
        print(
            f"  {name:<26}  {len(fig.rows):>8}  {fig.total_tokens:>15,}  {vs:>11}  {low_text:>28}"
        )
        dump["modes"][name] = {
            "provider": fig.provider,
            "requests": [
                {
                    "request": r.request,
                    "turn": r.turn,
                    "tool_definition_tokens": r.tool_tokens,
                    "request_bytes": r.size,
                    "reusable_prefix_share": r.prefix_share,
                    "previous_request_kept": r.previous_reused,
                }
                for r in fig.rows
            ],
            "total_tool_definition_tokens": fig.total_tokens,
            "reduction_vs_baseline": None if name == BASELINE else reduction,
            "min_reusable_prefix_share": low.prefix_share if low else None,
        }
    anthropic = results["anthropic_tool_reference"]
    own = round(anthropic_all_chars / 4) * len(anthropic.rows)
    own_reduction = 1 - anthropic.total_tokens / own
    print(
        f"  anthropic_tool_reference against an all-tools baseline in the Anthropic shape "
        f"({own:,} tokens): {own_reduction * 100:.1f} % less"
    )
    dump["anthropic_shape_baseline_tokens"] = own

    print("\ntargets")
    for name in DEFERRED_MODES:
        fig = results[name]
        reduction = 1 - fig.total_tokens / baseline.total_tokens
        ok = reduction >= REDUCTION_TARGET
        print(
            f"  {'PASS' if ok else 'FAIL'}  {name}: {reduction * 100:.1f} % fewer tool-definition "
            f"tokens than the baseline (target >= {REDUCTION_TARGET * 100:.0f} %)"
        )
        dump["targets"].append(
            {"mode": name, "target": "reduction", "value": reduction, "pass": ok}
        )
        low = fig.min_prefix()
        short = fig.short()
        ok = not short
        low_text = f"{percent(low.prefix_share)} at request {low.request}" if low else "—"
        print(
            f"  {'PASS' if ok else 'FAIL'}  {name}: lowest reusable prefix from request 2 on "
            f"{low_text} (target >= {PREFIX_TARGET * 100:.0f} % on every request)"
        )
        for row in short:
            print(f"          short: {describe_short(fig, row)}")
        dump["targets"].append(
            {
                "mode": name,
                "target": "prefix",
                "value": low.prefix_share if low else None,
                "pass": ok,
                "short_requests": [r.request for r in short],
            }
        )
    print(f"\n{time.monotonic() - started:.1f} s")
    return dump


def group_sizes(all_tools: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Tokens of each group's definitions (and of the always-on ones), OpenAI shape."""
    chars: dict[str, int] = {}
    for tool in all_tools:
        name = tool_name(tool)
        group = name.split("__")[1] if name.startswith("mcp__") else "always-on"
        chars[group] = chars.get(group, 0) + len(compact(tool))
    return {group: round(count / 4) for group, count in chars.items()}


def group_presence(fig_mode: str, recorded: Recorded) -> str:
    """From which request on each group's definitions are in context, for this mode."""
    first: dict[str, int] = {}
    for index, body in enumerate(recorded.bodies, 1):
        for tool in in_context(fig_mode, body):
            name = tool_name(tool)
            if name.startswith("mcp__"):
                first.setdefault(name.split("__")[1], index)
    total = len(recorded.bodies)
    return ", ".join(
        f"{group} from request {start} ({total - start + 1} of {total} requests)"
        for group, start in first.items()
    )


async def main_async() -> dict[str, Any]:
    started = time.monotonic()
    catalogue, groups = build_catalogue()
    check_script(groups)
    tools = [tool for group in groups for tool in group.tools]
    print(
        f"hearth tool economy: {len(groups)} MCP groups, {len(tools)} catalogue tools "
        f"({min(len(g.tools) for g in groups)}-{max(len(g.tools) for g in groups)} per group); "
        f"a {len(CHAT)}-turn chat that activates github (turn 1) and jira (turn 4)"
    )
    print(
        "tool-def tokens = characters of the compact JSON of the tool definitions the model has "
        "in context, / 4 (deferred, unreferenced definitions excluded)"
    )
    print(
        "reusable prefix = longest common byte prefix with the previous request / this request, "
        "serialised in prompt order ([tools, system, messages] Anthropic, [tools, messages] "
        "OpenAI-compatible)"
    )
    chats, all_tools = await record_everything(catalogue, groups)
    results: dict[str, Figures] = {
        BASELINE: figures(BASELINE, "openai", "none", baseline_of(chats["none"], all_tools))
    }
    for mode in MODES:
        results[mode] = figures(mode, FAKE_OF[mode], mode, chats[mode])
    sizes = group_sizes(all_tools)
    print(
        "definition tokens per group (OpenAI shape): "
        + ", ".join(f"{group} {count:,}" for group, count in sizes.items())
    )
    for mode in DEFERRED_MODES:
        print(f"in context in {mode}: {group_presence(mode, chats[mode])}")
    anthropic_tools = chats["anthropic_tool_reference"].bodies[0].get("tools") or []
    stripped = [
        {k: v for k, v in t.items() if k not in ("defer_loading", "cache_control")}
        for t in anthropic_tools
    ]
    return report(results, definition_chars(stripped), started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    add_json_option(parser)
    args = parser.parse_args(argv)
    dump = asyncio.run(main_async())
    write_figures(dump, args.json)


if __name__ == "__main__":
    main()
