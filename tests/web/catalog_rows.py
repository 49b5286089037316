"""Catalog rows written straight into a test catalog, for page tests that need no lake: tables with
columns, profiles and keys, a publish run, and hostile text in every field a page shows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import Engine

from catalog.db.engine import session_scope
from catalog.db.models import CatalogColumn, CatalogTable, ColumnProfile, PublishRun, TableKey
from catalog.db.models.base import text_key

HOSTILE = '<script>alert("x")</script>&"><img src=x onerror=alert(1)>'
NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


def add_table(
    engine: Engine,
    table_id: str,
    headers: Sequence[str],
    *,
    n_rows: int = 3,
    source: str | None = "portal",
    title: str | None = None,
    key: Sequence[str] | None = None,
) -> None:
    with session_scope(engine) as s:
        s.add(
            CatalogTable(
                table_id=table_id,
                name=table_id.split(":", 1)[1],
                title=title,
                source_name=source,
                format="csv",
                n_rows=n_rows,
                n_columns=len(headers),
                batch_id="1",
                index_version=1,
                published_at=NOW,
            )
        )
        s.flush()
        for position, header in enumerate(headers, start=1):
            s.add(CatalogColumn(column_id=f"{table_id}#{header}", table_id=table_id, position=position, header=header))
        s.flush()  # the profiles' and keys' foreign keys need the rows above
        for header in headers:
            column_id = f"{table_id}#{header}"
            s.add(
                ColumnProfile(
                    column_id=column_id,
                    row_count=n_rows,
                    null_count=0,
                    empty_count=0,
                    distinct_count=n_rows,
                    distinct_exact=True,
                    inferred_type="text",
                    type_share=1.0,
                    min_value=HOSTILE,
                    max_value=None,
                    top_values=[[HOSTILE, 2], ["b", 1]],
                    histogram=None,
                    uniqueness=1.0,
                    token_count=n_rows,
                )
            )
        if key:
            s.add(TableKey(table_id=table_id, columns=list(key), exact=True, uniqueness=1.0, score=1.0))


def add_failed_run(engine: Engine, message: str) -> None:
    with session_scope(engine) as s:
        s.add(PublishRun(run_id="run-2", batch_id="2", kind="batch", status="failed", started_at=NOW, message=message))


def exact_answer(column_id: str, candidate_column_id: str, *, rank: int = 1, overlap: int = 3) -> dict[str, object]:
    """A row of `joinable` (the exact list) naming `candidate_column_id` at `rank`."""
    table_id = column_id.split("#", 1)[0]
    candidate_table_id, candidate_header = candidate_column_id.split("#", 1)
    return {
        "column_key": text_key(column_id),
        "rank": rank,
        "column_id": column_id,
        "table_id": table_id,
        "candidate_column_id": candidate_column_id,
        "candidate_table_id": candidate_table_id,
        "candidate_header": candidate_header,
        "overlap": overlap,
        "size": 10,
        "candidate_size": 10,
        "containment": overlap / 10,
        "candidate_containment": overlap / 10,
        "jaccard": overlap / 17,
        "est_join_size": float(overlap),
        "is_key": False,
        "candidate_is_key": False,
        "direction": "many-to-many",
        "exact": True,
        "method": "overlap-groups",
        "index_version": 1,
    }
