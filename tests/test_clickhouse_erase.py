"""Erasing chosen traces from a ClickHouse store (collector/storage/clickhouse_erase.py), on
chdb: the bundled samples with two traces erased hold, table by table, what the samples hold
once DuckDB's prune erased the same two, and nothing of them is left anywhere; texts another
trace still refers to stay; the report counts what DuckDB's does; an erased trace is not
derived back, and sent again, even to the writer that stored it, it is stored as it was."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from midtrace.collector.intake.ingest import IngestReport, jobs_of_file
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.clickhouse_erase import erase
from midtrace.collector.storage.clickhouse_store import ClickHouseStore
from midtrace.collector.storage.retention import PruneReport, prune
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.schemas.model import Outcome
from midtrace.sql import sqlfiles
from tests.chdb_databases import connection_in, database_url
from tests.clickhouse_samples import (
    SAMPLES, STORAGE_VIEWS, assert_same_rows, load_samples, rows_of)

# langchain_rag: one of two traces that share a span text (kept for the other); its chunk
# texts are all shared with other traces
SHARING = "afadf7ebc721e27692aedb42afff7815"
SHARES_WITH = "da9d10313728205278aabeea650c2544"
# support_2026-11-09: a span outcome and a posted one (support_outcomes.json)
GRADED = "01d366df2763970929cb593095b9e918"
ERASED = (SHARING, GRADED)
MISSING = "ab" * 16  # no such trace
# tables whose rows carry no trace, with times of their own: written when the store is opened,
# and pending_work, where an erase records when it began
BOOKKEEPING = {"schema_migrations", "derived_state", "pending_work"}


def select(conn: clickhouse.Connection, sql: str, params: dict[str, Any] | None = None
           ) -> list[dict[str, Any]]:
    return conn.query(sql, params).to_pylist()


def tables(conn: clickhouse.Connection) -> dict[str, set[str]]:
    """Every table and view of the store's database, with its columns."""
    found: dict[str, set[str]] = {}
    for row in select(conn, "SELECT table, name FROM system.columns "
                            "WHERE database = currentDatabase()"):
        found.setdefault(row["table"], set()).add(row["name"])
    return found


def rows_of_traces(conn: clickhouse.Connection, trace_ids: tuple[str, ...],
                   request_ids: list[int]) -> dict[str, int]:
    """For every table and view with a trace_id or request_id column: its rows of these traces
    (by trace id, or by one of ``request_ids``)."""
    out = {}
    params = {"trace_ids": list(trace_ids), "request_ids": request_ids}
    for table, columns in tables(conn).items():
        where = []
        if "trace_id" in columns:
            where.append("has({trace_ids:Array(String)}, assumeNotNull(trace_id))")
        if "request_id" in columns:
            where.append("has({request_ids:Array(Int64)}, request_id)")
        if where:
            out[table] = select(conn, f"SELECT count() AS n FROM {table} WHERE "
                                      + " OR ".join(where), params)[0]["n"]
    return out


def request_ids_of(conn: clickhouse.Connection, trace_ids: tuple[str, ...]) -> list[int]:
    return [r["request_id"] for r in select(
        conn, "SELECT DISTINCT request_id FROM derivations "
              "WHERE has({trace_ids:Array(String)}, trace_id)", {"trace_ids": list(trace_ids)})]


def span_texts(conn: clickhouse.Connection, trace_id: str) -> tuple[set[str], set[str]]:
    """The texts the trace's spans refer to, and those of them the store holds."""
    ids = {"trace_ids": [trace_id]}
    referred = {r["h"] for r in select(conn, "SELECT DISTINCT arrayJoin(text_refs) AS h FROM "
                                             "spans WHERE trace_id = {trace_ids:Array(String)}[1]",
                                       ids)}
    held = set(conn.query(sqlfiles.query("texts_of_traces", engine="clickhouse"), ids)
               .column(0).to_pylist())
    return referred, held


def chunk_texts_of(conn: clickhouse.Connection, trace_id: str) -> tuple[set[str], set[str]]:
    """The chunk texts the trace's chunks refer to, and those of them the store holds."""
    params = {"trace_id": trace_id}
    referred = {r["h"] for r in select(
        conn, "SELECT DISTINCT assumeNotNull(c.text_hash) AS h FROM chunks c "
              "JOIN requests r USING (request_id) "
              "WHERE r.trace_id = {trace_id:String} AND c.text_hash IS NOT NULL", params)}
    held = {r["text_hash"] for r in select(
        conn, "SELECT DISTINCT text_hash FROM chunk_texts WHERE has({h:Array(String)}, text_hash)",
        {"h": sorted(referred)})}
    return referred, held


