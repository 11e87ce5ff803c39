"""The generated catalogue of the tool-economy benchmark: 10 MCP groups, 219 tools, and what
they answer.

Each group is shaped like a real server (github, gmail, calendar, jira, slack, drive, notion,
postgres, stripe, linear): tools named `mcp__<group>__<tool>`, descriptions starting with
`[<group>] `, schemas with typed, described properties, enums, required lists, nested objects
and arrays. What varies between resources (their verbs, filters, optional fields) is drawn from
a seeded generator, so every run sends the same bytes. `group_call` answers like a server, with a
few hundred bytes to a few KB of JSON.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.tools.catalogue import Catalogue, Entry, GroupStatus

SEED = 20_240_611
# ============================================================================================
# The catalogue: 10 generated MCP groups.
# ============================================================================================

Schema = dict[str, Any]


def text(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def number(description: str, **extra: Any) -> Schema:
    return {"type": "integer", "description": description, **extra}


def flag(description: str, **extra: Any) -> Schema:
    return {"type": "boolean", "description": description, **extra}


def choice(description: str, values: str, **extra: Any) -> Schema:
    """A string enum; `values` are separated by `|`."""
    return {"type": "string", "enum": values.split("|"), "description": description, **extra}


def when(description: str) -> Schema:
    return {"type": "string", "format": "date-time", "description": description}


def day(description: str) -> Schema:
    return {"type": "string", "format": "date", "description": description}


def listing(description: str, items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, "description": description, **extra}


def record(description: str, properties: dict[str, Schema], *required: str) -> Schema:
    schema: Schema = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def string_map(description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    }


def obj(properties: dict[str, Schema], required: Sequence[str]) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


EMAIL = text("Email address", format="email")
USER = text("User name (login)")


@dataclass(frozen=True)
class Resource:
    """One kind of object a server manages; its tools are generated from verbs."""

    name: str
    plural: str
    noun: str
    id_field: str
    id_schema: Schema
    fields: dict[str, Schema]
    required: tuple[str, ...]
    filters: dict[str, Schema]
    where: str
    detail: str
    query: str
    verbs: tuple[str, ...] = ()
    """Fixed verbs (for the tools the chat calls); five drawn from the seed when empty."""
    scoped: bool = True


@dataclass(frozen=True)
class GroupSpec:
    name: str
    description: str
    scope: dict[str, Schema]
    resources: tuple[Resource, ...]
    specials: tuple[tuple[str, str, Schema], ...]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Group:
    """A catalogue group (satisfies `app.tools.catalogue.CatalogueGroup`)."""

    name: str
    description: str
    tools: tuple[Tool, ...]
    status: GroupStatus = "available"
    requires_approval: bool = False


def _verb_tool(
    spec: GroupSpec, resource: Resource, verb: str, rng: random.Random
) -> tuple[str, str, Schema]:
    scope = dict(spec.scope) if resource.scoped else {}
    ident = {resource.id_field: resource.id_schema}
    r, g = resource, spec.name
    if verb in ("list", "search"):
        names = list(r.filters)
        keep = {names[0], *rng.sample(names[1:], min(len(names) - 1, rng.randint(1, 3)))}
        filters = {k: v for k, v in r.filters.items() if k in keep}
        paging: dict[str, Schema] = {
            "limit": number("Results per page", minimum=1, maximum=100, default=25),
            "cursor": text("Opaque cursor from the previous page's `next_cursor`"),
        }
        if verb == "list":
            if rng.random() < 0.6:
                paging["order_by"] = choice("Sort key", "created|updated", default="updated")
                paging["direction"] = choice("Sort direction", "asc|desc", default="desc")
            description = (
                f"[{g}] List the {r.plural.replace('_', ' ')} {r.where}, most recently updated "
                f"first. Filter by {', '.join(f'`{k}`' for k in filters)}; at most `limit` per "
                "page, pass `cursor` for the next one."
            )
            return f"list_{r.plural}", description, obj({**scope, **filters, **paging}, [*scope])
        query = {"query": text(f"Search expression: {r.query}")}
        description = (
            f"[{g}] Search {r.plural.replace('_', ' ')} {r.where} with {r.query.split(',')[0]}. "
            "Returns the best matches first, each with a short excerpt and its URL."
        )
        properties = {**scope, **query, **filters, **paging}
        return f"search_{r.plural}", description, obj(properties, [*scope, "query"])
    if verb == "get":
        properties = {**scope, **ident}
        if rng.random() < 0.5:
            properties["fields"] = listing(
                "Only these top-level fields (all when left out)", {"type": "string"}
            )
        description = f"[{g}] Get one {r.noun} by its `{r.id_field}`, with {r.detail}."
        return f"get_{r.name}", description, obj(properties, [*scope, resource.id_field])
    if verb == "create":
        fields = {k: v for k, v in r.fields.items() if k in r.required or rng.random() < 0.85}
        description = (
            f"[{g}] Create a {r.noun} {r.where}. Returns the new {r.noun} with its "
            f"`{r.id_field}` and a link to it."
        )
        return f"create_{r.name}", description, obj({**scope, **fields}, [*scope, *r.required])
    if verb == "update":
        fields = {k: v for k, v in r.fields.items() if rng.random() < 0.8}
        description = (
            f"[{g}] Update an existing {r.noun}. Only the fields given change; the others "
            "keep their value. Returns the updated object."
        )
        return (
            f"update_{r.name}",
            description,
            obj({**scope, **ident, **fields}, [*scope, r.id_field]),
        )
    if verb == "delete":
        properties = {**scope, **ident}
        if rng.random() < 0.5:
            properties["reason"] = text("Why it is deleted (kept in the audit log)")
        description = (
            f"[{g}] Delete a {r.noun} permanently. This cannot be undone; ask the user "
            "before calling it."
        )
        return f"delete_{r.name}", description, obj(properties, [*scope, r.id_field])
    raise ValueError(verb)


def build_group(spec: GroupSpec, rng: random.Random) -> Group:
    made: list[tuple[str, str, Schema]] = []
    for resource in spec.resources:
        verbs = list(resource.verbs)
        if not verbs:
            verbs = ["list", "get", *rng.sample(["search", "create", "update", "delete"], 3)]
        order = ["list", "get", "search", "create", "update", "delete"]
        for verb in sorted(verbs, key=order.index):
            made.append(_verb_tool(spec, resource, verb, rng))
    for name, description, schema in spec.specials:
        made.append((name, f"[{spec.name}] {description}", schema))
    tools = tuple(
        Tool(f"mcp__{spec.name}__{name}", description, schema) for name, description, schema in made
    )
    return Group(spec.name, spec.description, tools)


def _github() -> GroupSpec:
    scope = {
        "owner": text("Account or organisation that owns the repository, e.g. `acme`"),
        "repo": text("Repository name without the owner, e.g. `checkout-service`"),
    }
    pull = Resource(
        "pull_request",
        "pull_requests",
        "pull request",
        "pull_number",
        number("Pull request number"),
        {
            "title": text("Title of the pull request"),
            "body": text("Description in GitHub-flavoured Markdown"),
            "head": text("Branch with the changes; `user:branch` for a fork"),
            "base": text("Branch the changes go into, e.g. `main`"),
            "draft": flag("Open as a draft", default=False),
            "reviewers": listing("Users asked to review", USER),
            "labels": listing("Labels to set", {"type": "string"}),
        },
        ("title", "head", "base"),
        {
            "state": choice("Which pull requests", "open|closed|merged|all"),
            "author": text("Only those opened by this user"),
            "base": text("Only those into this branch"),
            "label": text("Only those with this label"),
            "review_requested": text("Only those where this user's review is requested"),
            "draft": flag("Only drafts (true) or only ready ones (false)"),
        },
        "in a repository",
        "its description, requested reviewers, status checks and mergeability",
        "GitHub search qualifiers, e.g. `is:open review:required retry`",
        verbs=("list", "get", "search", "create", "update"),
    )
    issue = Resource(
        "issue",
        "issues",
        "issue",
        "issue_number",
        number("Issue number"),
        {
            "title": text("Issue title"),
            "body": text("Issue text in Markdown"),
            "assignees": listing("Users to assign", USER, maxItems=10),
            "labels": listing("Labels to set", {"type": "string"}),
            "milestone": number("Milestone number"),
            "state": choice("Issue state", "open|closed"),
            "state_reason": choice("Why it was closed", "completed|not_planned|reopened"),
        },
        ("title",),
        {
            "state": choice("Which issues", "open|closed|all", default="open"),
            "assignee": text("Only issues assigned to this user; `none` for unassigned"),
            "labels": text("Comma-separated label names, all of which must be set"),
            "milestone": text("Milestone number, `*` for any, `none` for none"),
            "since": when("Only issues updated at or after this time"),
        },
        "in a repository",
        "its body, labels, assignees, milestone and reactions",
        "GitHub search qualifiers, e.g. `is:issue label:bug flaky`",
    )
    release = Resource(
        "release",
        "releases",
        "release",
        "release_id",
        number("Release id"),
        {
            "tag_name": text("Tag of the release, e.g. `v2.4.0`"),
            "target_commitish": text("Branch or commit the tag is made from"),
            "name": text("Release title"),
            "body": text("Release notes in Markdown"),
            "draft": flag("Save as a draft"),
            "prerelease": flag("Mark as a pre-release"),
            "generate_release_notes": flag("Generate notes from merged pull requests"),
            "make_latest": choice("Whether it becomes the latest release", "true|false"),
        },
        ("tag_name",),
        {
            "include_drafts": flag("Include draft releases (needs push access)"),
            "prerelease": flag("Only pre-releases (true) or only full releases (false)"),
            "tag_prefix": text("Only tags starting with this, e.g. `v2.`"),
        },
        "of a repository",
        "its notes, assets and download counts",
        "words from the release title or notes",
    )
    run = Resource(
        "workflow_run",
        "workflow_runs",
        "workflow run",
        "run_id",
        number("Workflow run id"),
        {
            "workflow_id": text("Workflow file name (e.g. `ci.yml`) or numeric id"),
            "ref": text("Branch or tag to run on"),
            "inputs": string_map("Inputs the workflow declares under `workflow_dispatch`"),
        },
        ("workflow_id", "ref"),
        {
            "status": choice(
                "Run status or conclusion", "queued|in_progress|completed|success|failure|cancelled"
            ),
            "branch": text("Only runs on this branch"),
            "event": choice(
                "What triggered the run", "push|pull_request|schedule|workflow_dispatch"
            ),
            "actor": text("Only runs started by this user"),
            "created": text("Date range, e.g. `>=2024-06-01` or `2024-06-01..2024-06-07`"),
        },
        "in a repository",
        "its jobs, their steps and conclusions, and links to the logs",
        "a workflow name or commit message",
    )
    specials = (
        (
            "get_pull_request_diff",
            "Get the unified diff of a pull request, file by file, with added and removed line "
            "counts. Large diffs are cut per file; narrow them with `file_filter`.",
            obj(
                {
                    **scope,
                    "pull_number": number("Pull request number"),
                    "file_filter": listing(
                        "Glob patterns of the files to include", {"type": "string"}
                    ),
                    "context_lines": number(
                        "Unchanged lines around each change", minimum=0, maximum=20, default=3
                    ),
                    "ignore_whitespace": flag("Leave out whitespace-only changes"),
                },
                ["owner", "repo", "pull_number"],
            ),
        ),
        (
            "create_review_comment",
            "Comment on a pull request, on a line of its diff when `path` and `line` are "
            "given, otherwise on the pull request as a whole.",
            obj(
                {
                    **scope,
                    "pull_number": number("Pull request number"),
                    "body": text("Comment text in Markdown"),
                    "path": text("File the comment is on, relative to the repository root"),
                    "line": number("Line of the diff the comment is on"),
                    "side": choice("Side of the diff", "LEFT|RIGHT", default="RIGHT"),
                    "in_reply_to": number("Id of the review comment this answers"),
                },
                ["owner", "repo", "pull_number", "body"],
            ),
        ),
    )
    return GroupSpec(
        "github",
        "GitHub: repositories, pull requests, issues, reviews, releases and Actions runs",
        scope,
        (pull, issue, release, run),
        specials,
    )


def _gmail() -> GroupSpec:
    addresses = listing("Recipients", EMAIL, minItems=1)
    message = Resource(
        "message",
        "messages",
        "message",
        "message_id",
        text("Message id"),
        {
            "to": addresses,
            "cc": listing("Copy recipients", EMAIL),
            "bcc": listing("Blind copy recipients", EMAIL),
            "subject": text("Subject line"),
            "body": text("Message body"),
            "body_format": choice("Format of `body`", "plain|html", default="plain"),
            "thread_id": text("Thread to reply in; the subject must match"),
            "attachments": listing(
                "Files from Drive to attach",
                record(
                    "An attachment",
                    {"file_id": text("Drive file id"), "filename": text("Name shown")},
                    "file_id",
                ),
            ),
        },
        ("to", "subject", "body"),
        {
            "label_ids": listing("Only messages with all these labels", {"type": "string"}),
            "include_spam_trash": flag("Include Spam and Trash", default=False),
            "after": day("Only messages received on or after this day"),
            "before": day("Only messages received before this day"),
            "is_unread": flag("Only unread messages"),
            "has_attachment": flag("Only messages with attachments"),
        },
        "in the user's mailbox",
        "its headers, plain-text and HTML bodies, labels and attachment names",
        "Gmail search operators, e.g. `from:billing@stripe.com after:2024/06/01`",
    )
    draft = Resource(
        "draft",
        "drafts",
        "draft",
        "draft_id",
        text("Draft id"),
        {
            "to": addresses,
            "cc": listing("Copy recipients", EMAIL),
            "subject": text("Subject line"),
            "body": text("Draft body, plain text"),
            "reply_to_message_id": text("Message the draft answers, to keep the thread"),
        },
        ("to", "subject"),
        {
            "query": text("Only drafts matching Gmail search operators"),
            "include_spam_trash": flag("Include drafts in Spam and Trash"),
        },
        "in the user's mailbox",
        "its recipients, subject and body",
        "Gmail search operators, e.g. `subject:invoice`",
    )
    label = Resource(
        "label",
        "labels",
        "label",
        "label_id",
        text("Label id, e.g. `Label_12` or `INBOX`"),
        {
            "name": text("Label name; `/` nests it, e.g. `Finance/Invoices`"),
            "color": record(
                "Label colours, from Gmail's palette",
                {
                    "text_color": text("Hex colour, e.g. `#ffffff`"),
                    "background_color": text("Hex colour, e.g. `#16a765`"),
                },
                "text_color",
                "background_color",
            ),
            "message_list_visibility": choice("Show in the message list", "show|hide"),
            "label_list_visibility": choice(
                "Show in the label list", "labelShow|labelShowIfUnread|labelHide"
            ),
        },
        ("name",),
        {
            "type": choice("System or user labels", "system|user"),
            "name_prefix": text("Only labels whose name starts with this"),
        },
        "of the user's mailbox",
        "its message and unread counts",
        "part of a label name",
    )
    rule = Resource(
        "filter",
        "filters",
        "mail filter",
        "filter_id",
        text("Filter id"),
        {
            "criteria": record(
                "Which incoming messages the filter applies to",
                {
                    "from": text("Sender address or domain"),
                    "to": text("Recipient address"),
                    "subject": text("Words in the subject"),
                    "query": text("Gmail search operators"),
                    "has_attachment": flag("Has an attachment"),
                    "size_comparison": choice("How `size` compares", "larger|smaller"),
                    "size": number("Size in bytes"),
                },
            ),
            "action": record(
                "What happens to them",
                {
                    "add_label_ids": listing("Labels to add", {"type": "string"}),
                    "remove_label_ids": listing("Labels to remove", {"type": "string"}),
                    "forward": EMAIL,
                },
            ),
        },
        ("criteria", "action"),
        {
            "label_id": text("Only filters that add this label"),
            "from": text("Only filters on this sender"),
        },
        "of the user's mailbox",
        "its criteria and actions",
        "a sender or label name",
    )
    specials = (
        (
            "send_draft",
            "Send a saved draft now, or at `send_at`. The draft is removed once sent.",
            obj(
                {"draft_id": text("Draft id"), "send_at": when("When to send it")},
                ["draft_id"],
            ),
        ),
        (
            "modify_message_labels",
            "Add and remove labels on up to 1000 messages at once (archive = remove `INBOX`, "
            "mark read = remove `UNREAD`).",
            obj(
                {
                    "message_ids": listing("Messages to change", {"type": "string"}, minItems=1),
                    "add_label_ids": listing("Labels to add", {"type": "string"}),
                    "remove_label_ids": listing("Labels to remove", {"type": "string"}),
                },
                ["message_ids"],
            ),
        ),
    )
    return GroupSpec(
        "gmail",
        "Gmail: search, read, draft and send mail; labels and filters",
        {},
        (message, draft, label, rule),
        specials,
    )


def _calendar() -> GroupSpec:
    scope = {"calendar_id": text("Calendar id; `primary` for the user's main calendar")}
    moment = record(
        "A point in time",
        {
            "date_time": when("Start or end time (RFC 3339)"),
            "date": day("For all-day events, the day instead"),
            "time_zone": text("IANA time zone, e.g. `Europe/Berlin`"),
        },
    )
    event = Resource(
        "event",
        "events",
        "event",
        "event_id",
        text("Event id"),
        {
            "summary": text("Event title"),
            "description": text("Event details; simple HTML is kept"),
            "location": text("Place or address"),
            "start": moment,
            "end": moment,
            "attendees": listing(
                "Guests",
                record(
                    "A guest",
                    {"email": EMAIL, "optional": flag("Attendance is optional")},
                    "email",
                ),
            ),
            "recurrence": listing(
                "RRULE lines, e.g. `RRULE:FREQ=WEEKLY;BYDAY=MO`", {"type": "string"}
            ),
            "conference": choice("Video call to add", "none|google_meet|zoom"),
            "visibility": choice("Who sees the details", "default|public|private"),
            "reminders": listing(
                "Reminders instead of the calendar's defaults",
                record(
                    "A reminder",
                    {
                        "method": choice("How", "email|popup"),
                        "minutes": number("Minutes before the start", minimum=0, maximum=40320),
                    },
                    "method",
                    "minutes",
                ),
            ),
        },
        ("summary", "start", "end"),
        {
            "time_min": when("Only events ending after this time"),
            "time_max": when("Only events starting before this time"),
            "single_events": flag("Expand recurring events into instances"),
            "show_deleted": flag("Include cancelled events"),
            "event_types": listing(
                "Only these kinds",
                {"type": "string", "enum": ["default", "focusTime", "outOfOffice"]},
            ),
        },
        "in a calendar",
        "its time, attendees and their responses, conference link and reminders",
        "free text matched against title, description, location and guests",
    )
    calendar = Resource(
        "calendar",
        "calendars",
        "calendar",
        "calendar_id",
        text("Calendar id"),
        {
            "summary": text("Calendar name"),
            "description": text("What the calendar is for"),
            "time_zone": text("IANA time zone"),
            "color_id": text("Colour id from the calendar palette"),
        },
        ("summary",),
        {
            "min_access_role": choice(
                "Only calendars where the user has at least this role",
                "freeBusyReader|reader|writer|owner",
            ),
            "show_hidden": flag("Include calendars hidden from the list"),
        },
        "on the user's calendar list",
        "its time zone, default reminders and the user's access role",
        "part of a calendar name",
        scoped=False,
    )
    acl = Resource(
        "acl_rule",
        "acl_rules",
        "sharing rule",
        "rule_id",
        text("Rule id, e.g. `user:ana@example.com`"),
        {
            "role": choice("Access granted", "none|freeBusyReader|reader|writer|owner"),
            "scope": record(
                "Who the rule applies to",
                {
                    "type": choice("Kind of grantee", "default|user|group|domain"),
                    "value": text("Email address or domain; empty for `default`"),
                },
                "type",
            ),
            "send_notifications": flag("Email the grantee"),
        },
        ("role", "scope"),
        {"show_deleted": flag("Include rules with role `none`"), "role": text("Only this role")},
        "of a calendar",
        "its role and scope",
        "an email address or domain",
    )
    location = Resource(
        "working_location",
        "working_locations",
        "working location",
        "location_id",
        text("Working location entry id"),
        {
            "date": day("Day it applies to"),
            "type": choice("Where the user works", "home|office|custom"),
            "office_label": text("Office name, for `office`"),
            "building_id": text("Building id from the directory"),
            "label": text("Free text, for `custom`"),
        },
        ("date", "type"),
        {"from_date": day("First day"), "to_date": day("Last day"), "type": text("Only this")},
        "in a calendar",
        "the place and the day",
        "an office or place name",
    )
    specials = (
        (
            "find_free_slots",
            "Find times when all the given calendars are free for at least "
            "`duration_minutes`, within working hours unless told otherwise.",
            obj(
                {
                    "calendar_ids": listing("Calendars or attendee emails", {"type": "string"}),
                    "time_min": when("Start of the search window"),
                    "time_max": when("End of the search window"),
                    "duration_minutes": number("Length of the slot", minimum=5, maximum=480),
                    "working_hours_only": flag("Only within each person's working hours"),
                    "time_zone": text("IANA time zone for the answer"),
                },
                ["calendar_ids", "time_min", "time_max", "duration_minutes"],
            ),
        ),
        (
            "respond_to_invitation",
            "Accept, decline or tentatively accept an invitation, optionally with a note to "
            "the organiser.",
            obj(
                {
                    **scope,
                    "event_id": text("Event id"),
                    "response": choice("The answer", "accepted|declined|tentative"),
                    "comment": text("Note shown to the organiser"),
                    "notify_organizer": flag("Email the organiser", default=True),
                },
                ["calendar_id", "event_id", "response"],
            ),
        ),
    )
    return GroupSpec(
        "calendar",
        "Google Calendar: events, calendars, sharing, free/busy and invitations",
        scope,
        (event, calendar, acl, location),
        specials,
    )


def _jira() -> GroupSpec:
    project = text("Project key, e.g. `PAY`")
    issue = Resource(
        "issue",
        "issues",
        "issue",
        "issue_key",
        text("Issue key, e.g. `PAY-1042`"),
        {
            "project_key": project,
            "summary": text("One-line summary"),
            "issue_type": choice("Issue type", "Bug|Story|Task|Epic|Sub-task"),
            "description": text("Description in Markdown (converted to Atlassian format)"),
            "priority": choice("Priority", "Highest|High|Medium|Low|Lowest"),
            "assignee_account_id": text("Atlassian account id of the assignee"),
            "labels": listing("Labels", {"type": "string"}),
            "components": listing("Component names", {"type": "string"}),
            "fix_versions": listing("Versions the fix ships in", {"type": "string"}),
            "parent_key": text("Parent epic or issue, for sub-tasks and stories"),
            "story_points": {"type": "number", "description": "Estimate in story points"},
            "due_date": day("Due date"),
        },
        ("project_key", "summary", "issue_type"),
        {
            "project_key": project,
            "status": text("Workflow status name, e.g. `In Review`"),
            "assignee_account_id": text("Only issues assigned to this account"),
            "issue_type": text("Only this issue type"),
            "sprint_id": number("Only issues in this sprint"),
            "updated_since": when("Only issues updated at or after this time"),
        },
        "in Jira",
        "its fields, status, assignee, sprint, links and the last 20 comments",
        "JQL, e.g. `project = PAY AND status != Done ORDER BY priority`",
        verbs=("list", "get", "search", "create", "update"),
        scoped=False,
    )
    sprint = Resource(
        "sprint",
        "sprints",
        "sprint",
        "sprint_id",
        number("Sprint id"),
        {
            "board_id": number("Board the sprint belongs to"),
            "name": text("Sprint name"),
            "goal": text("Sprint goal"),
            "start_date": when("Start"),
            "end_date": when("End"),
            "state": choice("Sprint state", "future|active|closed"),
        },
        ("board_id", "name"),
        {
            "board_id": number("Board id"),
            "state": choice("Only sprints in this state", "future|active|closed"),
        },
        "of a board",
        "its dates, goal and issue counts per status",
        "part of a sprint name",
        scoped=False,
    )
    comment = Resource(
        "comment",
        "comments",
        "comment",
        "comment_id",
        text("Comment id"),
        {
            "issue_key": text("Issue the comment is on"),
            "body": text("Comment in Markdown; `@[account id]` mentions someone"),
            "visibility": record(
                "Restrict who can see it",
                {
                    "type": choice("Restricted to", "group|role"),
                    "value": text("Group or project role name"),
                },
                "type",
                "value",
            ),
        },
        ("issue_key", "body"),
        {
            "issue_key": text("Issue key"),
            "order_by": choice("Order", "created|-created"),
            "author_account_id": text("Only comments by this account"),
        },
        "on an issue",
        "its author, body and visibility",
        "words in the comment",
        scoped=False,
    )
    version = Resource(
        "version",
        "versions",
        "version",
        "version_id",
        text("Version id"),
        {
            "project_key": project,
            "name": text("Version name, e.g. `2.4.0`"),
            "description": text("What the version is"),
            "release_date": day("Planned release day"),
            "released": flag("Mark as released"),
            "archived": flag("Archive it"),
        },
        ("project_key", "name"),
        {
            "project_key": project,
            "status": choice("Only versions", "released|unreleased|archived"),
        },
        "of a project",
        "its dates and the count of issues per status category",
        "part of a version name",
        scoped=False,
    )
    specials = (
        (
            "transition_issue",
            "Move an issue through its workflow, e.g. to `In Progress` or `Done`, optionally "
            "with a comment and a resolution.",
            obj(
                {
                    "issue_key": text("Issue key, e.g. `PAY-1042`"),
                    "transition": text("Name of the transition or target status"),
                    "comment": text("Comment to add with the transition"),
                    "resolution": choice(
                        "Resolution, when moving to a done status",
                        "Done|Won't Do|Duplicate|Cannot Reproduce",
                    ),
                    "fields": record(
                        "Fields the transition screen asks for",
                        {
                            "assignee_account_id": text("New assignee"),
                            "fix_versions": listing("Fix versions", {"type": "string"}),
                        },
                    ),
                },
                ["issue_key", "transition"],
            ),
        ),
        (
            "link_issues",
            "Link two issues, e.g. one blocks the other.",
            obj(
                {
                    "inward_issue_key": text("Issue on the inward side"),
                    "outward_issue_key": text("Issue on the outward side"),
                    "link_type": choice("Kind of link", "Blocks|Relates|Duplicate|Cloners"),
                    "comment": text("Comment added to the inward issue"),
                },
                ["inward_issue_key", "outward_issue_key", "link_type"],
            ),
        ),
    )
    return GroupSpec(
        "jira",
        "Jira Cloud: issues, sprints, versions, workflow transitions and comments",
        {},
        (issue, sprint, comment, version),
        specials,
    )


def _slack() -> GroupSpec:
    channel_id = text("Channel id, e.g. `C04QW1B2F`")
    message = Resource(
        "message",
        "messages",
        "message",
        "ts",
        text("Message timestamp, e.g. `1718193720.004519`"),
        {
            "channel_id": channel_id,
            "text": text("Message text in Slack mrkdwn"),
            "thread_ts": text("Reply in this thread"),
            "reply_broadcast": flag("Also post the reply to the channel"),
            "unfurl_links": flag("Show link previews"),
            "blocks": listing(
                "Block Kit layout instead of plain text",
                record(
                    "A block",
                    {
                        "type": choice("Block type", "section|divider|context|header"),
                        "text": text("Block text in mrkdwn"),
                    },
                    "type",
                ),
            ),
        },
        ("channel_id", "text"),
        {
            "channel_id": channel_id,
            "oldest": text("Only messages after this timestamp"),
            "latest": text("Only messages before this timestamp"),
            "inclusive": flag("Include messages at `oldest` and `latest`"),
            "include_replies": flag("Include thread replies"),
        },
        "in a channel",
        "its text, author, reactions, files and thread summary",
        "Slack search modifiers, e.g. `in:#payments from:@priya deploy`",
        scoped=False,
    )
    channel = Resource(
        "channel",
        "channels",
        "channel",
        "channel_id",
        channel_id,
        {
            "name": text("Lowercase name without `#`, up to 80 characters"),
            "is_private": flag("Create a private channel"),
            "topic": text("Channel topic"),
            "purpose": text("Channel purpose"),
            "member_ids": listing("Users to invite", {"type": "string"}),
        },
        ("name",),
        {
            "types": listing(
                "Kinds of conversation",
                {"type": "string", "enum": ["public_channel", "private_channel", "mpim", "im"]},
            ),
            "exclude_archived": flag("Leave out archived channels", default=True),
            "member_only": flag("Only channels the user is in"),
        },
        "in the workspace",
        "its topic, purpose, member count and creation date",
        "part of a channel name or topic",
        scoped=False,
    )
    user_group = Resource(
        "user_group",
        "user_groups",
        "user group",
        "usergroup_id",
        text("User group id, e.g. `S0614TZR7`"),
        {
            "name": text("Display name"),
            "handle": text("Mention handle without `@`"),
            "description": text("What the group is for"),
            "user_ids": listing("Members", {"type": "string"}),
            "channel_ids": listing("Default channels of the group", {"type": "string"}),
        },
        ("name", "handle"),
        {
            "include_disabled": flag("Include disabled groups"),
            "include_users": flag("Include member ids"),
            "include_count": flag("Include the member count"),
        },
        "in the workspace",
        "its handle, members and default channels",
        "part of a name or handle",
        scoped=False,
    )
    reminder = Resource(
        "reminder",
        "reminders",
        "reminder",
        "reminder_id",
        text("Reminder id"),
        {
            "text": text("What to remind of"),
            "time": text("When: a Unix timestamp or natural language like `in 2 hours`"),
            "user_id": text("Who is reminded (the user when left out)"),
            "recurrence": record(
                "Repeat the reminder",
                {
                    "frequency": choice("How often", "daily|weekly|monthly|yearly"),
                    "weekdays": listing(
                        "Days, for weekly",
                        {
                            "type": "string",
                            "enum": ["monday", "tuesday", "wednesday", "thursday", "friday"],
                        },
                    ),
                },
                "frequency",
            ),
        },
        ("text", "time"),
        {"user_id": text("Only this user's reminders"), "complete": flag("Only done ones")},
        "of the user",
        "its text, time and recurrence",
        "words in the reminder",
        scoped=False,
    )
    specials = (
        (
            "add_reaction",
            "React to a message with an emoji.",
            obj(
                {
                    "channel_id": channel_id,
                    "ts": text("Timestamp of the message"),
                    "emoji": text("Emoji name without colons, e.g. `white_check_mark`"),
                },
                ["channel_id", "ts", "emoji"],
            ),
        ),
        (
            "upload_snippet",
            "Share a text snippet (code, logs, CSV) in a channel or thread, with syntax "
            "highlighting.",
            obj(
                {
                    "channel_id": channel_id,
                    "content": text("The snippet"),
                    "filename": text("File name shown, e.g. `trace.log`"),
                    "filetype": text("Highlighting, e.g. `python`, `json`, `text`"),
                    "initial_comment": text("Message posted with it"),
                    "thread_ts": text("Share in this thread"),
                },
                ["channel_id", "content"],
            ),
        ),
    )
    return GroupSpec(
        "slack",
        "Slack: channels, messages, threads, user groups, reminders and reactions",
        {},
        (message, channel, user_group, reminder),
        specials,
    )


def _drive() -> GroupSpec:
    file = Resource(
        "file",
        "files",
        "file",
        "file_id",
        text("Drive file id"),
        {
            "name": text("File name"),
            "mime_type": text("MIME type; Google types convert, e.g. a Doc"),
            "parent_ids": listing("Folders to put it in", {"type": "string"}),
            "description": text("Short description"),
            "starred": flag("Star the file"),
            "content": text("Text content to upload"),
            "properties": string_map("App properties, visible to all apps"),
        },
        ("name",),
        {
            "parent_id": text("Only files in this folder"),
            "mime_type": text("Only this MIME type"),
            "owned_by_me": flag("Only files the user owns"),
            "modified_after": when("Only files modified after this time"),
            "trashed": flag("Files in the trash (true) or not (false)", default=False),
            "shared_drive_id": text("Search this shared drive"),
        },
        "in Drive",
        "its owners, size, sharing, revisions count and links",
        "Drive query syntax, e.g. `name contains 'budget' and mimeType = 'text/csv'`",
    )
    folder = Resource(
        "folder",
        "folders",
        "folder",
        "folder_id",
        text("Folder id"),
        {
            "name": text("Folder name"),
            "parent_id": text("Parent folder; `root` for My Drive"),
            "folder_color_rgb": text("Colour, e.g. `#8f8f8f`"),
        },
        ("name",),
        {"parent_id": text("Only folders in this one"), "trashed": flag("Trashed ones")},
        "in Drive",
        "its path and the number of items in it",
        "part of a folder name",
    )
    permission = Resource(
        "permission",
        "permissions",
        "permission",
        "permission_id",
        text("Permission id"),
        {
            "file_id": text("File or folder to share"),
            "role": choice("Access", "owner|organizer|fileOrganizer|writer|commenter|reader"),
            "type": choice("Grantee kind", "user|group|domain|anyone"),
            "email_address": EMAIL,
            "domain": text("Domain, for `domain`"),
            "expiration_time": when("When the access ends"),
            "send_notification_email": flag("Email the grantee"),
            "email_message": text("Message in the notification email"),
        },
        ("file_id", "role", "type"),
        {"file_id": text("File or folder"), "role": text("Only this role")},
        "on a file",
        "its role, grantee and expiry",
        "an email address or domain",
        scoped=False,
    )
    revision = Resource(
        "revision",
        "revisions",
        "revision",
        "revision_id",
        text("Revision id"),
        {
            "file_id": text("File"),
            "keep_forever": flag("Keep this revision even when old ones are purged"),
            "published": flag("Publish it, for Docs, Sheets and Slides"),
        },
        ("file_id",),
        {"file_id": text("File"), "modified_after": when("Only later revisions")},
        "of a file",
        "who made it, when, and its size",
        "an author name",
    )
    specials = (
        (
            "export_file",
            "Export a Google Doc, Sheet or Slides file to another format and return its text, "
            "or a link for binary formats.",
            obj(
                {
                    "file_id": text("File to export"),
                    "mime_type": choice(
                        "Target format",
                        "application/pdf|text/plain|text/csv|text/markdown|application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                    ),
                    "max_characters": number("Cut text exports at this length", default=100000),
                },
                ["file_id", "mime_type"],
            ),
        ),
        (
            "move_file",
            "Move a file or folder to another folder.",
            obj(
                {
                    "file_id": text("File or folder to move"),
                    "new_parent_id": text("Destination folder"),
                    "remove_from_other_parents": flag("Remove it from its current folders"),
                },
                ["file_id", "new_parent_id"],
            ),
        ),
    )
    return GroupSpec(
        "drive",
        "Google Drive: files, folders, sharing, revisions and exports",
        {},
        (file, folder, permission, revision),
        specials,
    )


def _notion() -> GroupSpec:
    block_type = choice(
        "Block type",
        "paragraph|heading_1|heading_2|heading_3|bulleted_list_item|numbered_list_item|to_do|toggle|code|quote|callout",
    )
    page = Resource(
        "page",
        "pages",
        "page",
        "page_id",
        text("Page id (UUID, dashes optional)"),
        {
            "parent": record(
                "Where the page goes",
                {
                    "type": choice("Parent kind", "page_id|database_id"),
                    "id": text("Parent id"),
                },
                "type",
                "id",
            ),
            "title": text("Page title"),
            "properties": {
                "type": "object",
                "description": "Database properties by name, for pages in a database",
            },
            "icon_emoji": text("Emoji icon"),
            "content_markdown": text("Page content as Markdown"),
        },
        ("parent", "title"),
        {
            "parent_id": text("Only pages under this page or database"),
            "archived": flag("Archived pages"),
            "last_edited_after": when("Only pages edited after this time"),
        },
        "in the workspace",
        "its properties and its content as Markdown",
        "words in page titles and content",
    )
    database = Resource(
        "database",
        "databases",
        "database",
        "database_id",
        text("Database id"),
        {
            "parent_page_id": text("Page the database goes in"),
            "title": text("Database title"),
            "properties": listing(
                "Columns",
                record(
                    "A column",
                    {
                        "name": text("Column name"),
                        "type": choice(
                            "Column type",
                            "title|rich_text|number|select|multi_select|date|people|checkbox|url|status",
                        ),
                        "options": listing("Choices, for selects", {"type": "string"}),
                    },
                    "name",
                    "type",
                ),
            ),
            "is_inline": flag("Show inline in the parent page"),
        },
        ("parent_page_id", "title", "properties"),
        {"parent_page_id": text("Only databases in this page"), "archived": flag("Archived")},
        "in the workspace",
        "its schema (columns and their options)",
        "words in database titles",
    )
    block = Resource(
        "block",
        "blocks",
        "block",
        "block_id",
        text("Block id"),
        {
            "parent_id": text("Page or block the new block goes in"),
            "type": block_type,
            "text": text("Block text; inline Markdown is kept"),
            "checked": flag("For to-dos"),
            "language": text("For code blocks, e.g. `sql`"),
        },
        ("parent_id", "type"),
        {"parent_id": text("Children of this page or block"), "recursive": flag("All levels")},
        "in a page",
        "its type, text and whether it has children",
        "words in block text",
    )
    comment = Resource(
        "comment",
        "comments",
        "comment",
        "comment_id",
        text("Comment id"),
        {
            "page_id": text("Page to comment on"),
            "discussion_id": text("Reply in this discussion instead"),
            "rich_text": text("Comment text; inline Markdown is kept"),
        },
        ("rich_text",),
        {"block_id": text("Comments on this page or block"), "resolved": flag("Resolved ones")},
        "on a page",
        "its author and text",
        "words in comments",
    )
    specials = (
        (
            "query_database",
            "Query a database with filters and sorts; returns matching pages with their "
            "property values.",
            obj(
                {
                    "database_id": text("Database to query"),
                    "filter": record(
                        "One condition on one property",
                        {
                            "property": text("Property name"),
                            "condition": choice(
                                "Comparison",
                                "equals|does_not_equal|contains|before|after|is_empty|is_not_empty",
                            ),
                            "value": text("Value to compare with"),
                        },
                        "property",
                        "condition",
                    ),
                    "sorts": listing(
                        "Sort order",
                        record(
                            "A sort",
                            {
                                "property": text("Property name"),
                                "direction": choice("Direction", "ascending|descending"),
                            },
                            "property",
                        ),
                    ),
                    "page_size": number("Results per page", minimum=1, maximum=100),
                },
                ["database_id"],
            ),
        ),
        (
            "append_blocks",
            "Append blocks to a page or block, after `after` when given, at the end otherwise.",
            obj(
                {
                    "block_id": text("Page or block to append to"),
                    "children": listing(
                        "Blocks to add, in order",
                        record(
                            "A block",
                            {
                                "type": block_type,
                                "text": text("Block text"),
                                "checked": flag("For to-dos"),
                            },
                            "type",
                        ),
                        maxItems=100,
                    ),
                    "after": text("Insert after this child block"),
                },
                ["block_id", "children"],
            ),
        ),
    )
    return GroupSpec(
        "notion",
        "Notion: pages, databases, blocks and comments",
        {},
        (page, database, block, comment),
        specials,
    )


def _postgres() -> GroupSpec:
    scope = {"database": text("Database on the configured server, e.g. `payments_replica`")}
    schema_name = text("Schema, e.g. `public`")
    table = Resource(
        "table",
        "tables",
        "table",
        "table_name",
        text("Table name, schema-qualified when not in `public`"),
        {
            "columns": listing(
                "Columns",
                record(
                    "A column",
                    {
                        "name": text("Column name"),
                        "data_type": text("SQL type, e.g. `numeric(12,2)`"),
                        "nullable": flag("Allows NULL"),
                        "default": text("Default expression"),
                    },
                    "name",
                    "data_type",
                ),
                minItems=1,
            ),
            "primary_key": listing("Primary key columns", {"type": "string"}),
            "if_not_exists": flag("Do nothing when it exists"),
            "comment": text("Table comment"),
        },
        ("columns",),
        {
            "schema": schema_name,
            "name_pattern": text("SQL LIKE pattern on the name"),
            "include_system": flag("Include pg_catalog and information_schema"),
            "min_rows": number("Only tables with at least this many rows (estimate)"),
        },
        "in a database",
        "its columns, types, constraints, indexes, size and row estimate",
        "part of a table or column name",
    )
    index = Resource(
        "index",
        "indexes",
        "index",
        "index_name",
        text("Index name"),
        {
            "table": text("Table to index"),
            "columns": listing("Columns or expressions", {"type": "string"}, minItems=1),
            "unique": flag("Unique index"),
            "method": choice("Access method", "btree|hash|gin|gist|brin"),
            "where": text("Predicate of a partial index"),
            "concurrently": flag("Build without locking writes", default=True),
        },
        ("table", "columns"),
        {
            "table": text("Only indexes of this table"),
            "unused_only": flag("Only indexes with no scans since the last stats reset"),
            "schema": schema_name,
        },
        "in a database",
        "its definition, size and scan counts",
        "part of an index name",
    )
    view = Resource(
        "view",
        "views",
        "view",
        "view_name",
        text("View name"),
        {
            "definition": text("The SELECT statement"),
            "materialized": flag("Create a materialized view"),
            "replace": flag("Replace an existing view"),
            "schema": schema_name,
        },
        ("definition",),
        {"schema": schema_name, "materialized": flag("Only materialized views")},
        "in a database",
        "its definition and, for materialized views, size and last refresh",
        "part of a view name",
    )
    role = Resource(
        "role",
        "roles",
        "role",
        "role_name",
        text("Role name"),
        {
            "login": flag("Can log in"),
            "connection_limit": number("Maximum concurrent connections; -1 for none"),
            "valid_until": when("When the password expires"),
            "member_of": listing("Roles to grant", {"type": "string"}),
        },
        ("login",),
        {"include_system": flag("Include `pg_` roles"), "login": flag("Only login roles")},
        "on the server",
        "its attributes, memberships and grants",
        "part of a role name",
        scoped=False,
    )
    specials = (
        (
            "run_query",
            "Run one read-only SQL statement and return up to `max_rows` rows as JSON. "
            "Statements that write are refused.",
            obj(
                {
                    **scope,
                    "sql": text("A single SELECT, WITH or SHOW statement"),
                    "params": listing(
                        "Values for $1, $2, ...", {"type": ["string", "number", "null"]}
                    ),
                    "max_rows": number("Row limit", minimum=1, maximum=5000, default=200),
                    "timeout_ms": number("Statement timeout", minimum=100, maximum=60000),
                },
                ["database", "sql"],
            ),
        ),
        (
            "explain_query",
            "Show the plan of a query, with actual timings when `analyze` is set (the "
            "query then runs, inside a rolled-back transaction).",
            obj(
                {
                    **scope,
                    "sql": text("The statement to explain"),
                    "analyze": flag("Run it and report actual rows and timings"),
                    "buffers": flag("Report buffer usage (with analyze)"),
                    "format": choice("Plan format", "text|json", default="text"),
                },
                ["database", "sql"],
            ),
        ),
    )
    return GroupSpec(
        "postgres",
        "PostgreSQL (read replica): schemas, tables, indexes, queries and query plans",
        scope,
        (table, index, view, role),
        specials,
    )


def _stripe() -> GroupSpec:
    metadata = string_map("Up to 50 key-value pairs stored on the object")
    customer = Resource(
        "customer",
        "customers",
        "customer",
        "customer_id",
        text("Customer id, e.g. `cus_Q2xYb1T7`"),
        {
            "email": EMAIL,
            "name": text("Full name or business name"),
            "phone": text("Phone number"),
            "description": text("Internal note"),
            "address": record(
                "Billing address",
                {
                    "line1": text("Street"),
                    "line2": text("Apartment, suite"),
                    "city": text("City"),
                    "postal_code": text("Postal code"),
                    "country": text("Two-letter country code"),
                },
                "line1",
                "country",
            ),
            "metadata": metadata,
            "tax_exempt": choice("Tax status", "none|exempt|reverse"),
        },
        ("email",),
        {
            "email": text("Exact email address"),
            "created_after": when("Only customers created after this time"),
            "test_clock": text("Only customers on this test clock"),
        },
        "in the Stripe account",
        "its default payment method, balance, tax ids and subscriptions",
        "Stripe search query, e.g. `email~'acme' AND metadata['plan']:'pro'`",
    )
    payment = Resource(
        "payment_intent",
        "payment_intents",
        "payment intent",
        "payment_intent_id",
        text("Payment intent id, e.g. `pi_3PbX...`"),
        {
            "amount": number("Amount in the smallest currency unit", minimum=1),
            "currency": text("Three-letter ISO code, lowercase"),
            "customer_id": text("Customer to charge"),
            "payment_method_types": listing(
                "Allowed methods",
                {"type": "string", "enum": ["card", "sepa_debit", "ideal", "link"]},
            ),
            "capture_method": choice("When funds are captured", "automatic|manual"),
            "description": text("Shown in the dashboard"),
            "receipt_email": EMAIL,
            "metadata": metadata,
        },
        ("amount", "currency"),
        {
            "customer_id": text("Only this customer's payments"),
            "status": choice(
                "Payment status",
                "requires_payment_method|requires_action|processing|requires_capture|canceled|succeeded",
            ),
            "created_after": when("Only payments created after this time"),
        },
        "in the Stripe account",
        "its charges, payment method, status history and refunds",
        "Stripe search query, e.g. `status:'succeeded' AND amount>10000`",
    )
    subscription = Resource(
        "subscription",
        "subscriptions",
        "subscription",
        "subscription_id",
        text("Subscription id, e.g. `sub_1PbX...`"),
        {
            "customer_id": text("Customer who subscribes"),
            "items": listing(
                "Prices and quantities",
                record(
                    "An item",
                    {"price_id": text("Price id"), "quantity": number("Quantity", minimum=1)},
                    "price_id",
                ),
                minItems=1,
            ),
            "trial_period_days": number("Free trial length"),
            "collection_method": choice(
                "How invoices are paid", "charge_automatically|send_invoice"
            ),
            "cancel_at_period_end": flag("End at the end of the current period"),
            "proration_behavior": choice(
                "Prorations on change", "create_prorations|none|always_invoice"
            ),
        },
        ("customer_id", "items"),
        {
            "customer_id": text("Only this customer's subscriptions"),
            "status": choice("Status", "active|past_due|unpaid|canceled|trialing|all"),
            "price_id": text("Only subscriptions to this price"),
        },
        "in the Stripe account",
        "its items, current period, latest invoice and discount",
        "Stripe search query, e.g. `status:'past_due'`",
    )
    invoice = Resource(
        "invoice",
        "invoices",
        "invoice",
        "invoice_id",
        text("Invoice id, e.g. `in_1PbX...`"),
        {
            "customer_id": text("Customer billed"),
            "collection_method": choice("Payment", "charge_automatically|send_invoice"),
            "days_until_due": number("For `send_invoice`"),
            "description": text("Memo shown on the invoice"),
            "auto_advance": flag("Finalize automatically after an hour"),
            "footer": text("Footer text"),
        },
        ("customer_id",),
        {
            "customer_id": text("Only this customer's invoices"),
            "status": choice("Status", "draft|open|paid|uncollectible|void"),
            "due_before": day("Only invoices due before this day"),
        },
        "in the Stripe account",
        "its lines, totals, tax, payment status and hosted invoice link",
        "Stripe search query, e.g. `total>50000 AND status:'open'`",
    )
    specials = (
        (
            "refund_payment",
            "Refund a payment in full, or partly with `amount`. Refunds reach the customer "
            "in 5-10 business days.",
            obj(
                {
                    "payment_intent_id": text("Payment to refund"),
                    "amount": number("Amount to refund in the smallest unit; all when left out"),
                    "reason": choice("Reason", "duplicate|fraudulent|requested_by_customer"),
                    "metadata": metadata,
                },
                ["payment_intent_id"],
            ),
        ),
        (
            "get_balance",
            "Get the account balance: available and pending amounts per currency.",
            obj({"currency": text("Only this currency")}, []),
        ),
    )
    return GroupSpec(
        "stripe",
        "Stripe: customers, payments, subscriptions, invoices and refunds",
        {},
        (customer, payment, subscription, invoice),
        specials,
    )


def _linear() -> GroupSpec:
    team = text("Team id or key, e.g. `ENG`")
    issue = Resource(
        "issue",
        "issues",
        "issue",
        "issue_id",
        text("Issue identifier, e.g. `ENG-1423`, or its UUID"),
        {
            "team_id": team,
            "title": text("Issue title"),
            "description": text("Description in Markdown"),
            "priority": number("0 none, 1 urgent, 2 high, 3 medium, 4 low", minimum=0, maximum=4),
            "state_id": text("Workflow state"),
            "assignee_id": text("Assignee"),
            "label_ids": listing("Labels", {"type": "string"}),
            "project_id": text("Project"),
            "cycle_id": text("Cycle"),
            "estimate": number("Estimate in points"),
            "due_date": day("Due date"),
        },
        ("team_id", "title"),
        {
            "team_id": team,
            "state_type": choice("Workflow state category", "backlog|unstarted|started|completed"),
            "assignee_id": text("Only this assignee's issues; `me` for the user"),
            "label_id": text("Only issues with this label"),
            "updated_after": when("Only issues updated after this time"),
        },
        "in Linear",
        "its state, assignee, labels, project, cycle and sub-issues",
        "words in titles and descriptions",
    )
    project = Resource(
        "project",
        "projects",
        "project",
        "project_id",
        text("Project id"),
        {
            "name": text("Project name"),
            "team_ids": listing("Teams", {"type": "string"}, minItems=1),
            "description": text("Project description"),
            "lead_id": text("Project lead"),
            "target_date": day("Target date"),
            "state": choice("State", "planned|started|paused|completed|canceled"),
        },
        ("name", "team_ids"),
        {
            "team_id": team,
            "state": text("Only projects in this state"),
            "include_archived": flag("Include archived projects"),
        },
        "in Linear",
        "its lead, milestones, progress and the latest update",
        "words in project names",
    )
    cycle = Resource(
        "cycle",
        "cycles",
        "cycle",
        "cycle_id",
        text("Cycle id"),
        {
            "team_id": team,
            "name": text("Cycle name"),
            "starts_at": when("Start"),
            "ends_at": when("End"),
            "description": text("Cycle goal"),
        },
        ("team_id", "starts_at", "ends_at"),
        {
            "team_id": team,
            "is_active": flag("Only the active cycle"),
            "include_completed": flag("Include past cycles"),
        },
        "of a team",
        "its dates, scope and completed points",
        "a cycle name or number",
    )
    comment = Resource(
        "comment",
        "comments",
        "comment",
        "comment_id",
        text("Comment id"),
        {
            "issue_id": text("Issue to comment on"),
            "body": text("Comment in Markdown"),
            "parent_id": text("Comment this replies to"),
        },
        ("issue_id", "body"),
        {"issue_id": text("Issue"), "user_id": text("Only comments by this user")},
        "on an issue",
        "its author, body and reactions",
        "words in comments",
    )
    specials = (
        (
            "assign_issue",
            "Assign an issue to someone, or unassign it with `assignee_id` null.",
            obj(
                {
                    "issue_id": text("Issue"),
                    "assignee_id": {"type": ["string", "null"], "description": "New assignee"},
                    "notify": flag("Notify the assignee", default=True),
                },
                ["issue_id", "assignee_id"],
            ),
        ),
    )
    return GroupSpec(
        "linear",
        "Linear: issues, projects, cycles and comments",
        {},
        (issue, project, cycle, comment),
        specials,
    )


def build_catalogue(seed: int = SEED) -> tuple[Catalogue, list[Group]]:
    rng = random.Random(seed)
    specs = (
        _github(),
        _gmail(),
        _calendar(),
        _jira(),
        _slack(),
        _drive(),
        _notion(),
        _postgres(),
        _stripe(),
        _linear(),
    )
    groups = [build_group(spec, rng) for spec in specs]
    return Catalogue([Entry("mcp", group) for group in groups]), groups


# ============================================================================================
# What the tools answer, and the user's files.
# ============================================================================================

PULLS = [
    {
        "number": n,
        "title": title,
        "user": author,
        "head": head,
        "base": "main",
        "draft": False,
        "created_at": created,
        "updated_at": updated,
        "requested_reviewers": ["dana-k"],
        "checks": checks,
        "additions": plus,
        "deletions": minus,
        "html_url": f"https://github.com/acme/checkout-service/pull/{n}",
    }
    for n, title, author, head, created, updated, checks, plus, minus in (
        (
            482,
            "Retry idempotent captures on gateway timeouts",
            "priya-s",
            "fix/capture-retry",
            "2024-06-10T08:14:02Z",
            "2024-06-11T16:40:55Z",
            "success",
            214,
            37,
        ),
        (
            479,
            "Ledger: write refunds in the same transaction as the payment update",
            "tomasz-w",
            "ledger/refund-tx",
            "2024-06-07T13:02:44Z",
            "2024-06-11T09:12:31Z",
            "failure",
            388,
            120,
        ),
        (
            476,
            "Bump stripe-python to 9.12 and pin the API version",
            "renovate[bot]",
            "renovate/stripe-9.x",
            "2024-06-06T04:00:12Z",
            "2024-06-10T04:01:09Z",
            "success",
            6,
            6,
        ),
        (
            471,
            "Checkout: show the 3-D Secure challenge in a modal on mobile",
            "li-wei",
            "feat/3ds-modal",
            "2024-06-04T10:27:51Z",
            "2024-06-11T11:48:03Z",
            "pending",
            512,
            98,
        ),
    )
]

DIFF = {
    "pull_number": 482,
    "files": [
        {
            "filename": "checkout/gateway/client.py",
            "status": "modified",
            "additions": 61,
            "deletions": 14,
            "patch": (
                "@@ -88,14 +88,37 @@ class GatewayClient:\n"
                "-    def capture(self, payment_id: str, amount: int) -> Capture:\n"
                '-        response = self._post(f"/payments/{payment_id}/capture", '
                '{"amount": amount})\n'
                "-        return Capture.from_json(response)\n"
                "+    def capture(self, payment_id: str, amount: int, *, idempotency_key: str) "
                "-> Capture:\n"
                '+        headers = {"Idempotency-Key": idempotency_key}\n'
                "+        for attempt in range(self.max_attempts):\n"
                "+            try:\n"
                "+                response = self._post(\n"
                '+                    f"/payments/{payment_id}/capture", {"amount": amount}, '
                "headers=headers\n"
                "+                )\n"
                "+                return Capture.from_json(response)\n"
                "+            except GatewayTimeout:\n"
                "+                if attempt == self.max_attempts - 1:\n"
                "+                    raise\n"
                "+                time.sleep(self.backoff(attempt))\n"
            ),
        },
        {
            "filename": "checkout/payments/service.py",
            "status": "modified",
            "additions": 18,
            "deletions": 9,
            "patch": (
                "@@ -141,9 +141,18 @@ def capture_order(order: Order) -> None:\n"
                "-    capture = gateway.capture(order.payment_id, order.total)\n"
                '+    key = f"capture:{order.id}:{order.payment_attempt}"\n'
                "+    capture = gateway.capture(order.payment_id, order.total, "
                "idempotency_key=key)\n"
                '+    metrics.increment("capture.attempts", tags={"gateway": gateway.name})\n'
            ),
        },
        {
            "filename": "tests/gateway/test_client.py",
            "status": "modified",
            "additions": 135,
            "deletions": 14,
            "patch": "(135 added lines: 6 new tests of timeouts, backoff and the header)",
        },
    ],
    "truncated": False,
}

ISSUES = [
    {
        "key": key,
        "summary": summary,
        "status": status,
        "priority": priority,
        "assignee": "Dana Kowalski",
        "fix_versions": ["2.4.0"],
        "updated": updated,
        "url": f"https://acme.atlassian.net/browse/{key}",
    }
    for key, summary, status, priority, updated in (
        (
            "PAY-2274",
            "Capture retries double-count in the settlement report",
            "In Review",
            "High",
            "2024-06-11T15:20:00Z",
        ),
        (
            "PAY-2261",
            "Document the new idempotency key format for support",
            "To Do",
            "Medium",
            "2024-06-10T09:03:00Z",
        ),
        (
            "PAY-2291",
            "Migrate ledger_entries.amount to numeric(14,2)",
            "To Do",
            "High",
            "2024-06-12T08:41:00Z",
        ),
    )
]

RESULTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "mcp__github__list_pull_requests": lambda args: {
        "total_count": len(PULLS),
        "pull_requests": PULLS,
        "next_cursor": None,
    },
    "mcp__github__get_pull_request_diff": lambda args: DIFF,
    "mcp__github__create_review_comment": lambda args: {
        "id": 1638204417,
        "pull_number": args["pull_number"],
        "path": args.get("path"),
        "line": args.get("line"),
        "user": "dana-k",
        "body": args["body"],
        "created_at": "2024-06-12T10:05:31Z",
        "html_url": "https://github.com/acme/checkout-service/pull/482#discussion_r1638204417",
    },
    "mcp__jira__create_issue": lambda args: {
        "key": "PAY-2291",
        "id": "48817",
        "self": "https://acme.atlassian.net/rest/api/3/issue/48817",
        "fields": {
            "summary": args["summary"],
            "issuetype": args["issue_type"],
            "status": "To Do",
            "priority": args.get("priority", "Medium"),
            "labels": args.get("labels", []),
            "reporter": "Dana Kowalski",
            "created": "2024-06-12T08:41:09.118+0000",
        },
        "url": "https://acme.atlassian.net/browse/PAY-2291",
    },
    "mcp__jira__search_issues": lambda args: {
        "jql": args["query"],
        "total": len(ISSUES),
        "issues": ISSUES,
        "next_cursor": None,
    },
    "mcp__jira__transition_issue": lambda args: {
        "issue_key": args["issue_key"],
        "from_status": "To Do",
        "to_status": "In Progress",
        "transition_id": "21",
        "assignee": "Dana Kowalski",
        "updated": "2024-06-12T10:07:44.602+0000",
        "comment_id": "93310" if args.get("comment") else None,
    },
}

USER_FILES = {
    "notes/release-2.4.md": """# checkout-service 2.4 release

