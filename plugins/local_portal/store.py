"""The local portal's datasets: a manifest (`portal.json`) plus content-addressed files in a data dir.

A dataset is either a Socrata dataset (one CSV, id in Socrata's four-by-four shape) or a CKAN
package (any number of resources of any format). Every change bumps the dataset's stamp; tests
change content, bump stamps without changing content, add and remove datasets between crawls.
Ids are only ever dictionary keys here: files are named by the SHA-256 of their bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "portal.json"


def four_by_four(name: str) -> str:
    """A stable Socrata-shaped id for a name (e.g. `3f2a-9c01`)."""
    h = hashlib.sha1(name.encode()).hexdigest()
    return f"{h[:4]}-{h[4:8]}"


@dataclass
class Resource:
    id: str
    name: str
    format: str
    file: str  # the sha256 of the bytes, the file's name under <data>/files
    last_modified: str
    content_encoding: str = ""  # "gzip": the stored bytes are sent with Content-Encoding: gzip
    url: str = ""  # listed instead of the portal's own download URL (a resource hosted elsewhere)


class PortalStore:
    def __init__(self, data_dir: Path, *, domain: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.files = self.data_dir / "files"
        self.files.mkdir(parents=True, exist_ok=True)
        self.domain = domain
        self._lock = threading.RLock()
        self._last_stamp = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
        path = self.data_dir / MANIFEST
        self.datasets: dict[str, dict[str, Any]] = {}
        if path.exists():
            self.datasets = json.loads(path.read_text())["datasets"]
            stamps = [d["metadata_modified"] for d in self.datasets.values()]
            if stamps:
                self._last_stamp = dt.datetime.fromisoformat(max(stamps))

    # ------------------------------------------------------------------ persistence
    def _save(self) -> None:
        tmp = self.data_dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps({"domain": self.domain, "datasets": self.datasets}, indent=1, sort_keys=True))
        os.replace(tmp, self.data_dir / MANIFEST)

    def _stamp(self) -> str:
        now = dt.datetime.now(dt.UTC)
        if now <= self._last_stamp:
            now = self._last_stamp + dt.timedelta(microseconds=1)
        self._last_stamp = now
        return now.isoformat(timespec="microseconds")

    def put_file(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self.files / sha
        if not path.exists():
            tmp = self.files / f".{sha}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def file_path(self, sha: str) -> Path:
        return self.files / sha

    # ------------------------------------------------------------------ scripting (tests, seeding)
    def add_socrata(self, ds_id: str, data: bytes, *, title: str = "", column_types: list[str] | None = None) -> str:
        with self._lock:
            stamp = self._stamp()
            self.datasets[f"socrata/{ds_id}"] = {
                "api": "socrata",
                "id": ds_id,
                "title": title or ds_id,
                "metadata_modified": stamp,
                "data_updated_at": stamp,
                "column_types": column_types or [],
                "resources": [vars(Resource("rows", "rows.csv", "CSV", self.put_file(data), stamp))],
            }
            self._save()
        return f"socrata/{ds_id}"

    def add_ckan(
        self,
        pkg_id: str,
        resources: list[tuple[str, str, bytes]],
        *,
        title: str = "",
        encodings: dict[str, str] | None = None,
        urls: dict[str, str] | None = None,
    ) -> str:
        """`resources` are (resource id, format, bytes); `encodings` maps a resource id to `gzip`,
        `urls` a resource id to the URL the listing names for it (another host, say)."""
        with self._lock:
            stamp = self._stamp()
            self.datasets[f"ckan/{pkg_id}"] = {
                "api": "ckan",
                "id": pkg_id,
                "title": title or pkg_id,
                "metadata_modified": stamp,
                "resources": [
                    vars(
                        Resource(
                            rid,
                            f"{rid}.{fmt.lower()}",
                            fmt.upper(),
                            self.put_file(data),
                            stamp,
                            (encodings or {}).get(rid, ""),
                            (urls or {}).get(rid, ""),
                        )
                    )
                    for rid, fmt, data in resources
                ],
            }
            self._save()
        return f"ckan/{pkg_id}"

    def set_content(self, key: str, data: bytes, resource_id: str | None = None) -> None:
        """Replace a resource's bytes (the first resource by default); bumps the stamps."""
        with self._lock:
            ds = self.datasets[key]
            stamp = self._stamp()
            for res in ds["resources"]:
                if resource_id is None or res["id"] == resource_id:
                    res["file"] = self.put_file(data)
                    res["last_modified"] = stamp
                    break
            else:
                raise KeyError(resource_id)
            ds["metadata_modified"] = stamp
            if ds["api"] == "socrata":
                ds["data_updated_at"] = stamp
            self._save()

    def remove_resource(self, key: str, resource_id: str) -> None:
        with self._lock:
            ds = self.datasets[key]
            ds["resources"] = [r for r in ds["resources"] if r["id"] != resource_id]
            ds["metadata_modified"] = self._stamp()
            self._save()

    def touch(self, key: str) -> None:
        """Bump every stamp of a dataset without changing any byte."""
        with self._lock:
            ds = self.datasets[key]
            stamp = self._stamp()
            ds["metadata_modified"] = stamp
            if ds["api"] == "socrata":
                ds["data_updated_at"] = stamp
            for res in ds["resources"]:
                res["last_modified"] = stamp
            self._save()

    def remove(self, key: str) -> None:
        with self._lock:
            del self.datasets[key]
            self._save()

    def snapshot(self, api: str) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(json.dumps(d)) for d in self.datasets.values() if d["api"] == api]

    def find(self, api: str, ds_id: str) -> dict[str, Any] | None:
        with self._lock:
            ds = self.datasets.get(f"{api}/{ds_id}")
            return json.loads(json.dumps(ds)) if ds else None
