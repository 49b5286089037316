"""Airflow test fixtures: one AIRFLOW_HOME (SQLite metadata DB) under pytest's tmp for the whole
session — Airflow reads its configuration once per process — and per-test Juncture homes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from catalog.core.settings import AirflowSettings, Settings
from tests.conftest import make_settings


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("airflow-home")


@pytest.fixture
def af_settings(tmp_path: Path, airflow_home: Path) -> Settings:
    """Test settings with embedded Airflow under the session's AIRFLOW_HOME (never the repo)."""
    base = make_settings(tmp_path / "home")
    return dataclasses.replace(base, airflow=AirflowSettings(home=str(airflow_home)), lock_wait_s=60.0)
