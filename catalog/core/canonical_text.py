"""A canonical form of text values: the format variants that real copies of a column differ by are
brought to one spelling before a value is embedded, so that they get the same vector.

PEXESO's paper prescribes this step ("we first convert abbreviations to their full forms (e.g.
"Mar" to "March" and "St" to "Street") and then apply the pre-trained model", v2 §II; digest §6):
a continuous embedding puts a typo at some distance, but a format variant is no variant at all
once both sides are canonical. In order, over a whole Arrow array at a time (pyarrow compute and
numpy, never a Python call per value):

1. accents dropped (NFKD, non-spacing combining marks removed) and lower case: `Müller` is `muller`;
2. dates in common written formats to ISO `yyyy-mm-dd` (`_NUMERIC_RULES`, `_WRITTEN_RULES`): `2021-03-04`,
   `2021/03/04`, `03/04/2021` (slashes: US order, month first), `04.03.2021` (dots: European
   order, day first), `4 March 2021`, `4th Mar. 2021`, `March 4, 2021`, `Mar 4 2021`; an ISO
   time's `T` separator, a `Z` suffix and zero seconds go (`2013-01-01T10:00:00Z` is
   `2013-01-01 10:00`). Two-digit years and dashed day-month orders (`04-03-2021`) are left as
   they are: which century, which order, is a guess;
3. `&` is `and`; apostrophes and full stops dropped, every other run of characters that are
   neither letters nor digits one space (`St. John's` is `st johns`);
4. runs of one repeated ASCII letter collapsed to one (`Misssissippi`, `Mississippi` and
   `Misisipi` are alike: a doubled letter is a common typo; digits are kept, `2000` is not `20`);
5. words from a small dictionary of common abbreviations (`ABBREVIATIONS`) spelt one way: each
   group's canonical spelling is its usual abbreviation;
6. words that have a letter sorted, then the words without one in their original order: name parts
   in any order are one name (`Smith, John` is `John Smith`), while the numbers of a date or
   an address keep their order (`2021 03 04` is not `2021 04 03`).

What it costs: values that differ only by word order, by a doubled letter or by an abbreviation's
two meanings become one value (`Saint Paul` and `Paul Street` are both `paul st`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Each group's words are spelt as its first. The canonical spelling is the usual abbreviation, not
# the long form: an abbreviation shared by two words (`st`: saint and street; `dr`: doctor and
# drive; `co`: company and county) cannot be expanded without knowing which was meant, while
# both long forms can be abbreviated. Sources: USPS Publication 28 (street suffixes, directions),
# FAA airport names (rgnl, intl, muni, mem), common company suffixes and month names.
ABBREVIATIONS: tuple[tuple[str, ...], ...] = (
    ("st", "street", "saint", "str"),
    ("ave", "avenue", "av"),
    ("blvd", "boulevard"),
    ("rd", "road"),
    ("dr", "drive", "doctor"),
    ("ln", "lane"),
    ("ct", "court"),
    ("pl", "place"),
    ("sq", "square"),
    ("hwy", "highway"),
    ("pkwy", "parkway"),
    ("mt", "mount", "mountain"),
    ("ft", "fort"),
    ("pt", "point"),
    ("co", "company", "county", "cnty"),
    ("inc", "incorporated"),
    ("corp", "corporation"),
    ("ltd", "limited"),
    ("dept", "department"),
    ("univ", "university"),
    ("intl", "international"),
    ("natl", "national"),
    ("rgnl", "regional"),
    ("muni", "municipal"),
    ("mem", "memorial"),
    ("arpt", "airport"),
    ("ctr", "center", "centre"),
    ("assn", "association"),
    ("bros", "brothers"),
    ("mfg", "manufacturing"),
    ("n", "north"),
    ("s", "south"),
    ("e", "east"),
    ("w", "west"),
    ("ne", "northeast"),
    ("nw", "northwest"),
    ("se", "southeast"),
    ("sw", "southwest"),
    ("jan", "january"),
    ("feb", "february"),
    ("mar", "march"),
    ("apr", "april"),
    ("jun", "june"),
    ("jul", "july"),
    ("aug", "august"),
    ("sep", "september", "sept"),
    ("oct", "october"),
    ("nov", "november"),
    ("dec", "december"),
)

_MONTHS = (
    "january|jan",
    "february|feb",
    "march|mar",
    "april|apr",
    "may",
    "june|jun",
    "july|jul",
    "august|aug",
    "september|sept|sep",
    "october|oct",
    "november|nov",
    "december|dec",
)
_ANY_MONTH = "|".join(_MONTHS)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"

# (pattern, rewrite) applied in order to lower-case text; RE2 syntax, `\N` names a group. The
# numeric rules run on values with a digit, the written ones on values with a year and a month name.
_NUMERIC_RULES: tuple[tuple[str, str], ...] = (
    (r"\b(\d{4}-\d{1,2}-\d{1,2})t(\d{1,2}:\d{2})", r"\1 \2"),  # ISO date-time: the T separator
    (r"\b(\d{1,2}:\d{2}(?::\d{2})?)(?:\.\d+)?(?:z|[+-]00:?00)\b", r"\1"),  # UTC suffix
    (r"\b(\d{1,2}:\d{2}):00\b", r"\1"),  # zero seconds
    (r"\b(\d{4})/(\d{1,2})/(\d{1,2})\b", r"\1-\2-\3"),  # 2021/03/04
    (r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", r"\3-\1-\2"),  # 03/04/2021: US, month first
    (r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b", r"\3-\2-\1"),  # 04.03.2021: European, day first
)
_WRITTEN_RULES: tuple[tuple[str, str], ...] = (
    # first to "yyyy month d", then the month's number (one rule per month)
    (rf"\b{_DAY}[ -]({_ANY_MONTH})\.?,?[ -](\d{{4}})\b", r"\3 \2 \1"),  # 4 March 2021, 4-Mar-2021
    (rf"\b({_ANY_MONTH})\.?[ -]{_DAY},?[ -](\d{{4}})\b", r"\3 \1 \2"),  # March 4, 2021; Mar 4 2021
    *((rf"\b(\d{{4}}) (?:{names}) (\d{{1,2}})\b", rf"\1-{m:02d}-\2") for m, names in enumerate(_MONTHS, 1)),
)
_PADDING: tuple[tuple[str, str], ...] = (
    (r"\b(\d{4})-(\d)\b", r"\1-0\2"),  # single-digit month and day padded
    (r"\b(\d{4}-\d{2})-(\d)\b", r"\1-0\2"),
)
_MONTH_NAME = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"


def canonical_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each value's canonical form (module docstring); nulls stay null, a value with neither
    letters nor digits becomes empty."""
    text = pc.cast(values, pa.string())
    text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    nulls = text.is_null()
    text = pc.utf8_lower(pc.replace_substring_regex(pc.utf8_normalize(text.fill_null(""), form="NFKD"), r"\p{Mn}+", ""))
    text = iso_dates(text)
    text = pc.replace_substring(text, "&", " and ")
    text = pc.replace_substring_regex(text, "['\u2019.]+", "")
    text = pc.utf8_trim_whitespace(pc.replace_substring_regex(text, r"[^\p{L}\p{N}]+", " "))
    text = sorted_words(spelt_alike(collapse_repeats(text)))
    return pc.if_else(nulls, pa.scalar(None, pa.string()), text)


