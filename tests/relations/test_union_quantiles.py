"""Numeric columns carry the quantiles of their sampled values, and the distribution signal compares
them: the arithmetic against its definition, and a lake whose stored features predate them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from spark_jobs.lake.batches import ChangeBatch
from spark_jobs.lake.store import LakeStore
from spark_jobs.relate import union_score, unionable
from spark_jobs.relate.union_features import FEATURES_SCHEMA, UNIONABLE_FEATURES, features_outdated, sample_quantiles
from spark_jobs.relate.union_score import QUANTILE_POINTS


def _numbers(tokens: list[str]) -> np.ndarray:
    """The tokens a plain reading takes for finite decimal numbers (no `nan`, `inf`, `1_000`)."""
    out = []
    for t in tokens:
        if t.strip() != t or "_" in t or t.lower().lstrip("-") in ("nan", "inf", "infinity") or t.startswith("+"):
            continue
        try:
            x = float(t)
        except ValueError:
            continue
        if abs(x) < 1e300:
            out.append(x)
    return np.array(out)


def test_sample_quantiles_are_numpys_quantiles_of_each_owners_numbers() -> None:
    rng = np.random.default_rng(11)
    words = ["abc", "nan", "inf", "-inf", "1_000", "+3", " 4", "", "1e999", "12-01", "x1"]
    tokens, owners = [], []
    for owner in range(40):
        n = int(rng.integers(0, 30))
        for _ in range(n):
            kind = rng.random()
            if kind < 0.6:
                tokens.append(repr(float(rng.normal(0, 10.0 ** rng.integers(-2, 6)))))
            elif kind < 0.8:
                tokens.append(str(int(rng.integers(-500, 500))))
            else:
                tokens.append(words[int(rng.integers(len(words)))])
            owners.append(owner)
    got = sample_quantiles(pa.array(tokens, pa.string()), np.array(owners, np.int64), 41)
    by_owner = np.array(owners)
    for owner in range(41):
        xs = _numbers([t for t, o in zip(tokens, by_owner, strict=True) if o == owner])
        if len(xs) < 2:
            assert np.isnan(got[owner]).all()
        else:
            np.testing.assert_allclose(got[owner], np.quantile(xs, QUANTILE_POINTS), rtol=1e-12, atol=1e-12)


def _column(column_id: str, values: np.ndarray | None, mean: float, std: float) -> dict[str, object]:
    quantiles = None if values is None else np.quantile(values, QUANTILE_POINTS).tolist()
    return {
        "column_id": column_id,
        "header": column_id,
        "type": "decimal",
        "size": 100,
        "numeric": True,
        "mean": mean,
        "std": std,
        "quantiles": quantiles,
    }


def test_random_rows_of_a_column_are_closer_than_another_shape_with_its_mean_and_deviation() -> None:
    rng = np.random.default_rng(5)
    column = rng.normal(50.0, 10.0, 4000)
    rows = column[rng.random(len(column)) < 0.3]
    skewed = rng.exponential(10.0, 4000) + 40.0  # the same mean and deviation, another shape
    own = union_score.Columns.from_records([_column("a", column, 50.0, 10.0)])
    others = union_score.Columns.from_records(
        [
            _column("rows", rows, float(rows.mean()), float(rows.std())),
            _column("skewed", skewed, float(skewed.mean()), float(skewed.std())),
            _column("unknown", None, 50.0, 10.0),
        ]
    )
    closeness = union_score.quantile_closeness(own, others)[0]
    assert closeness[0] > 0.7 and closeness[1] < 0.5 and np.isnan(closeness[2])
    distribution = union_score.distribution_matrix(own, others)[0]
    normal_fit = distribution[2]  # no quantiles: the normal fit alone
    assert distribution[0] > distribution[1]
    assert distribution[1] < 0.5 < normal_fit


def test_quantile_closeness_is_the_same_at_any_scale_and_separates_constants() -> None:
    rng = np.random.default_rng(8)
    x = rng.gamma(2.0, 3.0, 500)
    y = x[rng.random(len(x)) < 0.2] + 0.5

    def closeness(scale: float) -> float:
        a = union_score.Columns.from_records([_column("a", x * scale, 0.0, 1.0)])
        b = union_score.Columns.from_records([_column("b", y * scale, 0.0, 1.0)])
        return float(union_score.quantile_closeness(a, b)[0, 0])

    qx, qy = np.quantile(x, QUANTILE_POINTS), np.quantile(y, QUANTILE_POINTS)
    distance = np.mean(np.abs(qx - qy)) / max(qx[-1] - qx[0], qy[-1] - qy[0])
    assert closeness(1.0) == pytest.approx(np.exp(-distance / union_score.QUANTILE_SCALE))
    assert closeness(1e-3) == pytest.approx(closeness(1.0)) == pytest.approx(closeness(1e6))
    assert 0.0 < closeness(1.0) < 1.0
    constants = union_score.Columns.from_records(
        [_column("one", np.ones(5), 1.0, 0.0), _column("two", np.full(5, 2.0), 2.0, 0.0)]
    )
    assert union_score.quantile_closeness(constants, constants).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_features_written_before_the_quantiles_are_computed_again_and_every_list_with_them(
    spark,
    two_states,
    catalog_settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    settings = two_states.copy_of_b(catalog_settings, tmp_path)
    store = LakeStore(settings.lake, spark)
    current = store.read_arrow(UNIONABLE_FEATURES)
    assert any(q is not None for q in current.column("quantiles").to_pylist())  # the lake has numeric columns
    lists = store.read_arrow(unionable.UNIONABLE).sort_by([("table_id", "ascending"), ("rank", "ascending")])
    store.overwrite(UNIONABLE_FEATURES, current.drop_columns(["quantiles"]), new_schema=True)  # as an old release
    assert features_outdated(store)

    batch = ChangeBatch(two_states.batch_2.batch_id, (), ())  # nothing touched: only the migration lists again
    counts = unionable.update(spark, store, settings, batch, record_changes=False)

    assert store.arrow_schema(UNIONABLE_FEATURES).names == FEATURES_SCHEMA.names
    assert not features_outdated(store)
    again = store.read_arrow(UNIONABLE_FEATURES)
    assert sorted(again.column("column_id").to_pylist()) == sorted(current.column("column_id").to_pylist())
    assert counts["n_unionable_affected"] == len(set(current.column("table_id").to_pylist()))
    relisted = store.read_arrow(unionable.UNIONABLE).sort_by([("table_id", "ascending"), ("rank", "ascending")])
    names = ["table_id", "rank", "candidate_table_id", "score", "alignment"]
    assert relisted.select(names).to_pylist() == lists.select(names).to_pylist()
