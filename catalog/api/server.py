"""`serve(settings, host, port, workers)`: the lookup API on uvicorn, in one or several processes.

A lookup is a short CPU-bound stretch of Python around one indexed read, so one process serves one
request at a time; more throughput needs more processes, not threads. With several workers each
one listens on its own socket bound to the same port with `SO_REUSEPORT`, and the kernel spreads
new connections over the listening sockets by a hash of the connection's addresses, whichever
worker is awake (a single shared socket goes to whichever worker wakes first, and asyncio then
accepts every queued connection at once, so a burst of keep-alive clients tends to land on one
worker). The sockets are bound here, in the supervisor, so that a taken port is one `UserError`
before any worker starts; each spawned worker (no inherited database connections) builds its own
app and engine from the same settings and runs uvicorn's public `Server.run(sockets=...)`, on an
event loop (uvicorn's custom `loop` setting) that sends each response in one write
(`_OneWritePerTurn`).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import signal
import socket
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

import uvicorn

from catalog.api.app import create_app
from catalog.core.errors import UserError
from catalog.core.settings import Settings

log = logging.getLogger(__name__)
MAX_WORKERS = 64
BACKLOG = 2048


def _check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {port}")


def bind(host: str, port: int) -> socket.socket:
    """The one listening socket of a single-process server, or a one-line `UserError` when the
    address is taken or invalid."""
    _check_port(port)
    try:
        return socket.create_server((host, port), backlog=BACKLOG)
    except OSError as e:
        raise UserError(f"cannot serve on {host}:{port}: {e.strerror or e}") from None


def bind_shared(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one port, all with `SO_REUSEPORT`, or a one-line `UserError`.

    Any process of the same user may join a `SO_REUSEPORT` group, so a second `juncture serve` on
    a taken port would quietly share it instead of failing. The port is therefore first bound
    without the option (which fails on any socket already bound there, and resolves port 0 to a
    concrete port), then released and bound again by the group."""
    probe = bind(host, port)
    address = probe.getsockname()[:2]
    probe.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(socket.create_server(address, backlog=BACKLOG, reuse_port=True, family=probe.family))
    except OSError as e:
        for s in sockets:
            s.close()
        raise UserError(f"cannot serve on {host}:{port}: {e.strerror or e}") from None
    return sockets


class _OneWritePerTurn:
    """A transport proxy that gathers the writes of one event-loop turn into one `send()`.

    uvicorn writes a response's status line and headers, then its body, as two writes; with
    TCP_NODELAY each is its own segment, so every lookup cost two system calls here and woke the
    client twice. On the two shared cores each wake-up waits for a core, and the load test lost a
    third of its throughput and most of its p99 to the second one. Both writes happen in the same
    turn, so writing at the end of the turn changes no response."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _GatheredWrites(asyncio.Protocol):
    """Serves a connection with `inner` (uvicorn's HTTP protocol), through `_OneWritePerTurn`. Only
    asyncio's protocol interface is used, on both sides."""

    def __init__(self, inner: asyncio.Protocol, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.loop = loop

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(_OneWritePerTurn(transport, self.loop))  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


if TYPE_CHECKING:
    _BaseLoop = asyncio.SelectorEventLoop
else:
    try:
        from uvloop import Loop as _BaseLoop  # the loop uvicorn itself picks when uvloop is installed
    except ImportError:
        _BaseLoop = asyncio.SelectorEventLoop


class _Loop(_BaseLoop):
    """The event loop of a worker: its servers' connections go through `_GatheredWrites`."""

    async def create_server(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], *args: Any, **kwargs: Any
    ) -> asyncio.Server:
        def gathered() -> asyncio.Protocol:
            return _GatheredWrites(protocol_factory(), self)  # type: ignore[arg-type]

        return await super().create_server(gathered, *args, **kwargs)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The worker's event loop, given to uvicorn through its documented `loop="module:function"`
    setting (a custom event loop factory)."""
    return _Loop()


def _run_worker(settings: Settings, sock: socket.socket) -> None:
    """One server process on `sock` until SIGINT or SIGTERM (uvicorn then stops accepting and lets
    the requests in flight finish)."""
    config = uvicorn.Config(
        create_app(settings),
        log_level="warning",
        access_log=False,
        loop=f"{__name__}:new_event_loop",
    )
    uvicorn.Server(config).run(sockets=[sock])


def serve(settings: Settings, host: str, port: int, *, workers: int = 1) -> None:
    """Serve until interrupted. With `workers > 1` this process only supervises the worker
    processes and stops them all on Ctrl-C or SIGTERM."""
    if not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}")
    if workers == 1:
        sock = bind(host, port)
        log.info("serving the lookup API", extra={"host": host, "port": sock.getsockname()[1], "workers": 1})
        _run_worker(settings, sock)
        return
    sockets = bind_shared(host, port, workers)
    log.info("serving the lookup API", extra={"host": host, "port": sockets[0].getsockname()[1], "workers": workers})
    spawn = mp.get_context("spawn")
    processes = [spawn.Process(target=_run_worker, args=(settings, sock), daemon=True) for sock in sockets]
    for process in processes:
        process.start()
    for sock in sockets:  # each worker holds its own copy; a worker that exits takes its socket along
        sock.close()
    _supervise(processes)


def _supervise(processes: Sequence[BaseProcess]) -> None:
    def stop(*_args: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        for process in processes:
            process.join()
    except KeyboardInterrupt:
        pass
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                log.warning("worker ignored SIGTERM; killing it", extra={"pid": process.pid})
                process.kill()
                process.join()