def iso_dates(text: pa.Array) -> pa.Array:
    """Lower-case text (no nulls) with its written dates (module docstring, step 2) in ISO form.
    Each group of rules rewrites only the values it can apply to (a regex pass costs per value)."""
    written = pc.and_(pc.match_substring_regex(text, r"\d{4}"), pc.match_substring_regex(text, _MONTH_NAME))
    text = _rewrite_where(text, written, _WRITTEN_RULES)
    return _rewrite_where(text, pc.match_substring_regex(text, r"\d"), _NUMERIC_RULES + _PADDING)


def _rewrite_where(text: pa.Array, mask: pa.BooleanArray, rules: tuple[tuple[str, str], ...]) -> pa.Array:
    if not pc.any(mask).as_py():
        return text
    part = text.filter(mask)
    for pattern, rewrite in rules:
        part = pc.replace_substring_regex(part, pattern, rewrite)
    return pc.replace_with_mask(text, mask, part)


def collapse_repeats(text: pa.Array) -> pa.StringArray:
    """Runs of one repeated ASCII letter (a-z, A-Z) cut to one letter, on the UTF-8 bytes in numpy:
    a continuation byte of a multi-byte character is never an ASCII letter, so characters stay
    whole. `text` must have no nulls."""
    text = pc.cast(text, pa.string())
    n = len(text)
    offsets = np.frombuffer(text.buffers()[1], np.int32, n + 1, text.offset * 4).astype(np.int64)
    data = np.frombuffer(text.buffers()[2], np.uint8)[offsets[0] : offsets[-1]] if text.buffers()[2] else None
    if data is None or not len(data):
        return text
    offsets -= offsets[0]
    folded = data | np.uint8(0x20)
    letter = (data < 0x80) & (folded >= ord("a")) & (folded <= ord("z"))
    repeat = np.zeros(len(data), bool)
    repeat[1:] = (data[1:] == data[:-1]) & letter[1:]
    starts = offsets[:-1]
    repeat[starts[starts < len(data)]] = False  # a value's first byte repeats nothing
    kept = np.concatenate([[0], np.cumsum(~repeat)])[offsets].astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(kept.tobytes()), pa.py_buffer(data[~repeat].tobytes()))


