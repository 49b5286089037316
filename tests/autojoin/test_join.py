"""autojoin() end to end on small tables, the q-gram pairing, the sampling bound (re-derived and
checked numerically) and the constrained fuzzy join."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from bench.autojoin_cases import cases
from catalog.core.errors import SettingsError
from catalog.core.settings import load_settings
from catalog.search.autojoin.fuzzy import fuzzy_pairs
from catalog.search.autojoin.join import autojoin
from catalog.search.autojoin.qgrams import GramMemo, column_grams, match_values
from catalog.search.autojoin.sampling import chernoff_failure, sample_rates, thesis_rates
from catalog.search.autojoin.settings import AutojoinSettings, autojoin_settings

NAMES = [
    ("Schwarzenegger", "Arnold"),
    ("Obama", "Barack"),
    ("Bush", "George W."),
    ("Clinton", "William"),
    ("Lovelace", "Ada"),
    ("Hopper", "Grace"),
    ("Turing", "Alan"),
    ("Curie", "Marie"),
]


def test_rare_qgrams_pair_values_one_to_one() -> None:
    src = [f"{last}, {first}" for last, first in NAMES]
    tgt = [f"{first} {last}" for last, first in reversed(NAMES)]
    pairs = match_values(column_grams(src), column_grams(tgt))
    assert sorted(zip(pairs.source.tolist(), pairs.target.tolist(), strict=True)) == [
        (i, len(NAMES) - 1 - i) for i in range(len(NAMES))
    ]
    assert (pairs.score == 1.0).all()
    with pytest.raises(ValueError, match="at least 3"):
        column_grams(src, q_min=2)


def test_the_memo_cuts_a_column_once_and_gives_what_column_grams_gives() -> None:
    memo = GramMemo()
    src = [f"{last}, {first}" for last, first in NAMES]
    fresh = column_grams(src, q_min=3, q_max=8)
    for _ in range(3):
        held = memo.column_grams(src, q_min=3, q_max=8, max_chars=128)
        for field in ("hashes", "value", "count"):
            assert np.array_equal(getattr(held, field), getattr(fresh, field))
    other = memo.column_grams(src, q_min=4, q_max=8, max_chars=128)  # other parameters: cut again
    assert len(other.hashes) < len(fresh.hashes)
    assert (memo.hits, memo.misses) == (2, 2)


def test_the_memo_drops_its_oldest_columns_past_its_bound() -> None:
    columns = [[f"{w}{i}" for w in ("alpha", "beta", "gamma", "delta")] for i in range(6)]
    memo = GramMemo(max_bytes=int(column_grams(columns[0]).nbytes * 2.5))  # room for two columns of this size
    for values in columns:
        memo.column_grams(values, q_min=3, q_max=12, max_chars=128)
    memo.column_grams(columns[-1], q_min=3, q_max=12, max_chars=128)  # the newest is held
    memo.column_grams(columns[0], q_min=3, q_max=12, max_chars=128)  # the oldest was dropped
    assert (memo.hits, memo.misses) == (1, 7)


def test_a_shared_memo_changes_no_answer() -> None:
    """The lists learn many pairs with one memo: each answer must be the one a fresh call gives."""
    memo = GramMemo()
    for case in cases()[:6]:
        for source, target in ((case.source, case.target), (case.target, case.source)):
            alone, shared = autojoin(source, target), autojoin(source, target, memo=memo)
            assert (alone.pairs, str(alone.program), alone.coverage) == (
                shared.pairs,
                str(shared.program),
                shared.coverage,
            )
    assert memo.hits > 0


def test_autojoin_finds_the_program_and_the_pairs_in_both_directions() -> None:
    source = (
        ["name", "n"],
        [[f"{last}, {first}", str(i)] for i, (last, first) in enumerate(NAMES)] + [["Nobody, Here", "x"]],
    )
    order = [3, 0, 7, 1, 5, 2, 6, 4]
    target = (["full", "party"], [[f"{NAMES[i][1]} {NAMES[i][0]}", "p"] for i in order])
    result = autojoin(source, target)
    assert str(result.program) == 'Concat(SplitSubstr(name, ", ", -1), " ", SplitSubstr(name, ", ", 0))'
    assert result.pairs == sorted((i, order.index(i)) for i in range(len(NAMES)))
    assert (result.source_columns, result.target_columns, result.coverage) == (("name",), ("full",), 8)
    back = autojoin(target, source)
    assert back.reversed and back.pairs == sorted((j, i) for i, j in result.pairs)
    assert back.as_dict()["source_columns"] == ["full"] and back.as_dict()["target_columns"] == ["name"]


def test_n_to_one_and_no_join_without_a_target_key() -> None:
    source = (["who"], [[f"{first} {last}"] for last, first in NAMES] * 2)  # every name twice: N:1
    target = (["user"], [[f"{first[0].lower()}{last.lower()}"] for last, first in NAMES])
    result = autojoin(source, target)
    assert result.coverage == len(NAMES) and len(result.pairs) == 2 * len(NAMES)
    assert not autojoin((["a"], [["x1"], ["x2"]]), (["b"], [["q"], ["q"]])).pairs


def test_fuzzy_step_adds_a_close_key_under_the_constraints() -> None:
    src = [f"{first} {last}" if last != "Hopper" else "Grace Hoper" for last, first in NAMES]
    source = (["name"], [[v] for v in src])
    target = (["user"], [[f"{first} {last}"] for last, first in NAMES])
    result = autojoin(source, target)
    assert result.fuzzy and result.pairs == [(i, i) for i in range(len(NAMES))]
    assert fuzzy_pairs(["mpayne"], ["mipayne", "zzz"]) == [(0, 0)]
    # two derived values close to one key: the strictest threshold keeps the closer, never both
    assert fuzzy_pairs(["george w bush", "george h w bush"], ["george bush"], max_distance=0.9) == [(0, 0)]


def test_sampling_rates_are_the_transposed_thesis_form_and_read_fewer_rows() -> None:
    n_s, n_t = 1_000_000, 50_000
    rates = sample_rates(n_s, n_t, examples=4, delta=0.8, participation=0.1)
    c = 4 / (0.2 * 0.1 * n_t)
    assert rates.source * rates.target == pytest.approx(c)  # the constraint holds with equality
    assert rates.source * n_s == pytest.approx(rates.target * n_t)  # equal sample sizes
    thesis_s, thesis_t = thesis_rates(n_s, n_t, examples=4, delta=0.8, participation=0.1)
    assert (rates.source, rates.target) == (pytest.approx(thesis_t), pytest.approx(thesis_s))  # s and t swapped
    assert n_s * rates.source + n_t * rates.target < n_s * thesis_s + n_t * thesis_t
    # brute force over a grid of p_s on the constraint's boundary: none reads fewer rows
    grid = np.linspace(c, 1.0, 20_000)
    costs = n_s * grid + n_t * (c / grid)
    assert costs[(c / grid) <= 1.0].min() >= n_s * rates.source + n_t * rates.target - 1e-6
    # the thesis's symmetric example: 1M and 1M rows, r = 0.1 -> about 14K rows each
    sym = sample_rates(1_000_000, 1_000_000, examples=4, delta=0.8, participation=0.1)
    assert sym.rows(1_000_000, 1_000_000) == (14143, 14143)
    assert sym.failure_bound == pytest.approx(math.exp(-6.4), rel=1e-3) and sym.failure_bound < 0.0017


def test_sampling_success_rate_meets_the_bound() -> None:
    """Sample a 1:1 join independently on both sides many times: fewer than T joining pairs
    survive no more often than the Chernoff bound says."""
    n, r, t = 20_000, 0.05, 4
    rates = sample_rates(n, n, examples=t, delta=0.8, participation=r)
    rng = np.random.default_rng(0)
    joining = int(n * r)
    trials = 4000
    kept = rng.binomial(joining, rates.source * rates.target, size=trials)  # a pair survives if both rows do
    failure = float((kept < t).mean())
    assert failure <= rates.failure_bound
    small = sample_rates(100, 80)
    assert (small.source, small.target) == (1.0, 1.0)


def test_sampling_refuses_bad_parameters() -> None:
    for kwargs in ({"delta": 1.0}, {"participation": 0.0}, {"examples": 0}):
        with pytest.raises(ValueError):
            sample_rates(10, 10, **kwargs)


def test_sampled_pair_of_larger_tables_still_joins() -> None:
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    people = sorted(
        {
            (
                "".join(rng.choices(letters, k=rng.randint(4, 9))).title(),
                "".join(rng.choices(letters, k=rng.randint(3, 7))).title(),
            )
            for _ in range(30_000)
        }
    )
    source = (["first", "last"], [[first, last] for first, last in people])
    target = (["email"], [[f"{first.lower()}.{last.lower()}@corp.example"] for first, last in people])
    result = autojoin(source, target)
    assert result.sampled[0] < len(people)
    assert result.coverage >= 0.99 * len(people)
    assert chernoff_failure(20, 0.8) < 0.0017


def test_a_spurious_program_covering_a_sliver_is_refused() -> None:
    """Compact dates (19670701) against ggplot2's economics table: no rare q-gram pairs the dates,
    but digits of the population column land on a few dates by chance; without the coverage share
    that program is returned, with it nothing is."""
    case = next(c for c in cases() if c.name == "economics date compact")
    spurious = autojoin(case.source, case.target, AutojoinSettings(min_coverage_share=0.0))
    assert spurious.program is not None and not set(spurious.pairs) & case.truth
    result = autojoin(case.source, case.target)
    assert result.program is None and result.pairs == [] and result.coverage == 0


def test_a_name_deep_inside_long_text() -> None:
    """The name sits past the 64th character of a long description: q-grams reach it (max_chars)
    and the search finds the split-of-a-split that takes it out, in bounded time."""
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    names = [f"{''.join(rng.choices('abcdefghij', k=7))} {''.join(rng.choices('klmnopqrst', k=8))}" for _ in range(80)]
    text = [" ".join(rng.choices(words, k=14)) + f", name: {n}; " + "-".join(rng.choices(words, k=6)) for n in names]
    result = autojoin((["text"], [[t] for t in text]), (["name"], [[n.title()] for n in names]))
    assert str(result.program) == 'Title(SplitSplitSubstr(text, ": ", -1, "; ", 0))'
    assert result.pairs == [(i, i) for i in range(len(names))]


def test_settings_come_from_the_index_autojoin_section(tmp_path: Path) -> None:
    path = tmp_path / "juncture.toml"
    path.write_text("[index.autojoin]\nq_max = 8\nfuzzy = false\n")
    cfg = autojoin_settings(load_settings({}, config_file=path))
    assert (cfg.q_max, cfg.fuzzy, cfg.q_min) == (8, False, 3)
    path.write_text("[index.autojoin]\nq_min = 2\n")
    with pytest.raises(SettingsError, match=r"index\.autojoin\.q_min"):
        load_settings({}, config_file=path)


def test_keys_longer_than_max_chars_are_not_learned() -> None:
    """Descriptions of 200 characters upper-cased on one side: no key that long is produced by the
    defaults (the pairing sees its first `max_chars` characters only); with max_chars 256 it is."""
    rng = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    texts = [" ".join(rng.choices(words, k=40))[:200] for _ in range(30)]
    source, target = (["loud"], [[t.upper()] for t in texts]), (["text"], [[t] for t in texts])
    assert autojoin(source, target).program is None
    wide = autojoin(source, target, AutojoinSettings(max_chars=256))
    assert str(wide.program) == "Lower(loud)" and wide.pairs == [(i, i) for i in range(len(texts))]


def test_examples_are_not_learned_from_inputs_past_max_example_chars() -> None:
    """The name deep inside text of about 600 characters: past the default 512 no example is
    learned from (long descriptions made the search take minutes), within 1,024 it is."""
    rng = random.Random(2)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta"]
    names = [f"{''.join(rng.choices('abcdefghij', k=7))} {''.join(rng.choices('klmnopqrst', k=8))}" for _ in range(40)]
    text = [f"name: {n}; " + " ".join(rng.choices(words, k=100)) for n in names]
    source, target = (["text"], [[t] for t in text]), (["name"], [[n] for n in names])
    assert min(map(len, text)) > 512 and autojoin(source, target).program is None
    wide = autojoin(source, target, AutojoinSettings(max_example_chars=1024))
    assert wide.program is not None and wide.pairs == [(i, i) for i in range(len(names))]
