"""The built-in group `knowledge`: search the user's documents and cite what grounds an answer.

It sits in the catalogue like an MCP server (activated, declared and deferred by the same
rules), but runs in the process: `call` gets the run's context, so a search is scoped to the
user who asked and counted against the question's budget (`TurnDeps.evidence`).

- `knowledge_search` past the budget stays declared (a model never meets an unknown tool) and
  answers, as its ordinary result, that the budget is spent.
- `knowledge_cite` resolves ids exactly against the user's own passages, and repairs slightly
  damaged ones against the passages this question retrieved (close matches only); it reports
  what it recorded, repaired and ignored, and is a tool error the model may retry only when
  nothing resolved. An empty list is a declaration too: nothing grounds the answer.

What the tools found goes to the recorder in the return's metadata (`EVIDENCE_KEY`), which
writes the evidence rows with the round's epoch, as it does for activations.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_ai import ModelRetry, RunContext, ToolReturn
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.knowledge.evidence import EVIDENCE_KEY, KNOWLEDGE_CITE, KNOWLEDGE_SEARCH
from app.knowledge.search import search
from app.models import KnowledgeChunk
from app.tools.deps import TurnDeps

GROUP = "knowledge"
REPAIR_CUTOFF = 0.85
"""How alike a damaged id must be to a retrieved one (difflib ratio) to be taken for it."""


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(
        min_length=1, max_length=2000, description="What to look for, in plain words."
    )
    limit: int = Field(default=5, ge=1, le=20, description="How many passages to return.")


class CiteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chunk_ids: list[str] = Field(
        max_length=50,
        description="The chunk_id of each passage that grounds the answer, exactly as "
        "knowledge_search returned it; an empty list declares that none does.",
    )


@dataclass(frozen=True, slots=True)
class KnowledgeTool:
    name: str
    description: str
    parameters: dict[str, Any]


TOOLS = (
    KnowledgeTool(
        KNOWLEDGE_SEARCH,
        "Search the user's uploaded documents (text, Markdown, PDF) for passages about a "
        "query. Answers a list of {chunk_id, upload_id, filename, page, text}, best first. "
        "Searches per question are limited.",
        SearchArgs.model_json_schema(),
    ),
    KnowledgeTool(
        KNOWLEDGE_CITE,
        "Declare which retrieved passages ground your answer, by chunk_id, before you answer "
        "from the user's documents. Answers which ids were recorded and which were ignored.",
        CiteArgs.model_json_schema(),
    ),
)


def spent_answer(budget: int) -> str:
    return (
        f"The search budget of this question is spent ({budget} searches): no search was made. "
        "Cite the passages that ground your answer with knowledge_cite, then answer."
    )


class KnowledgeGroup:
    name = GROUP
    description = (
        "Search the user's uploaded documents (text, Markdown, PDF) and cite the passages "
        "that ground your answer."
    )
    status: Literal["available"] = "available"
    requires_approval = False
    error: str | None = None

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    @property
    def tools(self) -> Sequence[KnowledgeTool]:
        return TOOLS

    async def call(self, ctx: RunContext[TurnDeps], tool: str, arguments: dict[str, Any]) -> Any:
        try:
            if tool == KNOWLEDGE_SEARCH:
                return await self.search(ctx, SearchArgs.model_validate(arguments))
            if tool == KNOWLEDGE_CITE:
                return await self.cite(ctx, CiteArgs.model_validate(arguments))
        except ValidationError as exc:
            raise ModelRetry(
                f"invalid arguments for {tool}: {exc.errors(include_url=False)}"
            ) from None
        raise ModelRetry(f"the knowledge group has no tool {tool!r}")

    async def search(self, ctx: RunContext[TurnDeps], args: SearchArgs) -> Any:
        evidence = ctx.deps.evidence
        if evidence is not None:
            if evidence.searches_spent:
                evidence.searches += 1
                return spent_answer(evidence.budget)
            evidence.searches += 1
        async with self.sessions() as db:
            hits = await search(db, ctx.deps.user_id, args.query, args.limit)
        if evidence is not None:
            evidence.retrieved.update((hit.chunk_id, hit.row_id) for hit in hits)
        results = [
            {
                "chunk_id": hit.chunk_id,
                "upload_id": str(hit.upload_id),
                "filename": hit.filename,
                "page": hit.page,
                "text": hit.text,
            }
            for hit in hits
        ]
        metadata = {EVIDENCE_KEY: {"retrieved": [hit.row_id for hit in hits]}} if hits else None
        return ToolReturn(results, metadata=metadata)

    async def cite(self, ctx: RunContext[TurnDeps], args: CiteArgs) -> Any:
        if not args.chunk_ids:
            return ToolReturn(
                {
                    "recorded": [],
                    "repaired": {},
                    "ignored": [],
                    "declared": "no passage grounds "
                    "the answer; it will be shown as not grounded in the documents",
                },
                metadata={EVIDENCE_KEY: {"declared_none": True}},
            )
        asked = list(dict.fromkeys(i.strip() for i in args.chunk_ids))
        async with self.sessions() as db:
            found = dict(
                (
                    await db.execute(
                        select(KnowledgeChunk.chunk_id, KnowledgeChunk.id).where(
                            KnowledgeChunk.user_id == ctx.deps.user_id,
                            KnowledgeChunk.chunk_id.in_(asked),
                        )
                    )
                ).all()
            )
        retrieved = ctx.deps.evidence.retrieved if ctx.deps.evidence is not None else {}
        recorded: dict[str, int] = {}
        repaired: dict[str, str] = {}
        ignored: list[str] = []
        for chunk_id in asked:
            if chunk_id in found:
                recorded[chunk_id] = found[chunk_id]
                continue
            close = difflib.get_close_matches(chunk_id, retrieved, n=1, cutoff=REPAIR_CUTOFF)
            if close:
                recorded[close[0]] = retrieved[close[0]]
                repaired[chunk_id] = close[0]
            else:
                ignored.append(chunk_id)
        if not recorded:
            known = ", ".join(list(retrieved)[:20]) or "none yet: search first"
            raise ModelRetry(
                f"None of {asked} is a passage you retrieved. Cite chunk_id values exactly as "
                f"knowledge_search returned them (this question retrieved: {known})."
            )
        return ToolReturn(
            {"recorded": list(recorded), "repaired": repaired, "ignored": ignored},
            metadata={EVIDENCE_KEY: {"cited": list(recorded.values())}},
        )
