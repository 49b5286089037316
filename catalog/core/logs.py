"""Structured logging: one `key=value` line per event, with the ids of the work in hand.

Jobs bind `dataset_id`, `batch_id` and similar ids once with `log_context(...)`; every record logged
inside the block carries them, so a line can always be traced to the batch and dataset it concerns.
Set `JUNCTURE_LOG_FORMAT=json` (through settings) for one JSON object per line instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("juncture_log_context", default=None)

_STANDARD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach `fields` (e.g. batch_id=..., dataset_id=...) to every record logged inside the block."""
    token = _CONTEXT.set({**(_CONTEXT.get() or {}), **fields})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS and not k.startswith("_")}
    return {**(_CONTEXT.get() or {}), **extra}


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class KeyValueFormatter(logging.Formatter):
    """`ts=… level=info logger=juncture.crawl event="dataset landed" dataset_id=… n_rows=…`"""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [
            f"ts={ts}",
            f"level={record.levelname.lower()}",
            f"logger={record.name}",
            f"event={_quote(record.getMessage())}",
        ]
        parts += [f"{k}={_quote(v)}" for k, v in _fields(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line, same fields as `KeyValueFormatter`."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def configure_logging(verbosity: int = 0, *, fmt: str = "kv", stream: Any = None) -> None:
    """Route Juncture's loggers to stderr. verbosity: -1 quiet (errors), 0 info… warnings, 1+ debug."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    for name in ("catalog", "spark_jobs", "plugins", "dags", "juncture"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    # Spark's py4j and Airflow are chatty; keep them at warnings unless asked for debug output.
    for noisy in ("py4j", "airflow", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbosity >= 2 else logging.WARNING)
