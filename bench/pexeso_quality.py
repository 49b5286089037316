"""Measurement: does PEXESO's default embedder find a realistically corrupted copy of a real column
where exact overlap does not? (issue 18's quality criterion, measured, not yet a test.)

`python -m bench.pexeso_quality [--subset demo] [--tau 0.06] [--T 0.6] [--seed 0]`

The textual columns of the local portal's seed (at least 20 distinct values with a letter, not
dates or numbers) are the lake. Each becomes a query: its values, each corrupted as data entry
does, so that its token changes: one of a typo (a letter dropped, doubled or swapped), punctuation
added or changed, an abbreviation (a word cut to three letters and a full stop), reordered name
parts ("last, first"), plus a case change at random. A column counts as found when PEXESO (exact,
at the thresholds given) lists its original as joinable, and by exact overlap when at least T of
the corrupted values' tokens are tokens of the original. Also printed: how many other columns
PEXESO lists per query on average (what a looser τ costs in precision).
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.seed_lake import read_csv, seed_files
from catalog.core.identity import normalize_token
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, embed_column, pexeso_embedder
from catalog.search.pexeso.search import Query, need_count, search

_LETTER = re.compile(r"[A-Za-z]")
_DATE_OR_NUMBER = re.compile(r"^[0-9 .:/+-]*$")


def corrupt(rng: random.Random, value: str) -> str:
    """The value changed so that its token changes too (a case change alone would not: tokens are
    case-folded), by one kind of corruption that applies to it, with its case changed at random."""
    words = value.split()
    kinds = (
        ["punctuation"] + (["typo"] if len(value) > 3 else []) + (["abbreviation", "reorder"] if len(words) > 1 else [])
    )
    kind = rng.choice(kinds)
    if kind == "typo":
        i = rng.randrange(1, len(value) - 1)
        out = rng.choice(
            [
                value[:i] + value[i + 1 :],
                value[:i] + value[i] + value[i:],
                value[:i] + value[i + 1] + value[i] + value[i + 2 :],
            ]
        )
    elif kind == "abbreviation":
        i = rng.randrange(len(words))
        words[i] = words[i][:3] + "."
        out = " ".join(words)
    elif kind == "reorder":
        out = ", ".join([words[-1], " ".join(words[:-1])])
    else:
        out = (
            value.replace(" ", rng.choice([". ", "-", "_"])) + "."
            if len(words) > 1
            else value + rng.choice([".", "!", " -"])
        )
    return rng.choice([out, out.upper(), out.lower()])


def textual_columns(files: dict[str, bytes]) -> list[tuple[ColumnRef, list[str]]]:
    out = []
    for path, data in sorted(files.items()):
        headers, rows = read_csv(data)
        for c, header in enumerate(headers):
            values = sorted({r[c] for r in rows if c < len(r) and r[c]})
            texty = [v for v in values if _LETTER.search(v) and not _DATE_OR_NUMBER.match(v)]
            if len(texty) >= 20 and len(texty) >= 0.9 * len(values):
                out.append((ColumnRef(f"{path}#{c}", path, header), values[:2000]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pexeso_quality")
    parser.add_argument("--subset", default="demo")
    parser.add_argument("--tau", type=float, default=0.06)
    parser.add_argument("--T", dest="threshold", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        files = seed_files(args.subset, Path(scratch))
    columns = textual_columns(files)
    embedder = pexeso_embedder()
    lake = [embed_column(ref, [normalize_token(v) for v in values], embedder) for ref, values in columns]
    index = PexesoIndex.build(lake, EmbeddingSpec.of(embedder), IndexShape())
    rng = random.Random(args.seed)
    by_pexeso = by_overlap = others = 0
    for ref, values in columns:
        query = [corrupt(rng, v) for v in values]
        tokens = [normalize_token(v) for v in query]
        found = search(index, Query.embed(tokens, embedder), tau=args.tau, threshold=args.threshold, k=None)
        listed = {m.column_id for m in found}
        by_pexeso += ref.column_id in listed
        others += len(listed - {ref.column_id})
        original = {normalize_token(v) for v in values}
        present = [t for t in tokens if t is not None]
        by_overlap += sum(t in original for t in present) >= need_count(args.threshold, len(present))
    n = len(columns)
    print(f"{n} textual columns of the {args.subset!r} seed; tau {args.tau}, T {args.threshold}")
    print(f"found by pexeso: {by_pexeso}/{n} = {by_pexeso / n:.0%}; other columns listed per query {others / n:.1f}")
    print(f"found by exact overlap: {by_overlap}/{n} = {by_overlap / n:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
