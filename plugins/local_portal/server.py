"""The local portal's HTTP server: Socrata Discovery + export and the CKAN action API on loopback.

Endpoints:
* `GET /api/catalog/v1?domains=&only=dataset&limit=&offset=&scroll_id=` (results sorted by id;
  `scroll_id` returns the ids after it; `offset + limit > 10000` is an error, as on Socrata);
* `GET /api/views/{id}/rows.csv?accessType=DOWNLOAD`;
* `GET /api/3/action/package_search?rows=&start=&sort=&fq=metadata_modified:[X TO *]`
  (rows capped at 1000; sorted by metadata_modified then id);
* `GET /download/{package}/{resource}` (a CKAN resource's bytes).

Faults are scripted per path substring: `429` (with Retry-After), `500`, `404`, `slow` (sleeps
`delay` seconds before answering), `truncate` (declares the full length, sends half and closes),
`invalid_json`, `redirect` (302 to `location`); each fires `times` times.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from plugins.local_portal.store import PortalStore

log = logging.getLogger(__name__)

_FQ_MODIFIED = re.compile(r"metadata_modified:\[(\S+) TO (\S+)\]")


@dataclass
class Fault:
    match: str
    kind: str
    times: int = 1
    retry_after: int = 1
    delay: float = 0.0
    location: str = ""


class PortalServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, store: PortalStore, port: int = 0, host: str = "127.0.0.1") -> None:
        super().__init__((host, port), _Handler)
        self.store = store
        self.faults: list[Fault] = []
        self.requests: list[str] = []
        self._fault_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (timeouts, size caps) is routine here: log it, do not print it."""
        log.debug("portal connection error", exc_info=True)

    def take_fault(self, path: str) -> Fault | None:
        with self._fault_lock:
            self.requests.append(path)
            for f in self.faults:
                if f.times > 0 and f.match in path:
                    f.times -= 1
                    return f
        return None


class _Handler(BaseHTTPRequestHandler):
    server: PortalServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("portal request", extra={"line": format % args})

    # ------------------------------------------------------------------ responses
    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, doc: Any, status: int = 200) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": True, "message": message}, status)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        self._truncated = False
        fault = self.server.take_fault(self.path)
        if fault is not None:
            if fault.kind == "slow":
                time.sleep(fault.delay)
            elif fault.kind == "429":
                self._send(429, b"slow down", "text/plain", {"Retry-After": str(fault.retry_after)})
                return
            elif fault.kind in ("500", "404"):
                self._send(int(fault.kind), b"<html><body>error</body></html>", "text/html")
                return
            elif fault.kind == "redirect":
                self._send(302, b"", "text/plain", {"Location": fault.location})
                return
            elif fault.kind == "invalid_json":
                self._send(200, b'{"results": [ {"resource": ', "application/json")
                return
            elif fault.kind == "truncate":
                self._truncated = True
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            if path == "/api/catalog/v1":
                self._socrata_catalog(query)
            elif m := re.fullmatch(r"/api/views/([^/]+)/rows\.csv", path):
                self._socrata_export(m.group(1))
            elif path == "/api/3/action/package_search":
                self._ckan_search(query)
            elif m := re.fullmatch(r"/download/([^/]+)/([^/]+)", path):
                self._ckan_download(m.group(1), m.group(2))
            else:
                self._error(404, "not found")
        except (ValueError, KeyError) as e:
            self._error(400, f"bad request: {e}")

    def _file(self, sha: str, content_type: str, encoding: str = "") -> None:
        data = self.server.store.file_path(sha).read_bytes()
        headers = {"Content-Encoding": encoding} if encoding else {}
        if getattr(self, "_truncated", False):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(200, data, content_type, headers)

    # ------------------------------------------------------------------ Socrata
    def _base(self) -> str:
        host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
        return f"http://{host}"

    def _socrata_catalog(self, q: dict[str, str]) -> None:
        store = self.server.store
        limit = int(q.get("limit", "100"))
        offset = int(q.get("offset", "0"))
        if limit < 0 or offset < 0 or limit > 10_000:
            raise ValueError("limit must be in [0, 10000]")
        if offset + limit > 10_000:
            self._error(500, "offset + limit over 10000: use scroll_id")
            return
        domains = {d.strip() for d in q.get("domains", "").split(",") if d.strip()}
        if q.get("only", "dataset") not in ("dataset", "datasets"):
            items: list[dict[str, Any]] = []
        elif domains and store.domain not in domains:
            items = []
        else:
            items = sorted(store.snapshot("socrata"), key=lambda d: d["id"])
        if "scroll_id" in q:
            items = [d for d in items if d["id"] > q["scroll_id"]]
        total = len(items)
        page = items[offset : offset + limit]
        base = self._base()
        self._json(
            {
                "resultSetSize": total,
                "results": [
                    {
                        "resource": {
                            "id": d["id"],
                            "name": d["title"],
                            "type": "dataset",
                            "updatedAt": d["metadata_modified"],
                            "data_updated_at": d["data_updated_at"],
                            "metadata_updated_at": d["metadata_modified"],
                            "columns_datatype": d["column_types"],
                        },
                        "metadata": {"domain": store.domain},
                        "permalink": f"{base}/d/{quote(d['id'], safe='')}",
                        "link": f"{base}/d/{quote(d['id'], safe='')}",
                    }
                    for d in page
                ],
            }
        )

    def _socrata_export(self, ds_id: str) -> None:
        ds = self.server.store.find("socrata", ds_id)
        if ds is None or not ds["resources"]:
            self._error(404, "no such dataset")
            return
        self._file(ds["resources"][0]["file"], "text/csv; charset=utf-8")

    # ------------------------------------------------------------------ CKAN
    def _ckan_search(self, q: dict[str, str]) -> None:
        rows = min(int(q.get("rows", "10")), 1000)
        start = int(q.get("start", "0"))
        if rows < 0 or start < 0:
            raise ValueError("rows and start must not be negative")
        packages = self.server.store.snapshot("ckan")
        fq = q.get("fq", "")
        if fq:
            m = _FQ_MODIFIED.fullmatch(fq.strip())
            if not m:
                raise ValueError(f"unsupported fq {fq!r}")
            low, high = m.group(1), m.group(2)
            packages = [
                p
                for p in packages
                if (low == "*" or p["metadata_modified"] >= low)
                and (high in ("*", "NOW") or p["metadata_modified"] <= high)
            ]
        packages.sort(key=lambda p: (p["metadata_modified"], p["id"]))
        if q.get("sort", "").replace(" ", "").lower().startswith("metadata_modifieddesc"):
            packages.reverse()
        base = self._base()
        page = packages[start : start + rows]
        self._json(
            {
                "success": True,
                "result": {
                    "count": len(packages),
                    "results": [
                        {
                            "id": p["id"],
                            "name": p["id"],
                            "title": p["title"],
                            "metadata_modified": p["metadata_modified"],
                            "resources": [
                                {
                                    "id": r["id"],
                                    "name": r["name"],
                                    "format": r["format"],
                                    "last_modified": r["last_modified"],
                                    "metadata_modified": r["last_modified"],
                                    "package_id": p["id"],
                                    "url": r.get("url")
                                    or f"{base}/download/{quote(p['id'], safe='')}/{quote(r['id'], safe='')}",
                                }
                                for r in p["resources"]
                            ],
                        }
                        for p in page
                    ],
                },
            }
        )

    def _ckan_download(self, pkg_id: str, res_id: str) -> None:
        pkg = self.server.store.find("ckan", pkg_id)
        res = next((r for r in (pkg or {}).get("resources", []) if r["id"] == res_id), None)
        if res is None:
            self._send(HTTPStatus.NOT_FOUND, b"<html><body>404 Not Found</body></html>", "text/html")
            return
        ctype = {"CSV": "text/csv", "TSV": "text/tab-separated-values", "JSON": "application/json"}.get(
            res["format"], "application/octet-stream"
        )
        self._file(res["file"], ctype, res.get("content_encoding", ""))


