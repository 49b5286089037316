"""A crawl's outcome in the catalog (`crawl_runs`, `crawl_failures`): what it found, the batch it
landed, and every dataset it could not read with the reason, so that the catalog's state page (and
anyone querying the catalog) can say why a table is missing or stale without the crawl's log.

Recorded after the landing, in its own transaction: the lake is the record of what was landed, and
a catalog that cannot be written (down, read-only) costs the record, never the crawl."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from catalog.core.identity import storable_text
from catalog.core.settings import Settings
from catalog.db.engine import open_catalog, session_scope
from catalog.db.models import CrawlFailure, CrawlRun

log = logging.getLogger(__name__)

MAX_REASON = 2000  # characters of a failure's reason kept (a portal's error page can be long)


def record_crawl(
    settings: Settings,
    sources: Sequence[str],
    counts: dict[str, int],
    batch_id: int | None,
    failures: Sequence[tuple[str, str]],
) -> str | None:
    """Store one crawl; its run id, or None when the catalog could not be written (logged)."""
    run_id = f"crawl-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    try:
        with session_scope(open_catalog(settings.catalog_url)) as session:
            session.add(
                CrawlRun(
                    run_id=run_id,
                    finished_at=dt.datetime.now(dt.UTC),
                    sources=[storable_text(s) for s in sources],
                    batch_id=None if batch_id is None else str(batch_id),
                    **counts,
                )
            )
            session.flush()
            session.add_all(
                CrawlFailure(
                    run_id=run_id,
                    position=i,
                    dataset=storable_text(dataset),
                    reason=storable_text(reason)[:MAX_REASON],
                )
                for i, (dataset, reason) in enumerate(failures)
            )
    except (SQLAlchemyError, OSError) as e:
        log.warning("the crawl was not recorded in the catalog", extra={"error": str(e)[:500]})
        return None
    return run_id
