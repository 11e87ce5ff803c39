"""A server's resources as one more tool of its group: `mcp__<server>__read_resource(uri)`.

A model learns what it can read from the tool's description, which lists the server's resources
(name, URI, type) and its resource templates, as they were when the tools were listed; so a
result that links to a resource can be followed. A URI is read only when the server offers it,
listed or matching one of its templates (RFC 6570, each expression matching what it could
expand to): a URI of another server, or a made-up one, is a tool error naming the server, and
the server is never asked. What a resource holds becomes a result as a tool's content does
(`results`): text as text, blobs through the media path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

READ_RESOURCE = "read_resource"
LISTED_AT_MOST = 50
"""Resources named in the description; the rest are counted."""


@dataclass(frozen=True, slots=True)
class ResourceIndex:
    """What a server offers to be read: listed URIs and template patterns."""

    uris: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]

    def offers(self, uri: str) -> bool:
        return uri in self.uris or any(p.fullmatch(uri) for p in self.patterns)


def template_pattern(template: str) -> re.Pattern[str]:
    """A regular expression for the URIs an RFC 6570 template can expand to."""
    parts: list[str] = []
    at = 0
    for expression in re.finditer(r"\{([^}]*)\}", template):
        parts.append(re.escape(template[at : expression.start()]))
        operator = expression.group(1)[:1]
        # Simple expansion stops at a reserved character; the others may run on.
        parts.append("[^/?#&]+" if operator.isalnum() or operator == "_" else ".*")
        at = expression.end()
    parts.append(re.escape(template[at:]))
    return re.compile("".join(parts))


def describe(server: str, resources: Sequence[Any], templates: Sequence[Any]) -> str:
    lines = [
        f"[{server}] Read a resource of the {server} server by its URI: text comes back as "
        "text, other content as a file you can be shown. Only these are offered:"
    ]
    for resource in resources[:LISTED_AT_MOST]:
        lines.append(f"- {resource.name}: {resource.uri}" + _type(resource))
    if len(resources) > LISTED_AT_MOST:
        lines.append(f"- and {len(resources) - LISTED_AT_MOST} more")
    for template in templates:
        lines.append(f"- {template.name}: {template.uri_template} (a template)" + _type(template))
    return "\n".join(lines)


def _type(resource: Any) -> str:
    return f" ({resource.mime_type})" if resource.mime_type else ""


def index(resources: Sequence[Any], templates: Sequence[Any]) -> ResourceIndex:
    return ResourceIndex(
        frozenset(str(r.uri) for r in resources),
        tuple(template_pattern(t.uri_template) for t in templates),
    )


PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
    "required": ["uri"],
    "additionalProperties": False,
}
