"""`python -m spark_jobs.orchestration.run_stage STAGE --batch-ids 1,2` (or `spark-submit` of this file):
run one pipeline stage for some change batches. What a cluster-mode `lake_index` task submits; the
embedded mode calls the same `dag_tasks.run_stage` in-process."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from catalog.core.logs import configure_logging
from catalog.core.settings import load_settings


def parse_ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated batch ids, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_stage", description=__doc__)
    parser.add_argument("stage")
    parser.add_argument("--batch-ids", type=parse_ids, default=[], help="comma-separated batch ids")
    parser.add_argument("--batch-id", type=int, action="append", default=[], dest="batch_id")
    args = parser.parse_args(argv)

    from spark_jobs.orchestration import tasks as dag_tasks  # deferred: `--help` answers without the jobs

    settings = load_settings()
    configure_logging(1, fmt=settings.log_format)
    spark = dag_tasks.spark_for(settings, f"juncture.{args.stage}")
    try:
        # The submitting task holds the lake lock for this job, so the job itself does not take it.
        results = dag_tasks.run_stage(
            args.stage, [*args.batch_ids, *args.batch_id], settings=settings, spark=spark, lock=False
        )
    finally:
        spark.stop()
    sys.stdout.write(json.dumps({"stage": args.stage, "results": results}, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
