"""The fault and bad-input corpus, crawled through the portal: every failure is reported with its
reason, lenient parses are landed with their problems noted, and nothing else is lost."""

from __future__ import annotations

import gzip
from pathlib import Path

from catalog.core.identity import ckan_table_id, socrata_table_id
from plugins.local_portal import PortalHandle
from spark_jobs.crawl.crawl import run_crawl
from tests.crawl.conftest import bronze, changes_of, crawl_settings, csv_bytes, table_cells

CORPUS = Path(__file__).parent / "corpus"
H = "127.0.0.1"
GOOD = {
    "latin1": "CSV",
    "utf8_bom": "CSV",
    "utf16": "CSV",
    "ragged": "CSV",
    "stray_quote": "CSV",
    "header_only": "CSV",
    "blank_dup_headers": "CSV",
    "records": "JSON",
}
BAD = {"html_error": ("CSV", "HTML page"), "empty": ("CSV", "empty file"), "invalid": ("JSON", "invalid JSON")}


def _big_cell() -> bytes:
    return b"id,blob\n1," + b"x" * (100 << 20) + b"\n"


def _bomb() -> bytes:
    return gzip.compress(b"a,b\n" + b"0" * (64 << 20), compresslevel=1)


def test_corpus_failures_reported_nothing_else_lost(tmp_path: Path, portal: PortalHandle) -> None:
    settings = crawl_settings(
        tmp_path / "home", portal, max_cell_bytes=1 << 20, max_download_bytes=200 << 20, max_decompressed_bytes=16 << 20
    )
    store = portal.store
    keep = csv_bytes([["k", "v"], ["a", "1"]])
    store.add_socrata("good-0001", keep)
    store.add_ckan("stable", [("s", "CSV", keep)])
    first = run_crawl(settings)
    assert first.failures == [] and first.new == 2
    before = {r["table_id"]: r for r in bronze(settings)[0]}

    resources = [(name, fmt, (CORPUS / f"{name}.{fmt.lower()}").read_bytes()) for name, fmt in GOOD.items()]
    resources += [(name, fmt, (CORPUS / f"{name}.{fmt.lower()}").read_bytes()) for name, (fmt, _) in BAD.items()]
    resources += [("bigcell", "CSV", _big_cell()), ("bomb", "CSV", _bomb()), ("missing", "CSV", b"a\n1\n")]
    store.add_ckan("corpus", resources)
    store.add_socrata("slow-0001", csv_bytes([["s"], ["1"]]))
    store.add_socrata("flak-0001", csv_bytes([["f"], ["1"]]))
    store.add_socrata("dead-0001", csv_bytes([["d"], ["1"]]))
    store.set_content("socrata/good-0001", csv_bytes([["k", "v"], ["b", "2"]]))  # a change that will fail
    portal.add_fault("/download/corpus/missing", "404", times=1)
    portal.add_fault("/api/views/slow-0001", "slow", times=1, delay=8.0)  # timeout, then retried
    portal.add_fault("/api/views/flak-0001", "429", times=2, retry_after=1)
    portal.add_fault("/api/views/flak-0001", "truncate", times=1)
    portal.add_fault("/api/views/dead-0001", "500", times=100)
    portal.add_fault("/api/views/good-0001", "truncate", times=100)

    report = run_crawl(settings)
    cid = lambda r: ckan_table_id(H, "corpus", r)  # noqa: E731
    failures = dict(report.failures)
    expected_failed = {cid(n) for n in BAD} | {
        cid("bigcell"),
        cid("bomb"),
        cid("missing"),
        socrata_table_id(H, "dead-0001"),
        socrata_table_id(H, "good-0001"),
    }
    assert set(failures) == expected_failed
    for name, (_, reason) in BAD.items():
        assert reason in failures[cid(name)]
    assert "over the limit" in failures[cid("bigcell")]
    assert "gzip bomb" in failures[cid("bomb")]
    assert "HTTP 404" in failures[cid("missing")]
    assert "HTTP 500" in failures[socrata_table_id(H, "dead-0001")]
    assert report.failed == len(expected_failed)

    added, deleted = changes_of(settings, report.batch_id)
    assert deleted == set()  # a failed download never deletes the last good version
    assert added == {cid(n) for n in GOOD} | {socrata_table_id(H, "slow-0001"), socrata_table_id(H, "flak-0001")}
    after = {r["table_id"]: r for r in bronze(settings)[0]}
    for tid in before:  # the failed change kept the last good version
        assert after[tid] == before[tid]
    assert table_cells(settings, socrata_table_id(H, "good-0001")) == {(0, 1, "a"), (0, 2, "1")}
    assert table_cells(settings, cid("latin1")) >= {(0, 1, "Zürich"), (1, 2, "niño")}
    assert after[cid("blank_dup_headers")]["headers"] == ["column_1", "name", "name~2", "column_4"]
    assert after[cid("header_only")]["n_rows"] == 0
    problems = dict(report.problems)
    assert "short rows" in problems[cid("ragged")] or any(
        t == cid("ragged") and "short" in p for t, p in report.problems
    )
    assert any(t == cid("stray_quote") and "quote" in p for t, p in report.problems)

    # The failed ones are retried next time (no stamp recorded for them); the rest stays put.
    portal.clear_faults()
    again = run_crawl(settings)
    assert set(dict(again.failures)) == {cid(n) for n in BAD} | {cid("bigcell"), cid("bomb")}
    assert changes_of(settings, again.batch_id) == (
        {cid("missing"), socrata_table_id(H, "dead-0001"), socrata_table_id(H, "good-0001")},
        set(),
    )


def test_listing_failure_skips_source_and_deletes_nothing(tmp_path: Path, portal: PortalHandle) -> None:
    settings = crawl_settings(tmp_path / "home", portal)
    portal.store.add_socrata("abcd-0001", csv_bytes([["a"], ["1"]]))
    portal.store.add_ckan("p", [("r", "CSV", csv_bytes([["b"], ["2"]]))])
    assert run_crawl(settings).new == 2
    portal.store.add_ckan("p2", [("r", "CSV", csv_bytes([["c"], ["3"]]))])
    portal.add_fault("/api/catalog/v1", "invalid_json", times=100)
    report = run_crawl(settings)
    assert [d for d, _ in report.failures] == ["source soc"]
    assert "invalid JSON" in report.failures[0][1]
    assert changes_of(settings, report.batch_id) == ({ckan_table_id(H, "p2", "r")}, set())
    portal.clear_faults()
    portal.add_fault("/api/3/action/package_search", "500", times=100)
    report = run_crawl(settings)
    assert [d for d, _ in report.failures] == ["source ck"] and report.batch_id is None
