"""Socrata: list a domain's datasets with the Discovery API and export each one as CSV.

* Listing: `GET {url}/api/catalog/v1?domains=<domain>&only=dataset&limit=N`, then deep paging with
  `scroll_id=<last id>` (offset paging stops at 10,000 results); results are deduplicated by id.
* Export: `GET {url}/api/views/{id}/rows.csv?accessType=DOWNLOAD` (the id is checked against
  Socrata's four-by-four shape before it goes into a URL).
* `X-App-Token` is sent when the source has an app token, only to the portal's own origin (a
  redirect elsewhere drops it: plugins.sources.url_policy).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

from catalog.core.identity import socrata_table_id
from catalog.core.settings import SourceConfig
from plugins.sources.http_client import FetchError, HttpClient
from plugins.sources.listing import SOCRATA_ID, BadIdError, ListedTable, ListingError, check_id
from plugins.sources.url_policy import UrlPolicy

log = logging.getLogger(__name__)


class SocrataHook:
    def __init__(self, source: SourceConfig, client: HttpClient, *, page_size: int = 1000) -> None:
        self.source = source
        self.client = client
        self.base = source.url.rstrip("/")
        self.domain = source.domain or (urlsplit(source.url).hostname or "")
        self.page_size = max(1, min(page_size, 10_000))
        self.policy = UrlPolicy(source.url, client.settings.allowed_hosts)

    @property
    def headers(self) -> dict[str, str]:
        return {"X-App-Token": self.source.app_token} if self.source.app_token else {}

    def catalog_pages(self) -> Iterator[list[dict[str, Any]]]:
        scroll_id: str | None = None
        while True:
            params: dict[str, Any] = {"domains": self.domain, "only": "dataset", "limit": self.page_size}
            if scroll_id is not None:
                params["scroll_id"] = scroll_id
            try:
                doc = self.client.get_json(
                    f"{self.base}/api/catalog/v1", params=params, headers=self.headers, policy=self.policy
                )
            except FetchError as e:
                raise ListingError(f"socrata catalog of {self.domain}: {e}") from None
            results = doc.get("results") if isinstance(doc, dict) else None
            if not isinstance(results, list):
                raise ListingError(f"socrata catalog of {self.domain}: no `results` list in the response")
            if not results:
                return
            yield results
            last = results[-1].get("resource", {}).get("id") if isinstance(results[-1], dict) else None
            if not isinstance(last, str) or last == scroll_id or len(results) < self.page_size:
                return
            scroll_id = last

    def list_tables(self) -> list[ListedTable]:
        seen: dict[str, ListedTable] = {}
        bad: list[ListedTable] = []
        for page in self.catalog_pages():
            for item in page:
                entry = self._entry(item)
                if entry is not None and entry.problem:
                    bad.append(entry)
                elif entry is not None and entry.table_id not in seen:
                    seen[entry.table_id] = entry
        return list(seen.values()) + bad

    def _entry(self, item: Any) -> ListedTable | None:
        res = item.get("resource") if isinstance(item, dict) else None
        if not isinstance(res, dict):
            return None
        if res.get("type", "dataset") != "dataset":
            return None
        try:
            ds_id = check_id(res.get("id"), SOCRATA_ID, "Socrata dataset id")
        except BadIdError as e:
            log.warning("skipping dataset", extra={"reason": str(e)})
            return ListedTable(
                table_id=f"socrata:{self.domain}:<invalid>",
                source=self.source.name,
                name=str(res.get("id"))[:80],
                stamp="",
                format="csv",
                problem=str(e),
            )
        stamp = "|".join(str(res.get(k) or "") for k in ("data_updated_at", "updatedAt"))
        types = res.get("columns_datatype")
        return ListedTable(
            table_id=socrata_table_id(self.domain, ds_id),
            source=self.source.name,
            name=ds_id,
            title=str(res.get("name") or "") or None,
            stamp=stamp,
            format="csv",
            url=f"{self.base}/api/views/{quote(ds_id, safe='')}/rows.csv?accessType=DOWNLOAD",
            headers=self.headers,
            policy=self.policy,
            portal_types=tuple(str(t) for t in types) if isinstance(types, list) else (),
        )
