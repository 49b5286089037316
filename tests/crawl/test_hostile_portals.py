"""A hostile portal against real sockets: a second loopback server on another port stands for any
host a portal might point the crawler at. It must receive no credential, and no request at all
unless the operator allowed its host; downloads end at their deadline however slowly a server
trickles."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from catalog.core.settings import Settings, SourceConfig, load_settings
from plugins.local_portal import PortalHandle
from plugins.sources.http_client import DeadlineError, HttpClient, RefusedError
from plugins.sources.url_policy import UrlPolicy
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.orchestration.tasks import settings_toml
from tests.conftest import make_settings
from tests.crawl.conftest import FAST_CRAWL, bronze, crawl_settings, csv_bytes
from tests.crawl.hostile_servers import Route, recording_server

KEY, TOKEN = "ckan-secret-key", "socrata-app-token"
STOLEN = csv_bytes([["stolen"], ["from elsewhere"]])


def _settings(home: Path, portal: PortalHandle, *allowed: str) -> Settings:
    sources = (
        SourceConfig(name="ck", kind="ckan", url=portal.url, api_key=KEY),
        SourceConfig(name="soc", kind="socrata", url=portal.url, app_token=TOKEN),
    )
    return make_settings(home, crawl=dataclasses.replace(FAST_CRAWL, allowed_hosts=allowed), sources=sources)


def _script(portal: PortalHandle, other_url: str) -> None:
    portal.store.add_ckan("own", [("r1", "CSV", csv_bytes([["a"], ["1"]]))])
    portal.store.add_ckan(
        "elsewhere", [("r2", "CSV", csv_bytes([["b"], ["2"]]))], urls={"r2": f"{other_url}/steal.csv"}
    )
    portal.store.add_ckan("bounce", [("r3", "CSV", csv_bytes([["c"], ["3"]]))])
    portal.add_fault("/download/bounce/r3", "redirect", times=100, location=f"{other_url}/bounced.csv")
    portal.store.add_socrata("abcd-1234", csv_bytes([["d"], ["4"]]))
    portal.add_fault("/api/views/abcd-1234", "redirect", times=100, location=f"{other_url}/token.csv")


def test_other_host_gets_no_request_unless_allowed_and_never_a_credential(tmp_path: Path, portal: PortalHandle) -> None:
    with recording_server() as other:
        for path in ("/steal.csv", "/bounced.csv", "/token.csv"):
            other.routes[path] = Route(STOLEN)
        _script(portal, other.url)

        settings = _settings(tmp_path / "home", portal)
        report = run_crawl(settings)
        failures = dict(report.failures)
        # the portal's own resource lands; the three that lead elsewhere fail alone, with the reason
        assert report.new == 1 and report.failed == 3, report.failures
        assert [r["table_id"] for r in bronze(settings)[0]] == ["ckan:127.0.0.1:own/r1"]
        for tid in ("ckan:127.0.0.1:elsewhere/r2", "ckan:127.0.0.1:bounce/r3", "socrata:127.0.0.1:abcd-1234"):
            assert "refused by the URL policy" in failures[tid] and "allowed_hosts" in failures[tid]
        assert other.received == []

        # the operator allows the other host: it is fetched, still without any credential
        port = other.url.rsplit(":", 1)[1]
        allowed = _settings(tmp_path / "home2", portal, f"127.0.0.1:{port}")
        report = run_crawl(allowed)
        assert report.new == 4 and report.failed == 0, report.failures
        assert sorted(r.path for r in other.received) == ["/bounced.csv", "/steal.csv", "/token.csv"]
        for r in other.received:
            assert "authorization" not in r.headers and "x-app-token" not in r.headers, r
            assert KEY not in str(r.headers) and TOKEN not in str(r.headers)


def test_credentials_reach_the_portal_itself(tmp_path: Path) -> None:
    """The policy does not just drop every header: the portal's own origin gets its key."""
    with recording_server() as portal_like:
        portal_like.routes["/data.csv"] = Route(csv_bytes([["a"], ["1"]]))
        portal_like.routes["/hop"] = Route(status=302, location="/data.csv")
        policy = UrlPolicy(portal_like.url)
        with HttpClient(FAST_CRAWL) as client:
            client.download(f"{portal_like.url}/hop", tmp_path, headers={"Authorization": KEY}, policy=policy)
        assert [(r.path, r.headers.get("authorization")) for r in portal_like.received] == [
            ("/hop", KEY),
            ("/data.csv", KEY),
        ]


