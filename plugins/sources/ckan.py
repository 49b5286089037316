"""CKAN: list packages with `package_search` and offer every tabular resource of each package.

Paging is keyset paging on a stable sort (`metadata_modified asc, id asc`): each request asks for
`fq=metadata_modified:[<last stamp seen> TO *]` and skips the packages already seen at that exact
stamp, so a package modified while we page moves to the end instead of shifting the pages and
being skipped. `rows` is at most 1000 (CKAN's `ckan.search.rows_max`); packages are deduplicated
by id. `modified_since` gives an incremental listing. Table ids are `ckan:<host>:<package>/<resource>`
with both ids checked before use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from catalog.core.identity import ckan_table_id
from catalog.core.settings import SourceConfig
from plugins.sources.http_client import FetchError, HttpClient
from plugins.sources.listing import PORTAL_ID, BadIdError, ListedTable, ListingError, check_id, tabular_format
from plugins.sources.url_policy import UrlPolicy

log = logging.getLogger(__name__)


class CkanHook:
    def __init__(self, source: SourceConfig, client: HttpClient, *, page_size: int = 1000) -> None:
        self.source = source
        self.client = client
        self.base = source.url.rstrip("/")
        self.host = source.domain or (urlsplit(source.url).hostname or "")
        self.page_size = max(1, min(page_size, 1000))
        self.policy = UrlPolicy(source.url, client.settings.allowed_hosts)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": self.source.api_key} if self.source.api_key else {}

    def _search(self, since: str | None, start: int) -> list[dict[str, Any]]:
        params: dict[str, Any] = {
            "q": "*:*",
            "rows": self.page_size,
            "start": start,
            "sort": "metadata_modified asc, id asc",
        }
        if since:
            params["fq"] = f"metadata_modified:[{since} TO *]"
        try:
            doc = self.client.get_json(
                f"{self.base}/api/3/action/package_search", params=params, headers=self.headers, policy=self.policy
            )
        except FetchError as e:
            raise ListingError(f"ckan package_search at {self.host}: {e}") from None
        result = doc.get("result") if isinstance(doc, dict) and doc.get("success") else None
        packages = result.get("results") if isinstance(result, dict) else None
        if not isinstance(packages, list):
            raise ListingError(f"ckan package_search at {self.host}: unexpected response shape")
        return [p for p in packages if isinstance(p, dict)]

    def packages(self, modified_since: str | None = None) -> Iterator[dict[str, Any]]:
        seen: set[str] = set()
        since, skip = modified_since, 0
        while True:
            page = self._search(since, skip)
            fresh = [p for p in page if p.get("id") not in seen]
            for p in fresh:
                seen.add(str(p.get("id")))
                yield p
            if len(page) < self.page_size:
                return
            last = str(page[-1].get("metadata_modified") or "")
            same = sum(1 for p in page if str(p.get("metadata_modified") or "") == last)
            skip = skip + same if last == since else same
            if not fresh and last == since and same == 0:  # pragma: no cover - defensive
                return
            since = last

    def list_tables(self, modified_since: str | None = None) -> list[ListedTable]:
        out: list[ListedTable] = []
        for pkg in self.packages(modified_since):
            out.extend(self._entries(pkg))
        return out

    def _entries(self, pkg: dict[str, Any]) -> list[ListedTable]:
        try:
            pkg_id = check_id(pkg.get("id"), PORTAL_ID, "CKAN package id")
        except BadIdError as e:
            return [
                ListedTable(
                    table_id=f"ckan:{self.host}:<invalid>",
                    source=self.source.name,
                    name=str(pkg.get("id"))[:80],
                    stamp="",
                    format="",
                    problem=str(e),
                )
            ]
        out = []
        for res in pkg.get("resources") or []:
            if not isinstance(res, dict):
                continue
            url = str(res.get("url") or "")
            fmt = tabular_format(res.get("format"), url, res.get("mimetype"))
            if fmt is None:
                continue
            try:
                res_id = check_id(res.get("id"), PORTAL_ID, "CKAN resource id")
            except BadIdError as e:
                out.append(
                    ListedTable(
                        table_id=f"ckan:{self.host}:{pkg_id}/<invalid>",
                        source=self.source.name,
                        name=str(res.get("id"))[:80],
                        stamp="",
                        format=fmt,
                        problem=str(e),
                    )
                )
                continue
            stamp = "|".join(
                str(x or "") for x in (res.get("last_modified"), res.get("metadata_modified"), res.get("hash"))
            )
            if not stamp.strip("|"):
                stamp = str(pkg.get("metadata_modified") or "")
            if url.startswith("/"):
                url = self.base + url
            refused = self.policy.refusal(url)
            out.append(
                ListedTable(
                    table_id=ckan_table_id(self.host, pkg_id, res_id),
                    source=self.source.name,
                    name=str(res.get("name") or res_id),
                    title=str(pkg.get("title") or "") or None,
                    stamp=stamp,
                    format=fmt,
                    url=url,
                    headers=self.policy.credentials_for(url, self.headers),
                    problem=f"resource URL {url[:80]!r} refused by the URL policy: {refused}" if refused else None,
                    policy=self.policy,
                )
            )
        return out
