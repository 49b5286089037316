"""`python -m bench [NAME ...]` (`make bench`): run the benchmarks, each comparing Juncture with its
peer on the same data in one run and printing the ratio. With no name, all of them in turn."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHMARKS = (
    "josie_bench",
    "josie_build_bench",
    "profile_bench",
    "lookup_load",
    "pipeline_bench",
    "union_bench",
    "lshe_bench",
    "mate_bench",
    "autojoin_bench",
    "pexeso_lists_bench",
    "web_bench",
)


def main(argv: Sequence[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"bench: unknown benchmark {unknown[0]!r} (known: {', '.join(BENCHMARKS)})", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        print(f"== {name}", flush=True)
        status |= int(importlib.import_module(f"bench.{name}").main([]) or 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
