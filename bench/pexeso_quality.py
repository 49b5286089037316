"""PEXESO's quality on real values (issue 18's criterion): does the default embedder find a
realistically corrupted copy of a real column, where exact overlap does not?

`python -m bench.pexeso_quality [--subset demo] [--T 0.6] [--seed 0] [--rate 0.5]`; the test is
`tests/pexeso/test_quality.py`, on the same columns, copies and counts.

The lake is the real columns of the local portal's seed that hold names, places, addresses
(`_WORDED`: most values have a word of three letters or more) or dates (`_DATE`). Each becomes a
query: a copy with every value corrupted with probability `CORRUPTION_RATE` by one kind of
corruption that applies to it (`corrupt_value`), as data re-keyed or exported by another system
is. A copy counts as found when PEXESO (exact, at τ and T) lists its original as joinable, and by
exact overlap when at least T of the copy's tokens are tokens of the original. Also counted: the
other columns PEXESO lists per query, split into those the original itself joins by exact
overlap (the lake's real joins: expected) and the rest, and per corruption kind the share of
corrupted values that match a value of the original within τ.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.seed_lake import read_csv, seed_files
from catalog.core.canonical_text import canonical_text
from catalog.core.identity import normalize_token
from catalog.search.pexeso.index import ColumnRef, EmbeddingSpec, IndexShape, PexesoIndex, embed_column, pexeso_embedder
from catalog.search.pexeso.search import Query, need_count, search

# Half the values of a copy corrupted. Exact overlap then finds a copy only when chance leaves at
# least T = 0.6 of its values intact: expected share 0.5, so it fails on most copies of 20 values
# or more (a standard deviation of 0.11 at 20 values, 0.05 at 100), as the criterion requires; a
# real dirty copy (another system's export, a re-keyed list) has many values reformatted, not all.
CORRUPTION_RATE = 0.5
TAUS = (0.06, 0.15, 0.3)
MAX_VALUES = 2000  # distinct values kept per column (sorted), so that the largest columns stay quick

_WORD = re.compile(r"[^\W\d_]{3,}")
_WORDED_SHARE = 0.8
_MIN_VALUES = 20
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::\d{2})?Z?)?$")
_WRITTEN_DATE = re.compile(r"^[A-Z][a-z]{2} \d{1,2} \d{4}$")  # vega's stocks: "Jan 1 2000"
_DATE_FORMATS = ("%Y-%m-%d", "%m/%d/%Y", "%d.%m.%Y", "%d %B %Y", "%b %d %Y", "%B %d, %Y")

# Abbreviations as real data writes them (USPS Publication 28 street suffixes and directions, FAA
# airport names, company suffixes), each way: a value holding the long form gets the short one and
# the other way round. Written independently of the canonical form's dictionary: the last four are
# real but not in it (`catalog.core.canonical_text.ABBREVIATIONS`), so their share shows its gaps.
REAL_ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    ("Street", "St."),
    ("Street", "Str."),
    ("Saint", "St."),
    ("Avenue", "Ave."),
    ("Avenue", "Av."),
    ("Boulevard", "Blvd."),
    ("Road", "Rd."),
    ("Drive", "Dr."),
    ("Lane", "Ln."),
    ("Court", "Ct."),
    ("Place", "Pl."),
    ("Highway", "Hwy"),
    ("Mount", "Mt."),
    ("Fort", "Ft."),
    ("Point", "Pt."),
    ("Company", "Co."),
    ("County", "Co."),
    ("Incorporated", "Inc."),
    ("Corporation", "Corp."),
    ("Limited", "Ltd."),
    ("Department", "Dept."),
    ("University", "Univ."),
    ("International", "Intl"),
    ("International", "Int'l"),
    ("National", "Nat'l"),
    ("Regional", "Rgnl"),
    ("Municipal", "Muni"),
    ("Memorial", "Mem."),
    ("Airport", "Arpt"),
    ("Center", "Ctr."),
    ("Brothers", "Bros."),
    ("Manufacturing", "Mfg."),
    ("North", "N."),
    ("South", "S."),
    ("East", "E."),
    ("West", "W."),
    ("Mountain", "Mtn."),
    ("Heights", "Hts."),
    ("Junction", "Jct."),
    ("Township", "Twp."),
)


def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w']){re.escape(word.rstrip('.'))}\.?(?![\w'])", re.IGNORECASE)


_ABBREVIATION_RULES = tuple(
    (pattern, out)
    for long, short in REAL_ABBREVIATIONS
    for pattern, out in ((_word_pattern(long), short), (_word_pattern(short), long))
)


def as_date(value: str) -> tuple[dt.datetime, bool] | None:
    """(the date, whether it has a time) of an ISO date or date-time or a written `Mon d yyyy`."""
    m = _ISO_DATE.match(value)
    if m:
        y, mo, d, hh, mm = m.groups()
        return dt.datetime(int(y), int(mo), int(d), int(hh or 0), int(mm or 0)), hh is not None
    if _WRITTEN_DATE.match(value):
        return dt.datetime.strptime(value, "%b %d %Y"), False
    return None


def corrupt_value(rng: random.Random, value: str) -> tuple[str, str]:
    """(copy, kind): `value` changed by one kind of corruption drawn among those that apply to it,
    so that its token changes, then its case changed at random (case alone would not change the
    token). A date is written in another format; other values get a typo (a letter dropped,
    doubled, swapped with the next or replaced), punctuation added, changed or dropped, an
    abbreviation from `REAL_ABBREVIATIONS` (either way), or, for a name of words without digits,
    its parts reordered (`John Smith`: `Smith, John`)."""
    date = as_date(value)
    if date is not None:
        return _other_date_format(rng, value, *date), "date format"
    kinds = ["punctuation"] + (["typo"] if any(ch.isalpha() for ch in value[1:]) else [])
    if any(p.search(value) for p, _ in _ABBREVIATION_RULES):
        kinds.append("abbreviation")
    words = value.split()
    if len(words) > 1 and not any(ch.isdigit() for ch in value):
        kinds.append("reorder")
    token = normalize_token(value)
    for _ in range(20):
        kind = rng.choice(kinds)
        out, kind = _corrupted(rng, value, words, kind)
        out = rng.choice([out, out.upper(), out.lower(), out.title()])
        if normalize_token(out) != token:
            return out, kind
    raise ValueError(f"no corruption changes {value!r}")


def _corrupted(rng: random.Random, value: str, words: list[str], kind: str) -> tuple[str, str]:
    if kind == "typo":
        return _typo(rng, value)
    if kind == "abbreviation":
        rules = [(p, out) for p, out in _ABBREVIATION_RULES if p.search(value)]
        pattern, out = rng.choice(rules)
        return pattern.sub(out, value, count=1), kind
    if kind == "reorder":
        if "," in value:
            head, _, tail = value.partition(",")
            return f"{tail.strip()} {head.strip()}", kind
        return f"{words[-1]}, {' '.join(words[:-1])}", kind
    changes = ["quoted", "full stop"]
    if len(words) > 1:
        changes.append("separator")
    if re.search(r"[^\w\s]", value):
        changes.append("dropped")
    change = rng.choice(changes)
    if change == "quoted":
        return f'"{value}"', kind
    if change == "full stop":
        return value + ".", kind
    if change == "separator":
        return rng.choice(["-", "_", ". ", "/"]).join(words), kind
    return re.sub(r"[^\w\s]+", lambda m: "" if m.group() in (".", "'") else " ", value), kind


def _typo(rng: random.Random, value: str) -> tuple[str, str]:
    i = rng.choice([i for i, ch in enumerate(value) if ch.isalpha() and i > 0])
    how = rng.choice(["dropped", "doubled", "swapped", "replaced"])
    if how == "swapped" and i + 1 < len(value) and value[i + 1].isalpha() and value[i + 1] != value[i]:
        return value[:i] + value[i + 1] + value[i] + value[i + 2 :], "typo: swapped"
    if how == "replaced":
        other = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != value[i].lower()])
        return value[:i] + other + value[i + 1 :], "typo: replaced"
    if how == "doubled":
        return value[:i] + value[i] + value[i:], "typo: doubled"
    return value[:i] + value[i + 1 :], "typo: dropped"


def _other_date_format(rng: random.Random, value: str, date: dt.datetime, has_time: bool) -> str:
    written = [f for f in _DATE_FORMATS if date.strftime(f) != value]
    out = date.strftime(rng.choice(written))
    return out + date.strftime(" %H:%M") if has_time else out


def corrupt_column(
    rng: random.Random, values: Sequence[str], rate: float = CORRUPTION_RATE
) -> list[tuple[str, str | None]]:
    """(copy, kind) per value: each value corrupted with probability `rate` (kind None: intact)."""
    return [corrupt_value(rng, v) if rng.random() < rate else (v, None) for v in values]


def quality_columns(files: dict[str, bytes]) -> list[tuple[ColumnRef, list[str]]]:
    """The seed's columns of names, places and addresses (at least 80% of their values are longer
    than three characters and have a word of three letters or more: not codes or numbers) and of
    dates (every value an ISO or a `Mon d yyyy` date), with at least 20 distinct values: their
    first `MAX_VALUES`, sorted."""
    out = []
    for path, data in sorted(files.items()):
        headers, rows = read_csv(data)
        for c, header in enumerate(headers):
            values = sorted({r[c] for r in rows if c < len(r) and r[c]})
            if len(values) < _MIN_VALUES:
                continue
            worded = sum(len(v) > 3 and bool(_WORD.search(v)) for v in values) >= _WORDED_SHARE * len(values)
            if worded or all(as_date(v) is not None for v in values):
                out.append((ColumnRef(f"{path}#{c}", path, header), values[:MAX_VALUES]))
    return out


@dataclass
class Quality:
    """What one τ found over every copy. An other column listed for a copy is explained when the
    original joins it by exact overlap, or by canonical forms (at least T of the original's
    canonical forms are canonical forms of its values: a real semantic join of the lake, like
    stocks' `Apr 1 2000` dates and economics' `2000-04-01`)."""

    tau: float
    n_columns: int = 0
    by_pexeso: int = 0
    by_overlap: int = 0
    others: int = 0  # other columns listed, over every copy
    others_exact: int = 0  # ... that the original joins by exact overlap
    others_canonical: int = 0  # ... that it joins by canonical forms (exact overlap included)
    others_new: int = 0  # ... that the uncorrupted original does not list
    kinds: Counter[str] = field(default_factory=Counter)  # corrupted values per kind
    kinds_matched: Counter[str] = field(default_factory=Counter)  # ... within τ of an original value

    def rows(self) -> list[str]:
        n = self.n_columns
        unexplained = self.others - self.others_canonical
        lines = [
            f"tau {self.tau}: found by pexeso {self.by_pexeso}/{n} = {self.by_pexeso / n:.0%}, "
            f"by exact overlap {self.by_overlap}/{n} = {self.by_overlap / n:.0%}",
            f"  other columns listed per query {self.others / n:.2f}: "
            f"joined by exact overlap {self.others_exact / n:.2f}, by canonical forms {self.others_canonical / n:.2f}, "
            f"unexplained {unexplained / n:.2f}; not listed for the uncorrupted original {self.others_new / n:.2f}",
        ]
        for kind in sorted(self.kinds):
            share = self.kinds_matched[kind] / self.kinds[kind]
            lines.append(f"  {kind}: {self.kinds_matched[kind]}/{self.kinds[kind]} = {share:.0%} matched")
        return lines


def measure(
    columns: Sequence[tuple[ColumnRef, list[str]]],
    *,
    taus: Sequence[float] = TAUS,
    threshold: float = 0.6,
    seed: int = 0,
    rate: float = CORRUPTION_RATE,
) -> list[Quality]:
    """Every column's corrupted copy searched at each τ with the default embedder (module docstring)."""
    embedder = pexeso_embedder()
    tokens = {
        ref.column_id: sorted({t for v in values if (t := normalize_token(v)) is not None}) for ref, values in columns
    }
    exact = {cid: set(ts) for cid, ts in tokens.items()}
    canonical = {cid: set(canonical_text(pa.array(ts, pa.string())).to_pylist()) for cid, ts in tokens.items()}
    lake = [embed_column(ref, tokens[ref.column_id], embedder) for ref, _ in columns]
    index = PexesoIndex.build(lake, EmbeddingSpec.of(embedder), IndexShape())
    rng = random.Random(seed)
    results = [Quality(tau, n_columns=len(columns)) for tau in taus]
    for (ref, values), original in zip(columns, lake, strict=True):
        cid = ref.column_id
        copy = corrupt_column(rng, values, rate)
        query_tokens = [normalize_token(v) for v, _ in copy]
        present = [t for t in query_tokens if t is not None]
        overlap = sum(t in exact[cid] for t in present) >= need_count(threshold, len(present))
        query, itself = Query.embed(query_tokens, embedder), Query.embed(tokens[cid], embedder)
        corrupted = [(t, kind) for t, (_, kind) in zip(query_tokens, copy, strict=True) if kind and t]
        nearest = _nearest_distance(embedder.embed([t for t, _ in corrupted]), original.vectors)
        for result in results:
            listed = {m.column_id for m in search(index, query, tau=result.tau, threshold=threshold, k=None)}
            listed_itself = {m.column_id for m in search(index, itself, tau=result.tau, threshold=threshold, k=None)}
            result.by_pexeso += cid in listed
            result.by_overlap += overlap
            for other in listed - {cid}:
                result.others += 1
                result.others_exact += len(exact[cid] & exact[other]) >= need_count(threshold, len(exact[cid]))
                result.others_canonical += len(canonical[cid] & canonical[other]) >= need_count(
                    threshold, len(canonical[cid])
                )
                result.others_new += other not in listed_itself
            for (_, kind), distance in zip(corrupted, nearest, strict=True):
                result.kinds[kind] += 1
                result.kinds_matched[kind] += bool(distance <= 2 * result.tau)
    return results


def _nearest_distance(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each query vector's distance to its nearest vector (unit vectors: |a-b|² = 2 - 2a·b)."""
    if not len(queries):
        return np.zeros(0)
    cos = np.clip((queries @ vectors.T).max(axis=1), -1.0, 1.0)
    return np.sqrt(np.maximum(2.0 - 2.0 * cos.astype(np.float64), 0.0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pexeso_quality")
    parser.add_argument("--subset", default="demo")
    parser.add_argument("--T", dest="threshold", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=CORRUPTION_RATE)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        files = seed_files(args.subset, Path(scratch))
    columns = quality_columns(files)
    print(
        f"{len(columns)} columns of names, places, addresses and dates of the {args.subset!r} seed; "
        f"T {args.threshold}, each value corrupted with probability {args.rate}, seed {args.seed}"
    )
    for result in measure(columns, threshold=args.threshold, seed=args.seed, rate=args.rate):
        print("\n".join(result.rows()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
