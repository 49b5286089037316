"""The polite HTTP client against the real local portal with injected faults (no mocks): retries on
429/5xx/connection errors, Retry-After honoured, size caps, streaming downloads."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from plugins.local_portal import PortalHandle
from plugins.sources.http_client import FetchError, HostRateLimiter, HttpClient, TooLargeError, retry_after_seconds
from tests.crawl.conftest import FAST_CRAWL


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_retry_after_429_is_honoured(portal: PortalHandle) -> None:
    portal.store.add_socrata("abcd-1234", b"a\n1\n")
    portal.add_fault("/api/views/abcd-1234", "429", times=2, retry_after=7)
    sleeps = Sleeps()
    settings = FAST_CRAWL.__class__(**{**FAST_CRAWL.__dict__, "max_retry_after_s": 60.0})
    with HttpClient(settings, sleep=sleeps) as client:
        doc = client.get_json(f"{portal.url}/api/catalog/v1")
        assert [r["resource"]["id"] for r in doc["results"]] == ["abcd-1234"]
        dl = client.download(f"{portal.url}/api/views/abcd-1234/rows.csv", Path(portal.store.data_dir) / "dl")
    assert dl.path.read_bytes() == b"a\n1\n" and dl.sha256 == hashlib.sha256(b"a\n1\n").hexdigest()
    waits = [s for s in sleeps if s >= 1]
    assert waits == [7.0, 7.0]  # two 429s, each waited exactly Retry-After (jitter is below it)
    assert client.n_retries == 2


@pytest.mark.parametrize("kind", ["500", "truncate", "slow"])
def test_transient_faults_are_retried(portal: PortalHandle, tmp_path: Path, kind: str) -> None:
    body = b"x,y\n" + b"1,2\n" * 5000
    portal.store.add_socrata("abcd-1234", body)
    portal.add_fault("/api/views/abcd-1234", kind, times=2, delay=6.0)
    settings = FAST_CRAWL.__class__(**{**FAST_CRAWL.__dict__, "timeout_s": 1.5})
    with HttpClient(settings, sleep=Sleeps()) as client:
        dl = client.download(f"{portal.url}/api/views/abcd-1234/rows.csv", tmp_path)
    # both injected faults were retried; a loaded machine may time out a healthy answer once more,
    # which is also retried, so the count is a lower bound, never an exact timing-dependent number
    assert dl.path.read_bytes() == body and client.n_retries >= 2


def test_persistent_fault_gives_up_with_reason(portal: PortalHandle, tmp_path: Path) -> None:
    portal.store.add_socrata("abcd-1234", b"a\n1\n")
    portal.add_fault("/api/views/abcd-1234", "500", times=100)
    with HttpClient(FAST_CRAWL, sleep=Sleeps()) as client, pytest.raises(FetchError, match="HTTP 500"):
        client.download(f"{portal.url}/api/views/abcd-1234/rows.csv", tmp_path / "dl")
    assert client.n_requests == FAST_CRAWL.max_retries + 1
    assert list((tmp_path / "dl").iterdir()) == []  # no partial file left behind


def test_404_is_not_retried(portal: PortalHandle, tmp_path: Path) -> None:
    with HttpClient(FAST_CRAWL, sleep=Sleeps()) as client, pytest.raises(FetchError, match="HTTP 404"):
        client.download(f"{portal.url}/download/nope/nope", tmp_path)
    assert client.n_requests == 1


def test_size_cap_and_gzip_content_encoding_bomb(portal: PortalHandle, tmp_path: Path) -> None:
    settings = FAST_CRAWL.__class__(**{**FAST_CRAWL.__dict__, "max_download_bytes": 1_000_000})
    portal.store.add_socrata("abcd-1234", b"a\n" + b"1\n" * 600_000)
    bomb = gzip.compress(b"a\n" + b"0" * 50_000_000, compresslevel=9)
    assert len(bomb) < 100_000
    portal.store.add_ckan("bomb", [("r", "CSV", bomb)], encodings={"r": "gzip"})
    with HttpClient(settings, sleep=Sleeps()) as client:
        with pytest.raises(TooLargeError):
            client.download(f"{portal.url}/api/views/abcd-1234/rows.csv", tmp_path / "dl")
        with pytest.raises(TooLargeError):
            client.download(f"{portal.url}/download/bomb/r", tmp_path / "dl")
    assert list((tmp_path / "dl").iterdir()) == []


def test_invalid_json_and_non_http_urls(portal: PortalHandle) -> None:
    portal.add_fault("/api/catalog/v1", "invalid_json", times=1)
    with HttpClient(FAST_CRAWL, sleep=Sleeps()) as client:
        with pytest.raises(FetchError, match="invalid JSON"):
            client.get_json(f"{portal.url}/api/catalog/v1")
        with pytest.raises(FetchError, match="only http"):
            client.get_json("file:///etc/passwd")


def test_retry_after_parsing_and_rate_limiter() -> None:
    assert retry_after_seconds("12") == 12.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    clock = [100.0]
    sleeps = Sleeps()
    limiter = HostRateLimiter(4.0, clock=lambda: clock[0], sleep=sleeps)
    for _ in range(3):
        limiter.wait("a")
    limiter.wait("b")  # another host is not held back
    assert sleeps == [0.25, 0.5]