Target: Thursday 13 June, deploy window 10:00-12:00 CET. Owner: Dana.

## Must ship
- [x] 3-D Secure modal on mobile (#471) - design signed off, QA on Tuesday
- [ ] Capture retries with idempotency keys (#482) - needs a second review
- [ ] Refunds in the same transaction as payment updates (#479) - CI red on the ledger tests
- [x] Stripe SDK 9.12 with a pinned API version (#476)

## Before the deploy
- [ ] Ledger migration: amount to numeric(14,2); needs a backfill plan and a ticket
- [ ] Check the settlement report with retried captures (finance asked twice)
- [ ] Update the runbook: new retry metrics and the capture.attempts dashboard
- [ ] Tell support about the idempotency key format

## After
- Remove the old capture path behind `CAPTURE_V1` once 2.4 has run a week.
- Review the gateway timeout (8 s) with the payments team; p99 is 5.1 s.
""",
    "reports/sprint-24-burndown.csv": "day,remaining_points\n"
    + "".join(
        f"2024-06-{d:02d},{p}\n" for d, p in zip(range(3, 15), range(48, 0, -4), strict=True)
    ),
    "reports/gateway-latency-june.md": "# Gateway latency, June\n\np50 310 ms, p99 5.1 s.\n",
    "reports/incident-0611-capture-timeouts.md": "# Incident 11 June: capture timeouts\n",
}


async def group_call(group: str, tool: str, arguments: dict[str, Any]) -> str:
    """A server's answer: canned JSON for the calls of the chat, a plausible echo otherwise."""
    make = RESULTS.get(tool)
    if make is not None:
        return json.dumps(make(arguments), indent=2)
    generic = {"ok": True, "group": group, "tool": tool, "arguments": arguments}
    return json.dumps(generic, indent=2)
