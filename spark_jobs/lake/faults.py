"""Fault injection at commit boundaries, so tests can prove that a kill anywhere is safe.

Every place that makes something durable (a Delta commit, a rollback, a manifest commit, the
catalog publish's transaction) first calls `checkpoint(label)`. Normally that does nothing. A test
arms one label, either in the environment of a child process (`JUNCTURE_FAULT`, killed with
SIGKILL, exactly what an operator's `kill -9` or an OOM kill does) or in-process with `injected()`
(an `InjectedFault` is raised, which is what any exception mid-way does).

`JUNCTURE_FAULT` is `<label prefix>` or `<label prefix>@<n>`: the n-th checkpoint (1-based) whose
label starts with the prefix fires. `JUNCTURE_FAULT_MODE` is `kill` (default) or `raise`.
`JUNCTURE_FAULT_TRACE=<file>` appends every label passed to that file (in-process: `recording()`).
Labels are `commit:<table>`, `restore:<table>`, `manifest:<unit>` and `publish:<step>`.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ENV_FAULT = "JUNCTURE_FAULT"
ENV_MODE = "JUNCTURE_FAULT_MODE"
ENV_TRACE = "JUNCTURE_FAULT_TRACE"  # a file every checkpoint label passed is appended to


class InjectedFault(RuntimeError):  # noqa: N818 - named for what the tests inject
    """Raised by an armed checkpoint in `raise` mode."""

    def __init__(self, label: str) -> None:
        super().__init__(f"injected fault at {label}")
        self.label = label


@dataclass
class _Armed:
    prefix: str
    nth: int
    mode: str
    hits: int = 0


_lock = threading.Lock()
_armed: _Armed | None = None
_env_read = False
_recorders: list[list[str]] = []


def _parse(spec: str, mode: str) -> _Armed:
    prefix, _, nth = spec.partition("@")
    return _Armed(prefix=prefix, nth=int(nth) if nth else 1, mode=mode)


def _current() -> _Armed | None:
    global _armed, _env_read
    if not _env_read:
        _env_read = True
        spec = os.environ.get(ENV_FAULT)
        if spec and _armed is None:
            _armed = _parse(spec, os.environ.get(ENV_MODE, "kill"))
    return _armed


def checkpoint(label: str) -> None:
    """Mark a point right before something becomes durable; fire if a test armed it."""
    with _lock:
        for recorder in _recorders:
            recorder.append(label)
        trace = os.environ.get(ENV_TRACE)
        if trace:  # a child process's labels, for a test that enumerates kill points from outside
            with open(trace, "a", encoding="utf-8") as f:
                f.write(label + "\n")
        armed = _current()
        if armed is None or not label.startswith(armed.prefix):
            return
        armed.hits += 1
        if armed.hits != armed.nth:
            return
    if armed.mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(label)


@contextmanager
def injected(spec: str) -> Iterator[None]:
    """Arm `spec` (`<label prefix>[@n]`) in this process for the block, in `raise` mode."""
    global _armed, _env_read
    with _lock:
        previous, _armed, _env_read = _armed, _parse(spec, "raise"), True
    try:
        yield
    finally:
        with _lock:
            _armed = previous


@contextmanager
def recording() -> Iterator[list[str]]:
    """Collect every checkpoint label this process passes during the block, in order: how a test
    enumerates the kill points of an operation instead of hard-coding them."""
    labels: list[str] = []
    with _lock:
        _recorders.append(labels)
    try:
        yield labels
    finally:
        with _lock:
            _recorders.remove(labels)