def _dictionary() -> tuple[pa.Array, pa.Array]:
    """(word, canonical spelling) of every word of `ABBREVIATIONS`, words as `collapse_repeats`
    leaves them (the dictionary is looked up after it)."""
    words = [w for group in ABBREVIATIONS for w in group]
    targets = [group[0] for group in ABBREVIATIONS for _ in group]
    return collapse_repeats(pa.array(words, pa.string())), collapse_repeats(pa.array(targets, pa.string()))


_WORDS, _SPELLINGS = _dictionary()


def spelt_alike(text: pa.Array) -> pa.Array:
    """Space-separated words with the dictionary's words in their canonical spelling."""
    words = pc.split_pattern(text, " ")
    flat = pc.list_flatten(words)
    at = pc.index_in(flat, value_set=_WORDS)
    spelt = pc.coalesce(pc.take(_SPELLINGS, at), flat)
    return pc.binary_join(pa.ListArray.from_arrays(_offsets(words), spelt), " ")


def sorted_words(text: pa.Array) -> pa.Array:
    """Space-separated words reordered: those with a letter sorted, then the others (numbers) in
    their original order."""
    words = pc.split_pattern(text, " ")
    offsets = _offsets(words)
    flat = pc.list_flatten(words)
    if not len(flat):
        return text
    counts = np.diff(offsets.to_numpy())
    owner = np.repeat(np.arange(len(counts)), counts)
    position = np.arange(len(flat)) - np.repeat(offsets.to_numpy()[:-1], counts)
    has_letter = pc.match_substring_regex(flat, r"\p{L}").to_numpy(zero_copy_only=False)
    rank = pc.rank(flat, sort_keys="ascending", tiebreaker="dense").to_numpy()
    order = np.lexsort((position, np.where(has_letter, rank, 0), ~has_letter, owner))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, flat.take(pa.array(order))), " ")


def _offsets(lists: pa.ListArray) -> pa.Int32Array:
    """The list array's offsets rebased to 0 (a sliced array's start elsewhere)."""
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy()
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
