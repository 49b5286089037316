"""Even keep-alive connections across the worker processes of `juncture serve --workers N`.

The workers share one listening socket and the kernel gives each new connection to whichever
worker wakes first, so a burst of connections often lands unevenly: with 8 keep-alive clients and
2 workers a 5/3 split is common, and then five clients queue behind one process while the other
idles (the lookup load test's p99 moved by 1.5 ms with the split alone).

A shared array counts the connections assigned to each worker. A worker that accepts a connection
while a sibling is assigned fewer assigns it to that sibling (under the array's lock, so that a
burst accepted by one worker spreads out instead of following stale counts), passes its
descriptor over a Unix datagram socket (SCM_RIGHTS) and lets go of its own copy before reading a
byte; the sibling serves it as if it had accepted it. A sibling that has exited cannot be handed
anything (its end of the socket is closed), so such a connection stays where it was accepted.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import socket
from collections.abc import Callable
from typing import Any


class Balancer:
    """The shared part, made by the supervisor: connection counts and one inbox per worker."""

    def __init__(self, workers: int) -> None:
        self.counts: Any = mp.get_context("spawn").Array("i", workers)  # with a lock
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(workers)]
        self.inboxes = [inbox for inbox, _ in pairs]
        self.outboxes = [outbox for _, outbox in pairs]
        for s in self.outboxes:
            s.setblocking(False)

    def worker(self, me: int) -> WorkerBalance:
        """What worker `me` takes along (its own inbox only, so that a dead worker's inbox closes)."""
        return WorkerBalance(me, self.counts, self.inboxes[me], self.outboxes)

    def close_inboxes(self) -> None:
        """The supervisor's copies, closed once the workers hold theirs."""
        for s in self.inboxes:
            s.close()


class WorkerBalance:
    def __init__(self, me: int, counts: Any, inbox: socket.socket, outboxes: list[socket.socket]) -> None:
        self.me, self.counts, self.inbox, self.outboxes = me, counts, inbox, outboxes

    def place(self) -> int:
        """The worker to serve a connection just accepted here: this one, or a sibling assigned
        fewer. Counted as assigned to it from now on."""
        with self.counts.get_lock():
            mine = self.counts[self.me]
            fewest, target = min((self.counts[j], j) for j in range(len(self.outboxes)))
            if fewest >= mine:
                target = self.me
            self.counts[target] += 1
        return target

    def hand_over(self, target: int, fd: int) -> bool:
        """Pass a connection `place` assigned to a sibling; False (and counted here instead) when
        the sibling cannot take it."""
        try:
            socket.send_fds(self.outboxes[target], [b"c"], [fd])
            return True
        except OSError:  # the sibling is gone (its inbox closed) or its inbox is full
            with self.counts.get_lock():
                self.counts[target] -= 1
                self.counts[self.me] += 1
            return False

    def closed(self) -> None:
        with self.counts.get_lock():
            self.counts[self.me] -= 1

    def adopt(self, loop: asyncio.AbstractEventLoop, protocol: Callable[[], asyncio.Protocol]) -> None:
        """Serve the connections siblings pass here with `protocol`."""
        self.inbox.setblocking(False)

        def receive() -> None:
            while True:
                try:
                    _msg, fds, _flags, _addr = socket.recv_fds(self.inbox, 16, 16)
                except BlockingIOError:
                    return
                for fd in fds:
                    connection = socket.socket(fileno=fd)
                    loop.create_task(loop.connect_accepted_socket(protocol, connection))

        loop.add_reader(self.inbox.fileno(), receive)
