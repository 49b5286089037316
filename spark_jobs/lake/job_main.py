"""The `main(argv)` every per-batch Spark job shares, so `spark-submit spark_jobs/<job>.py --batch-id N`
runs exactly the `run(spark, settings, batch)` a test or a DAG task calls."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from catalog.core.logs import configure_logging
from catalog.core.settings import load_settings
from spark_jobs.lake.batches import load_batch
from spark_jobs.lake.session import get_spark
from spark_jobs.lake.store import LakeStore

log = logging.getLogger(__name__)


def batch_job_main(
    prog: str, run: Callable[..., Any], argv: Sequence[str] | None = None, *, full_flag: bool = False
) -> int:
    """Parse `--batch-id N` (and `--full` when the job has a full mode), load settings, start Spark,
    run the job for that batch and log its result."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--batch-id", type=int, required=True)
    if full_flag:
        parser.add_argument("--full", action="store_true", help="recompute every list")
    args = parser.parse_args(argv)

    settings = load_settings()
    configure_logging(1, fmt=settings.log_format)
    spark = get_spark(settings, f"juncture.{prog}")
    batch = load_batch(LakeStore(settings.lake, spark), args.batch_id)
    result = run(spark, settings, batch, full=args.full) if full_flag else run(spark, settings, batch)
    log.info(
        "job done",
        extra={
            "job": prog,
            "batch_id": args.batch_id,
            "result": json.dumps(getattr(result, "__dict__", result), default=str),
        },
    )
    return 0
