"""A polite HTTP client for portals: per-host rate limit, timeouts, retries with exponential backoff
and jitter on 429/5xx and connection errors (honouring `Retry-After`), and streaming downloads to
disk with a size cap and a running SHA-256 (never the whole body in memory).

Plain Python over httpx, usable without Airflow. Sleeping goes through an injectable `sleep` so the
tests can check the waits without waiting.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from catalog.core.errors import JunctureError
from catalog.core.settings import CrawlSettings

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class FetchError(JunctureError):
    """A request failed for good (after retries, or with a status that retrying cannot fix)."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{reason} ({_short(url)})")
        self.url, self.reason, self.status = url, reason, status


class TooLargeError(FetchError):
    """The body passed `max_download_bytes` (counted after any Content-Encoding is undone)."""


@dataclass(frozen=True)
class Download:
    path: Path
    sha256: str
    n_bytes: int
    content_type: str


def _short(url: str, limit: int = 200) -> str:
    return url if len(url) <= limit else url[:limit] + "…"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HostRateLimiter:
    """At most `rate` requests per second per host (a minimum spacing between request starts)."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def wait(self, host: str) -> float:
        with self._lock:
            now = self._clock()
            start = max(now, self._next.get(host, now))
            self._next[host] = start + self.interval
        delay = start - now
        if delay > 0:
            self._sleep(delay)
        return delay


class HttpClient:
    """GET with retries. One instance per crawl; it is safe to share between threads."""

    def __init__(self, settings: CrawlSettings, *, headers: Mapping[str, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.limiter = HostRateLimiter(settings.requests_per_second, sleep=sleep)
        self._client = httpx.Client(timeout=httpx.Timeout(settings.timeout_s), follow_redirects=True,
                                    headers={"User-Agent": "juncture-crawler/0.1", **(headers or {})},
                                    transport=transport)
        self.n_requests = 0
        self.n_retries = 0

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full-jitter exponential backoff, but never less than the server's Retry-After."""
        s = self.settings
        cap = min(s.backoff_max_s, s.backoff_base_s * (2 ** attempt))
        delay = self._rng.uniform(0, cap) if cap > 0 else 0.0
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.max_retry_after_s))
        return delay

    def _attempts(self, method: str, url: str, *, params: Mapping[str, Any] | None,
                  headers: Mapping[str, str] | None, handle: Callable[[httpx.Response], Any]) -> Any:
        if urlsplit(url).scheme not in ("http", "https"):
            raise FetchError(url, "only http and https URLs are fetched")
        host = urlsplit(url).netloc
        last: str = "no attempt"
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self.n_retries += 1
            self.limiter.wait(host)
            self.n_requests += 1
            retry_after = None
            try:
                with self._client.stream(method, url, params=params, headers=headers) as resp:
                    if resp.status_code in RETRY_STATUS:
                        retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
                        last = f"HTTP {resp.status_code}"
                        status = resp.status_code
                    elif resp.status_code >= 400:
                        raise FetchError(str(resp.url), f"HTTP {resp.status_code}", resp.status_code)
                    else:
                        return handle(resp)
            except (httpx.TransportError, httpx.DecodingError) as e:  # connection, timeout, truncated body
                last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                status = None
            if attempt < self.settings.max_retries:
                delay = self.backoff(attempt, retry_after)
                log.info("retrying", extra={"url": _short(url), "attempt": attempt + 1, "reason": last,
                                            "delay_s": round(delay, 3)})
                self._sleep(delay)
        raise FetchError(url, f"gave up after {self.settings.max_retries + 1} attempts: {last}", status)

    def get_json(self, url: str, *, params: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> Any:
        """GET a JSON document (capped at max_download_bytes); invalid JSON is a FetchError."""
        import json

        def handle(resp: httpx.Response) -> Any:
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > self.settings.max_download_bytes:
                    raise TooLargeError(url, f"response larger than {self.settings.max_download_bytes} bytes")
            try:
                return json.loads(bytes(body))
            except ValueError as e:
                raise FetchError(url, f"invalid JSON from portal: {e}") from None

        return self._attempts("GET", url, params=params, headers=headers, handle=handle)

    def download(self, url: str, dest_dir: Path, *, params: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> Download:
        """Stream `url` into a new temp file under `dest_dir`, hashing as it goes. The caller moves
        or deletes the file. Bodies over `max_download_bytes` (after decompression) are refused."""
        dest_dir.mkdir(parents=True, exist_ok=True)
        limit = self.settings.max_download_bytes

        def handle(resp: httpx.Response) -> Download:
            declared = resp.headers.get("Content-Length")
            if declared and declared.isdigit() and "Content-Encoding" not in resp.headers and int(declared) > limit:
                raise TooLargeError(url, f"download of {declared} bytes is over the limit of {limit}")
            tmp = dest_dir / f".part-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
            digest, n = hashlib.sha256(), 0
            try:
                with tmp.open("wb") as f:
                    for chunk in resp.iter_bytes(64 * 1024):
                        n += len(chunk)
                        if n > limit:
                            raise TooLargeError(url, f"download over the limit of {limit} bytes")
                        digest.update(chunk)
                        f.write(chunk)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            return Download(tmp, digest.hexdigest(), n, resp.headers.get("Content-Type", ""))

        return self._attempts("GET", url, params=params, headers=headers, handle=handle)
