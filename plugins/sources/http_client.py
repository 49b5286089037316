"""A polite HTTP client for portals: per-host rate limit, timeouts, retries with exponential backoff
and jitter on 429/5xx and connection errors (honouring `Retry-After`), and streaming downloads to
disk with a size cap and a running SHA-256 (never the whole body in memory).

Every request follows its source's `UrlPolicy` (plugins.sources.url_policy): redirects are followed
here, one hop at a time, each hop checked against the policy, and credentials are dropped once a
hop leaves the portal's origin. Every call has a total deadline (`download_deadline_s`) besides the
per-read timeout: a server that trickles a byte every few seconds never times a read out, so each
socket operation waits at most until the deadline (a network backend bounds it), and the call then
fails without retrying.

Plain Python over httpx, usable without Airflow. Sleeping goes through an injectable `sleep` so the
tests can check the waits without waiting.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from catalog.core.errors import JunctureError
from catalog.core.settings import CrawlSettings
from plugins.sources.url_policy import UrlPolicy, is_internal, resolve_addresses

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})


class FetchError(JunctureError):
    """A request failed for good (after retries, or with a status that retrying cannot fix)."""

    def __init__(self, url: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{reason} ({_short(url)})")
        self.url, self.reason, self.status = url, reason, status


class TooLargeError(FetchError):
    """The body passed `max_download_bytes` (counted after any Content-Encoding is undone)."""


class DeadlineError(FetchError):
    """The call passed its total deadline (`download_deadline_s`); not retried."""


class RefusedError(FetchError):
    """The URL policy refused the URL or a redirect hop; not retried."""


# This thread's current call: `.at`, the monotonic time it must end by; `.allow_internal`, whether
# its connections may go to non-public addresses (only when the portal itself is on one).
_DEADLINE = threading.local()


def _bounded(timeout: float | None) -> float | None:
    """`timeout` shortened to what is left of this thread's deadline (a ReadTimeout once it passed)."""
    at = getattr(_DEADLINE, "at", None)
    if at is None:
        return timeout
    remaining = at - time.monotonic()
    if remaining <= 0:
        raise httpcore.ReadTimeout("the download deadline passed")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write waits at most until the thread's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        """A connection to `host`, pinned to addresses checked here: a public portal's call never
        reaches a non-public address, even when DNS answers differently than it did for the URL check."""
        if getattr(_DEADLINE, "allow_internal", True):
            return _DeadlineStream(
                self._inner.connect_tcp(host, port, _bounded(timeout), local_address, socket_options)
            )
        addresses = resolve_addresses(host)
        internal = [a for a in addresses if is_internal(a)]
        if internal:
            raise RefusedError(
                f"{host}:{port}",
                f"refused by the URL policy: host {host} resolves to the non-public address {internal[0]}",
            )
        error: Exception = httpcore.ConnectError(f"{host} does not resolve")
        for address in addresses:
            try:
                return _DeadlineStream(
                    self._inner.connect_tcp(address, port, _bounded(timeout), local_address, socket_options)
                )
            except httpcore.ConnectError as e:
                error = e
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:  # pragma: no cover - unused
        return _DeadlineStream(self._inner.connect_unix_socket(path, _bounded(timeout), socket_options))

    def sleep(self, seconds: float) -> None:  # pragma: no cover - httpcore retries are off
        self._inner.sleep(seconds)


# httpcore's errors and the httpx errors the client catches (httpx's own transport maps them the same way).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as e:
        for core, mapped in _ERRORS:
            if isinstance(e, core):
                raise mapped(str(e), request=request) from e
        raise


class _Body(httpx.SyncByteStream):
    """A response body read through the pool, its errors as httpx's."""

    def __init__(self, response: httpcore.Response, request: httpx.Request) -> None:
        self._response, self._request = response, request

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors(self._request):
            yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class _DeadlineTransport(httpx.BaseTransport):
    """httpx's public transport interface over an httpcore connection pool whose sockets honour the
    call's deadline and connect only to checked addresses (`_DeadlineBackend`). httpx's own
    transport takes no network backend, hence this small one of our own."""

    def __init__(self) -> None:
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=cast(Iterable[bytes], request.stream),
            extensions=request.extensions,
        )
        with _as_httpx_errors(request):
            response = self._pool.handle_request(core)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def _deadline_transport() -> httpx.BaseTransport:
    return _DeadlineTransport()


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

    def __init__(
        self, rate: float, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ) -> None:
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

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.limiter = HostRateLimiter(settings.requests_per_second, sleep=sleep)
        self._client = httpx.Client(
            timeout=httpx.Timeout(settings.timeout_s),
            follow_redirects=False,
            headers={"User-Agent": "juncture-crawler/0.1", **(headers or {})},
            transport=transport or _deadline_transport(),
        )
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
        cap = min(s.backoff_max_s, s.backoff_base_s * (2**attempt))
        delay = self._rng.uniform(0, cap) if cap > 0 else 0.0
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.max_retry_after_s))
        return delay

    def _attempts(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        handle: Callable[[httpx.Response], Any],
        policy: UrlPolicy | None,
    ) -> Any:
        """`handle(response)` of the first good answer, retrying what retrying can fix, all within
        the call's deadline. Without a policy, the URL's own origin is the portal's."""
        policy = policy or UrlPolicy(url, self.settings.allowed_hosts)
        _check(policy, url)
        _DEADLINE.at = time.monotonic() + self.settings.download_deadline_s
        _DEADLINE.allow_internal = policy.home_is_internal()
        try:
            return self._retrying(method, url, params, headers or {}, handle, policy)
        finally:
            _DEADLINE.at, _DEADLINE.allow_internal = None, True

    def _retrying(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str],
        handle: Callable[[httpx.Response], Any],
        policy: UrlPolicy,
    ) -> Any:
        last: str = "no attempt"
        status: int | None = None
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self.n_retries += 1
            retry_after = None
            try:
                with self._follow(method, url, params, headers, policy) as resp:
                    if resp.status_code in RETRY_STATUS:
                        retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
                        last = f"HTTP {resp.status_code}"
                        status = resp.status_code
                    elif resp.status_code >= 400:
                        raise FetchError(str(resp.url), f"HTTP {resp.status_code}", resp.status_code)
                    else:
                        return handle(resp)
            except (httpx.TransportError, httpx.DecodingError) as e:  # connection, timeout, truncated body
                _check_deadline(url, self.settings.download_deadline_s)
                last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                status = None
            if attempt < self.settings.max_retries:
                delay = self.backoff(attempt, retry_after)
                if time.monotonic() + delay > _DEADLINE.at:
                    raise DeadlineError(
                        url,
                        f"gave up at the deadline of {self.settings.download_deadline_s:g} s "
                        f"(next retry would start after it): {last}",
                        status,
                    )
                log.info(
                    "retrying",
                    extra={"url": _short(url), "attempt": attempt + 1, "reason": last, "delay_s": round(delay, 3)},
                )
                self._sleep(delay)
        raise FetchError(url, f"gave up after {self.settings.max_retries + 1} attempts: {last}", status)

    @contextlib.contextmanager
    def _follow(
        self, method: str, url: str, params: Mapping[str, Any] | None, headers: Mapping[str, str], policy: UrlPolicy
    ) -> Iterator[httpx.Response]:
        """The response at the end of `url`'s redirects, each hop checked against `policy`; the
        credentials in `headers` go only to the portal's origin, and never again once a hop left it."""
        credentials = policy.credentials_for(url, headers)
        for _hop in range(self.settings.max_redirects + 1):
            _check(policy, url)
            self.limiter.wait(urlsplit(url).netloc)
            self.n_requests += 1
            resp = self._client.send(
                self._client.build_request(method, url, params=params, headers=credentials), stream=True
            )
            location = resp.headers.get("Location") if resp.status_code in REDIRECT_STATUS else None
            if location is None:
                try:
                    yield resp
                finally:
                    resp.close()
                return
            resp.close()
            url, params = urljoin(str(resp.url), location), None
            if credentials and not policy.credentials_for(url, credentials):
                credentials = {}
            if resp.status_code == 303:
                method = "GET"
        raise RefusedError(url, f"more than {self.settings.max_redirects} redirects")

    def get_json(
        self,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        policy: UrlPolicy | None = None,
    ) -> Any:
        """GET a JSON document (capped at max_download_bytes); invalid JSON is a FetchError."""

        def handle(resp: httpx.Response) -> Any:
            body = bytearray()
            for chunk in resp.iter_bytes():
                _check_deadline(url, self.settings.download_deadline_s)
                body += chunk
                if len(body) > self.settings.max_download_bytes:
                    raise TooLargeError(url, f"response larger than {self.settings.max_download_bytes} bytes")
            try:
                return json.loads(bytes(body))
            except ValueError as e:
                raise FetchError(url, f"invalid JSON from portal: {e}") from None

        return self._attempts("GET", url, params=params, headers=headers, handle=handle, policy=policy)

    def download(
        self,
        url: str,
        dest_dir: Path,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        policy: UrlPolicy | None = None,
    ) -> Download:
        """Stream `url` into a new temp file under `dest_dir`, hashing as it goes. The caller moves
        or deletes the file. Bodies over `max_download_bytes` (after decompression) are refused, and
        so is a download still running at `download_deadline_s`."""
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
                        _check_deadline(url, self.settings.download_deadline_s)
                        n += len(chunk)
                        if n > limit:
                            raise TooLargeError(url, f"download over the limit of {limit} bytes")
                        digest.update(chunk)
                        f.write(chunk)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            return Download(tmp, digest.hexdigest(), n, resp.headers.get("Content-Type", ""))

        return self._attempts("GET", url, params=params, headers=headers, handle=handle, policy=policy)


def _check(policy: UrlPolicy, url: str) -> None:
    reason = policy.refusal(url)
    if reason is not None:
        raise RefusedError(url, f"refused by the URL policy: {reason}")


def _check_deadline(url: str, deadline_s: float) -> None:
    at = getattr(_DEADLINE, "at", None)
    if at is not None and time.monotonic() >= at:
        raise DeadlineError(url, f"not finished within the deadline of {deadline_s:g} s")