class PortalHandle:
    """A running portal: `.url`, `.store` (script datasets), `.add_fault(...)`, `.stop()`. A
    `scratch` folder (the portal's own temporary data) is removed when it stops."""

    def __init__(self, server: PortalServer, thread: threading.Thread, scratch: Path | None = None) -> None:
        self.server, self.thread, self.scratch = server, thread, scratch
        self.store = server.store
        host, port = server.server_address[:2]
        self.port = int(port)
        self.url = f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def add_fault(
        self, match: str, kind: str, *, times: int = 1, retry_after: int = 1, delay: float = 0.0, location: str = ""
    ) -> None:
        with self.server._fault_lock:
            self.server.faults.append(Fault(match, kind, times, retry_after, delay, location))

    def clear_faults(self) -> None:
        with self.server._fault_lock:
            self.server.faults.clear()

    @property
    def requests(self) -> list[str]:
        return list(self.server.requests)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> PortalHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_background(
    data_dir: Path | None = None, port: int = 0, *, seed: str | None = None, domain: str = "127.0.0.1"
) -> PortalHandle:
    """Start the portal on 127.0.0.1:`port` (0: any free port) in a daemon thread.

    `data_dir` defaults to a fresh temporary folder, removed when the portal stops (the demo seed
    is about 40 MB); an empty folder is seeded with real tables when `seed` is given ("demo" or
    "all", see `plugins.local_portal.seed`)."""

    scratch: Path | None = None
    if data_dir is None:
        scratch = data_dir = Path(tempfile.mkdtemp(prefix="juncture-portal-"))
    try:
        store = PortalStore(Path(data_dir), domain=domain)
        if seed and not store.datasets:
            from plugins.local_portal.seed import seed_real_tables  # deferred: seed data packages load only to seed

            seed_real_tables(store, seed)
        server = PortalServer(store, port)
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    thread = threading.Thread(target=server.serve_forever, name="juncture-portal", daemon=True)
    thread.start()
    return PortalHandle(server, thread, scratch)