@pytest.fixture(scope="module")
def erased(sample_stores: tuple[Path, Any], chdb_folder: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The samples in a ClickHouse database with ERASED (and MISSING) erased, what that
    database held before, and the samples with the same traces pruned by DuckDB, in a second
    database: with DuckDB's report."""
    db, _ = sample_stores
    work = tmp_path_factory.mktemp("erase")
    conn = load_samples(db, database_url(chdb_folder, "erase_samples"), work)
    before = {"request_ids": request_ids_of(conn, ERASED),
              "rows": rows_of_traces(conn, ERASED, request_ids_of(conn, ERASED)),
              "texts": span_texts(conn, SHARING), "shared": span_texts(conn, SHARES_WITH),
              "chunk_texts": chunk_texts_of(conn, SHARING),
              "counts": select(conn, sqlfiles.query("table_counts", engine="clickhouse"))[0]}
    report = erase(conn, [*ERASED, MISSING])
    # the same traces pruned from a copy of the DuckDB file, in a database of their own
    pruned = work / "pruned.duckdb"
    shutil.copy(db, pruned)
    store = Store.open(pruned)
    try:
        duckdb_report = prune(store, trace_ids=[*ERASED, MISSING])
    finally:
        store.close()
    reference = load_samples(pruned, database_url(chdb_folder, "erase_reference"),
                             tmp_path_factory.mktemp("erase_reference"))
    yield {"conn": conn, "reference": reference, "report": report,
           "duckdb_report": duckdb_report, "before": before}


def test_the_traces_leave_no_row_in_any_table(erased: dict[str, Any]) -> None:
    conn, before = erased["conn"], erased["before"]
    assert len(before["request_ids"]) == 2
    held = before["rows"]
    assert {"spans", "derivations", "requests_versions", "chunks_versions",
            "placements_versions", "outcomes_versions", "request_evidence_versions"} <= {
        t for t, n in held.items() if n}, held
    found = rows_of_traces(conn, ERASED, before["request_ids"])
    assert found.keys() == held.keys()
    assert set(found.values()) == {0}, found
    assert not select(conn, sqlfiles.query("unfinished_mutations", engine="clickhouse"))


def test_every_table_and_view_holds_what_the_samples_without_the_traces_hold(
        erased: dict[str, Any]) -> None:
    """Every table, the views over the versioned tables, and the metric views' summary (the
    other views read the same tables)."""
    conn, reference = erased["conn"], erased["reference"]
    names = tables(conn)
    assert names.keys() == tables(reference).keys()
    stored = {r["name"] for r in select(conn, "SELECT name FROM system.tables WHERE database = "
                                              "currentDatabase() AND engine != 'View'")}
    compared = [t for t in names if t in stored - BOOKKEEPING or t in {*STORAGE_VIEWS, "overview"}]
    assert {"spans", "texts", "chunk_texts", "request_evidence_versions", "derivations",
            *STORAGE_VIEWS} <= set(compared)
    for table in sorted(compared):
        expected = rows_of(reference.query(f"SELECT * FROM {table}"))
        got = rows_of(conn.query(f"SELECT * FROM {table}"))
        assert len(got) == len(expected), table
        assert_same_rows(table, expected, got)  # floats summed in another order may differ


def test_texts_another_trace_refers_to_stay_and_the_others_go(erased: dict[str, Any]) -> None:
    conn, before = erased["conn"], erased["before"]
    referred, held = before["texts"]
    other_referred, other_held = before["shared"]
    assert referred == held and other_referred == other_held
    shared = referred & other_referred
    assert shared and referred - shared
    assert span_texts(conn, SHARES_WITH) == (other_referred, other_referred)
    left = {r["text_hash"] for r in select(conn, "SELECT text_hash FROM texts "
                                                 "WHERE has({h:Array(String)}, text_hash)",
                                           {"h": sorted(referred)})}
    assert left == shared
    chunk_referred, chunk_held = before["chunk_texts"]
    assert chunk_referred and chunk_held == chunk_referred
    still = {r["text_hash"] for r in select(conn, "SELECT text_hash FROM chunk_texts "
                                                  "WHERE has({h:Array(String)}, text_hash)",
                                            {"h": sorted(chunk_referred)})}
    assert still == chunk_referred  # every one is another trace's too


def test_the_report_counts_what_duckdbs_prune_counts(erased: dict[str, Any]) -> None:
    report, before = erased["report"], erased["before"]
    assert report == erased["duckdb_report"]
    assert report.traces == 2 and report.spans > 0 and report.requests == 2
    assert report.not_stored == [MISSING]  # named, held nothing of: not counted deleted
    assert report.outcomes >= 2
    after = select(erased["conn"], sqlfiles.query("table_counts", engine="clickhouse"))[0]
    for name in ("spans", "requests", "outcomes"):
        assert before["counts"][name] - after[name] == getattr(report, name), name


def test_a_trace_not_stored_deletes_nothing(erased: dict[str, Any]) -> None:
    conn = erased["conn"]
    counts = select(conn, sqlfiles.query("table_counts", engine="clickhouse"))
    assert erase(conn, [MISSING]) == PruneReport(not_stored=[MISSING])
    assert erase(conn, [*ERASED]) == PruneReport(not_stored=sorted(ERASED))  # erased already
    assert erase(conn, []) == PruneReport()
    assert select(conn, sqlfiles.query("table_counts", engine="clickhouse")) == counts
    with pytest.raises(ValueError, match="not 32 hex"):
        erase(conn, ["not-a-trace"])


# --- the write path: erased, not derived back, sent again -------------------------------------

SMALL = [SAMPLES / f"{name}.jsonl" for name in ("langchain_rag", "haystack_rag", "dspy_rag")]


def snapshot(conn: clickhouse.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the store reads, request ids replaced by trace ids and what differs between
    two writes of the same spans left out (outcome ids, arrival and derivation times,
    versions)."""
    def rows(sql: str) -> list[tuple[Any, ...]]:
        return rows_of(conn.query(sql))

    out = {table: rows(f"SELECT r.trace_id AS trace, t.* EXCEPT (request_id) FROM {table} t "
                       "JOIN requests r USING (request_id)")
           for table in ("requests", "chunks", "placements", "answer_sources")}
    out["outcomes"] = rows("SELECT * EXCEPT (outcome_id, received_at) FROM outcomes")
    out["request_evidence"] = rows("SELECT * EXCEPT (request_id, graded_at, answer_key) "
                                   "FROM request_evidence")
    out["derivations"] = rows("SELECT trace_id, has_request FROM current_derivations")
    out["spans"] = rows("SELECT * EXCEPT (received_at) FROM spans FINAL")
    out["texts"] = rows("SELECT DISTINCT * FROM texts")
    out["chunk_texts"] = rows("SELECT DISTINCT * FROM chunk_texts")
    return out


def test_an_erased_trace_is_not_derived_back_and_sent_again_is_stored_as_it_was(
        chdb_folder: Path) -> None:
    report = IngestReport()
    jobs = [job for path in SMALL for job in jobs_of_file(path, report)]
    assert not report.refused
    spans = [s for job in jobs for s in job.spans]
    traces = sorted({s.trace_id for s in spans})
    assert SHARING in traces
    graded = traces[0]
    outcomes = [Outcome(trace_id=graded, correct=False, reviewer="r", note="wrong date"),
                Outcome(trace_id=graded, correct=True, score=0.5, grader="judge")]
    conn = connection_in(chdb_folder, "erase_resend")
    writer = ClickHouseStore(conn)
    writer.write([WriteJob(spans=spans, outcomes=outcomes)])
    before = snapshot(conn)
    ids = (graded, SHARING)
    assert erase(conn, ids).requests == 2
    after = snapshot(conn)
    assert after != before
    for name, rows in after.items():
        assert not [r for r in rows if any(t in r for t in ids)], name
    # nothing left for recovery to derive back
    assert not conn.query(sqlfiles.query("underived_traces", engine="clickhouse")).num_rows
    assert ClickHouseStore(conn).recover().traces == 0
    assert snapshot(conn) == after
    # sent again to the writer that stored them, which remembers storing their texts: stored
    # afresh, as it was
    again = [s for s in spans if s.trace_id in ids]
    writer.write([WriteJob(spans=again, outcomes=outcomes)])
    assert snapshot(conn) == before
