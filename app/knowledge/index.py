"""The full-text index over `knowledge_chunks`, one per database, and how it is made.

SQLite gets an FTS5 table with external content (the passages are stored once, in
`knowledge_chunks`) kept in step by triggers, ranked by bm25 with the Porter stemmer.
PostgreSQL gets a stored generated `tsvector` column (heading weighted above text, English
stemming) under a GIN index, ranked by `ts_rank`. Neither has a portable SQLAlchemy model, so
revision 0006 creates them in SQL of its own, and `alembic check` is told to leave these
objects alone (`is_index_object`). The search queries (`app.knowledge.search`) name them
from here.
"""

from __future__ import annotations

from typing import Any

FTS_TABLE = "knowledge_fts"
TSV_COLUMN = "search_vector"
TSV_INDEX = "ix_knowledge_chunks_search_vector"
TS_CONFIG = "english"


def is_index_object(name: str | None, type_: str) -> bool:
    """Whether a database object is part of the full-text index (not of the models)."""
    if name is None:
        return False
    if type_ == "table":
        return name == FTS_TABLE or name.startswith(f"{FTS_TABLE}_")
    return (type_ == "column" and name == TSV_COLUMN) or (type_ == "index" and name == TSV_INDEX)


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic's `include_object`: compare everything but the full-text index."""
    return not (reflected and compare_to is None and is_index_object(name, type_))
