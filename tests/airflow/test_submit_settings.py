"""Cluster mode hands a spark-submitted job its settings (catalog URL, portal keys) in a file: the
file is readable by this user only and is gone when the job ends, however it ends."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from spark_jobs.orchestration.tasks import private_settings_file

SECRET = 'catalog_url = "postgresql://juncture:s3cret@db/juncture"\n'


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_settings_file_is_private_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / "airflow" / "submit"
    with private_settings_file(folder, "run-1-publish.toml", SECRET) as path:
        assert path.read_text() == SECRET
        assert _mode(path) == 0o600 and _mode(folder) == 0o700
    assert not path.exists() and list(folder.iterdir()) == []


def test_settings_file_is_removed_when_the_job_fails(tmp_path: Path) -> None:
    folder = tmp_path / "submit"
    folder.mkdir(mode=0o755)
    stale = folder / "run-2-tokens.toml"
    stale.write_text("left by a killed run")
    stale.chmod(0o644)
    with pytest.raises(RuntimeError), private_settings_file(folder, stale.name, SECRET) as path:
        assert path.read_text() == SECRET and _mode(path) == 0o600 and _mode(folder) == 0o700
        raise RuntimeError("spark-submit failed")
    assert list(folder.iterdir()) == []
