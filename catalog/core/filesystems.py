"""Where a path lives: the one place a folder, a lake table or a staged write is resolved to a
pyarrow filesystem and the path on it."""

from __future__ import annotations

import os

import pyarrow.fs as pafs


def filesystem_of(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of a local path (made absolute) or URI (`s3://…`, `file://…`), and the path
    on it."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)
