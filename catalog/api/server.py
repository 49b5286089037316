"""`serve(settings, host, port, workers)`: the lookup API on uvicorn, in one or several processes.

A lookup is a short CPU-bound stretch of Python around one indexed read, so one process serves one
request at a time; more throughput needs more processes, not threads. The listening socket is bound
once here and handed to every worker process (spawned, so no worker inherits another's database
connections); whichever worker accepts a connection, the workers keep their keep-alive
connections even (`catalog.api.balance`). Each worker builds its own app and engine from the same
settings, and sends each response in one write (`_OneSendPerTurn`).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing as mp
import signal
import socket
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from typing import Any

from catalog.api.balance import Balancer, WorkerBalance
from catalog.core.errors import UserError
from catalog.core.settings import Settings

log = logging.getLogger(__name__)
MAX_WORKERS = 64


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or a one-line `UserError` when the address is taken or invalid."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {port}")
    try:
        sock = socket.create_server((host, port), backlog=2048)
    except OSError as e:
        raise UserError(f"cannot serve on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


class _OneSendPerTurn:
    """A transport proxy that gathers the writes of one event-loop turn into one `send()`.

    uvicorn writes a response's status line and headers, then its body, as two writes; with
    TCP_NODELAY each is its own segment, so every lookup cost two system calls here and woke the
    client twice. Both writes happen in the same turn, so writing at the end of the turn changes no
    response and halves that work."""

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

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


_BALANCE: WorkerBalance | None = None  # this worker's share of `balance.Balancer`, with siblings


def _protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LookupProtocol(HttpToolsProtocol):
        """uvicorn's HTTP protocol with one send per response and, among sibling workers, a new
        connection passed to a sibling that holds fewer (`catalog.api.balance`)."""

        adopted = False  # a connection a sibling passed here: served, never passed on again
        handed_over = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            if _BALANCE is not None and not self.adopted and sock is not None:
                target = _BALANCE.place()
                if target != _BALANCE.me and _BALANCE.hand_over(target, sock.fileno()):
                    self.handed_over = True
                    transport.abort()  # our copy only: the sibling holds the connection now
                    return
            super().connection_made(_OneSendPerTurn(transport, self.loop))  # type: ignore[arg-type]

        def connection_lost(self, exc: Exception | None) -> None:
            if self.handed_over:
                return
            if _BALANCE is not None:
                _BALANCE.closed()
            super().connection_lost(exc)

    return LookupProtocol


def _run_worker(settings: Settings, sock: socket.socket, balance: WorkerBalance | None = None) -> None:
    import uvicorn

    from catalog.api.app import create_app

    global _BALANCE
    _BALANCE = balance

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if balance is not None:  # serve what siblings pass here
                protocol: Any = self.config.http_protocol_class

                def adopted() -> asyncio.Protocol:
                    p = protocol(config=self.config, server_state=self.server_state, app_state=self.lifespan.state)
                    p.adopted = True
                    return p  # type: ignore[no-any-return]

                balance.adopt(asyncio.get_running_loop(), adopted)

    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False, http=_protocol())
    Server(config).run(sockets=[sock])


def serve(settings: Settings, host: str, port: int, *, workers: int = 1) -> None:
    """Serve until interrupted. With `workers > 1` the worker processes share one socket; this
    process only supervises them and stops them all on Ctrl-C or SIGTERM."""
    if not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}")
    sock = bind(host, port)
    log.info("serving the lookup API", extra={"host": host, "port": sock.getsockname()[1], "workers": workers})
    if workers == 1:
        _run_worker(settings, sock)
        return
    balancer = Balancer(workers)
    processes = [mp.get_context("spawn").Process(target=_run_worker, args=(settings, sock, balancer.worker(i)),
                                                 daemon=True) for i in range(workers)]
    for process in processes:
        process.start()
    balancer.close_inboxes()
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