def test_a_redirect_loop_ends(tmp_path: Path) -> None:
    with recording_server() as server:
        server.routes["/a"] = Route(status=302, location="/b")
        server.routes["/b"] = Route(status=301, location="/a")
        settings = dataclasses.replace(FAST_CRAWL, max_redirects=4)
        with HttpClient(settings) as client, pytest.raises(RefusedError, match="more than 4 redirects"):
            client.download(f"{server.url}/a", tmp_path)
        assert len(server.received) == 5


def test_non_public_addresses_are_refused_for_a_public_portal() -> None:
    public = UrlPolicy(
        "http://93.184.215.14/", ("127.0.0.1", "169.254.169.254", "10.0.0.7", "93.184.215.15", "[::ffff:127.0.0.1]")
    )
    assert "non-public address 127.0.0.1" in (public.refusal("http://127.0.0.1:8080/x.csv") or "")
    assert "non-public" in (public.refusal("http://169.254.169.254/latest/meta-data/") or "")
    assert "non-public" in (public.refusal("http://10.0.0.7/x.csv") or "")
    assert "non-public" in (public.refusal("http://[::ffff:127.0.0.1]/x.csv") or "")
    assert public.refusal("http://93.184.215.15/x.csv") is None  # allow-listed and public
    assert "allowed_hosts" in (public.refusal("http://93.184.215.16/x.csv") or "")
    assert "user name or password" in (public.refusal("http://u:p@93.184.215.14/x.csv") or "")
    assert "http and https" in (public.refusal("file:///etc/passwd") or "")
    # a portal on loopback may link to its loopback neighbours the operator allowed
    assert UrlPolicy("http://127.0.0.1:9000/", ("127.0.0.1",)).refusal("http://127.0.0.1:8080/x.csv") is None
    # credentials: own origin and its https upgrade only
    home = UrlPolicy("http://93.184.215.14/")
    assert home.credentials_for("https://93.184.215.14/x", {"k": "v"}) == {"k": "v"}
    assert home.credentials_for("http://93.184.215.14:8080/x", {"k": "v"}) == {}
    assert UrlPolicy("https://93.184.215.14/").credentials_for("http://93.184.215.14/x", {"k": "v"}) == {}


def test_a_trickling_download_ends_at_its_deadline(tmp_path: Path) -> None:
    """One byte every 4.5 s never trips a 5 s read timeout; the 2 s deadline still ends the
    download at 2 s, while the next byte is awaited (checking the clock between chunks would only
    notice at 4.5 s; without a deadline it would take over three minutes)."""
    with recording_server() as server:
        server.routes["/slow.csv"] = Route(b"a\n" + b"1\n" * 20, trickle_s=4.5)
        settings = dataclasses.replace(FAST_CRAWL, timeout_s=5.0, download_deadline_s=2.0)
        start = time.monotonic()
        with HttpClient(settings) as client, pytest.raises(DeadlineError, match="deadline of 2 s"):
            client.download(f"{server.url}/slow.csv", tmp_path / "dl")
        elapsed = time.monotonic() - start
        assert 1.9 <= elapsed < 4.0, elapsed
        assert len(server.received) == 1  # a deadline is not retried
        assert list((tmp_path / "dl").iterdir()) == []


def test_a_name_that_resolves_inside_when_connecting_is_refused(tmp_path: Path) -> None:
    """DNS rebinding: the URL check was answered that `localhost` is public (as a hostile DNS
    server would, once); the connection resolves it again, finds loopback, refuses, and the
    server on loopback receives nothing."""
    with recording_server() as server:
        server.routes["/x.csv"] = Route(STOLEN)
        port = server.url.rsplit(":", 1)[1]
        first_answers = {"93.184.215.14": ["93.184.215.14"], "localhost": ["93.184.215.15"]}
        policy = UrlPolicy("http://93.184.215.14/", ("localhost",), resolver=lambda h: first_answers.get(h, []))
        assert policy.refusal(f"http://localhost:{port}/x.csv") is None
        with HttpClient(FAST_CRAWL) as client, pytest.raises(RefusedError, match="non-public address"):
            client.download(f"http://localhost:{port}/x.csv", tmp_path, headers={"Authorization": KEY}, policy=policy)
        assert server.received == []


def test_settings_keep_the_allow_list(tmp_path: Path) -> None:
    """TOML arrays and comma-separated variables become a tuple, and the cluster-mode settings
    file writes it back as an array."""
    settings = crawl_settings(tmp_path / "home", allowed_hosts=("a.example", "b.example:8443"))
    path = tmp_path / "juncture.toml"
    path.write_text(settings_toml(settings))
    assert load_settings({}, config_file=path, cwd=tmp_path).crawl == settings.crawl
    env = {"JUNCTURE_CRAWL_ALLOWED_HOSTS": "x.example, y.example:81"}
    assert load_settings(env, cwd=tmp_path / "home").crawl.allowed_hosts == ("x.example", "y.example:81")
