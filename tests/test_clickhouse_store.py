"""The write path on ClickHouse (collector/storage/clickhouse_store.py), on chdb.

The bundled samples ingested into DuckDB through the CLI and into a ClickHouseStore through
the same offline ingest give the same rows in every metric view, so ClickHouse derives what
DuckDB derives. Then what many writers sharing one ClickHouse need: ingesting again changes
nothing, a trace split between writers (in either order, or at once from two threads) comes
out as from one write, a re-derivation with fewer chunks leaves none of the old ones, the
migrations are applied once, and a retention sets a TTL.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from midtrace.collector.intake.ingest import IngestReport, ingest_files, jobs_of_file
from midtrace.collector.query import reads
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.clickhouse_store import (
    ClickHouseStore, derivation_version, request_id)
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.schemas.model import Outcome
from midtrace.schemas.span import SpanRecord
from midtrace.sql import sqlfiles
from tests.chdb_databases import connection_in
from tests.clickhouse_samples import assert_same_rows, rows_of as _rows, same_grouping as _same_grouping
from tests.sample_db import samples_duckdb

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
ALL_SAMPLES = sorted(SAMPLES.glob("*.jsonl.gz")) + [SAMPLES / "langchain_rag.jsonl",
                                                    SAMPLES / "support_outcomes.json"]
# Small samples, one per framework: 51 traces of 433 spans, for the writer scenarios.
SMALL = [SAMPLES / f"{name}.jsonl" for name in
         ("agents_rag", "dspy_rag", "haystack_rag", "llamaindex_rag", "langchain_rag",
          "vercel_ai_rag")]
METRIC_VIEWS = sorted(reads.metric_views())
# The derived rows of each trace as the views read them, keyed without the request id.
DERIVED = ("requests", "chunks", "placements", "answer_sources")


@pytest.fixture(scope="module")
def duck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """Every bundled sample ingested into DuckDB through the CLI."""
    db = samples_duckdb(tmp_path_factory, tmp_path_factory.mktemp("duck") / "samples.duckdb")
    conn = duckdb.connect(str(db), read_only=True)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def samples(chdb_folder: Path) -> Iterator[tuple[Any, ClickHouseStore, IngestReport]]:
    """Every bundled sample ingested into a ClickHouseStore by the offline ingest."""
    session = connection_in(chdb_folder, "store_samples")
    store = ClickHouseStore(session)
    report = ingest_files(store, ALL_SAMPLES)
    assert not report.refused
    yield session, store, report


def small_jobs() -> list[WriteJob]:
    report = IngestReport()
    jobs = [job for path in SMALL for job in jobs_of_file(path, report)]
    assert not report.refused
    return jobs


def spans_of(jobs: list[WriteJob]) -> list[SpanRecord]:
    return [s for job in jobs for s in job.spans]


def graded(spans: list[SpanRecord]) -> list[Outcome]:
    """A person's grade for every third trace, a judge's for every fourth."""
    traces = sorted({s.trace_id for s in spans})
    return ([Outcome(trace_id=t, correct=i % 2 == 0, reviewer="r") for i, t in enumerate(traces[::3])]
            + [Outcome(trace_id=t, correct=True, score=0.5, grader="judge") for t in traces[::4]])


@pytest.fixture(scope="module")
def one_writer(chdb_folder: Path) -> Iterator[Any]:
    """The small samples and their grades, written by one writer in one write."""
    session = connection_in(chdb_folder, "store_one_writer")
    spans = spans_of(small_jobs())
    ClickHouseStore(session).write([WriteJob(spans=spans, outcomes=graded(spans))])
    yield session


def select(session: Any, sql: str) -> pa.Table:
    return session.query(sql)


def view_rows(session: Any, view: str) -> list[tuple[Any, ...]]:
    return _rows(select(session, f"SELECT * FROM {view}"))


def derived_rows(session: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The current derived rows and outcomes, request ids replaced by trace ids, outcome ids
    and arrival times (which differ between writes) left out."""
    out = {table: view_rows(session, f"(SELECT r.trace_id AS trace, t.* EXCEPT (request_id) "
                                     f"FROM {table} t JOIN requests r USING (request_id))")
           for table in DERIVED}
    out["outcomes"] = view_rows(session, "(SELECT * EXCEPT (outcome_id, received_at) "
                                         "FROM outcomes)")
    out["request_evidence"] = view_rows(
        session, "(SELECT * EXCEPT (request_id, graded_at, answer_key) FROM request_evidence)")
    return out


def assert_same_views(expected: Any, got: Any) -> None:
    for view in METRIC_VIEWS:
        assert_same_rows(view, view_rows(expected, view), view_rows(got, view))


# --- the samples on both engines --------------------------------------------------------------

def test_every_metric_view_gives_duckdbs_rows(duck: duckdb.DuckDBPyConnection,
                                              samples: tuple[Any, ClickHouseStore, Any]) -> None:
    session, _, report = samples
    assert report.requests == duck.execute("SELECT count(*) FROM requests").fetchall()[0][0] > 4000
    for table in ("requests", "chunks", "placements", "answer_sources", "outcomes",
                  "request_evidence"):
        expected = duck.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
        got = select(session, f"SELECT count() FROM {table}").column(0)[0].as_py()
        assert (table, got) == (table, expected)
    for view in METRIC_VIEWS:
        expected = duck.sql(f"SELECT * FROM {view}").to_arrow_table()
        got = select(session, f"SELECT * FROM {view}")
        assert got.column_names == expected.column_names, view
        assert expected.num_rows > 0, f"{view} is empty on the samples"
        if "answer_key" in expected.column_names:
            expected, got = _same_grouping(expected, got, "answer_key")
        assert_same_rows(view, _rows(expected), _rows(got))


def test_ingesting_the_samples_again_changes_no_row(
        duck: duckdb.DuckDBPyConnection, samples: tuple[Any, ClickHouseStore, Any]) -> None:
    """Production traffic with outcomes, an experiment and a framework's traces ingested again
    (one file of each: every sample again would take a minute on chdb for the same proof)."""
    session, store, _ = samples
    before = derived_rows(session)
    views = {view: view_rows(session, view) for view in METRIC_VIEWS}
    again = ingest_files(store, [SAMPLES / "support_2026-11-09.jsonl.gz",
                                 SAMPLES / "sweep_edge.jsonl.gz", SAMPLES / "langchain_rag.jsonl"])
    assert not again.refused and again.requests > 200
    assert derived_rows(session) == before
    for view in METRIC_VIEWS:
        assert_same_rows(view, views[view], view_rows(session, view))
    # those traces derived twice, read once: one current row per request
    counts = select(session, "SELECT (SELECT count() FROM requests), "
                             "(SELECT uniqExact(trace_id) FROM requests), "
                             "(SELECT count() FROM request_evidence), "
                             "(SELECT uniqExact(request_id) FROM request_evidence_versions), "
                             "(SELECT count() FROM requests_versions FINAL)").to_pylist()[0]
    requests, traces, evidence, evidence_requests, versions = counts.values()
    assert requests == traces == evidence == evidence_requests
    # each version kept, even merged (the newer one may not be published yet)
    assert versions >= requests + again.requests


# --- many writers -----------------------------------------------------------------------------

def test_request_ids_and_versions() -> None:
    assert request_id("0af7651916cd43dd8448eb211c80319c") == request_id(
        "0af7651916cd43dd8448eb211c80319c") < 2 ** 53
    assert len({request_id(f"{i:032x}") for i in range(10_000)}) == 10_000
    at = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)
    # more spans win whatever the clock says; then the later derivation
    assert derivation_version(3, at) > derivation_version(2, at + 10 ** 9)
    assert derivation_version(2, at + 1) > derivation_version(2, at)


@pytest.mark.parametrize("order", ["first half first", "second half first"])
def test_a_trace_split_between_two_writers_comes_out_as_from_one_write(
        chdb_folder: Path, one_writer: Any, order: str) -> None:
    session = connection_in(chdb_folder, "store_split_" + order.split()[0])
    spans = spans_of(small_jobs())
    # every trace's spans dealt to two writers, each trace split between them
    halves: list[list[SpanRecord]] = [[], []]
    for i, span in enumerate(sorted(spans, key=lambda s: (s.trace_id, s.span_id))):
        halves[i % 2].append(span)
    if order == "second half first":
        halves.reverse()
    a, b = ClickHouseStore(session), ClickHouseStore(session)
    outcomes = graded(spans)
    a.write([WriteJob(spans=halves[0], outcomes=outcomes[::2])])
    b.write([WriteJob(spans=halves[1], outcomes=outcomes[1::2])])
    assert derived_rows(session) == derived_rows(one_writer)
    assert_same_views(one_writer, session)


def test_two_writers_at_once_from_two_threads(chdb_folder: Path, one_writer: Any) -> None:
    """Two stores on one chdb session (as two collectors on one server), each writing about
    half of every trace's spans, in writes of a few traces, from its own thread at once."""
    session = connection_in(chdb_folder, "store_threads")
    spans = sorted(spans_of(small_jobs()), key=lambda s: (s.trace_id, s.span_id))
    outcomes = graded(spans)
    stores = [ClickHouseStore(session), ClickHouseStore(session)]
    dealt: list[list[SpanRecord]] = [[], []]
    rng = random.Random(7)
    for span in spans:
        dealt[rng.randrange(2)].append(span)
    split = {s.trace_id for s in dealt[0]} & {s.trace_id for s in dealt[1]}
    assert len(split) > 40  # of 51 traces
    work = [[WriteJob(spans=mine[i:i + 24]) for i in range(0, len(mine), 24)] for mine in dealt]
    work[0].insert(len(work[0]) // 2, WriteJob(outcomes=outcomes[::2]))
    work[1].insert(len(work[1]) // 2, WriteJob(outcomes=outcomes[1::2]))
    errors: list[BaseException] = []

    def run(store: ClickHouseStore, jobs: list[WriteJob]) -> None:
        try:
            for job in jobs:
                store.write([job])
        except BaseException as e:  # reported by the test below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(s, w)) for s, w in zip(stores, work)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    traces = len({s.trace_id for s in spans})
    stored = select(session, "SELECT count(), uniqExact(trace_id) FROM requests").to_pylist()[0]
    assert list(stored.values()) == [traces, traces]
    assert derived_rows(session) == derived_rows(one_writer)
    assert_same_views(one_writer, session)


def test_a_rederivation_with_fewer_chunks_leaves_none_of_the_old(chdb_folder: Path) -> None:
    """A newer derivation of a trace with three chunks more (as an older normalizer might have
    found), then the trace derived again: only the chunks of the newest derivation are read."""
    session = connection_in(chdb_folder, "store_fewer_chunks")
    store = ClickHouseStore(session)
    spans = [s for s in spans_of(small_jobs()) if s.trace_id == spans_of(small_jobs())[0].trace_id]
    store.write([WriteJob(spans=spans)])
    rid = request_id(spans[0].trace_id)
    before = derived_rows(session)
    n = len(before["chunks"])
    assert n > 0

    current = select(session, "SELECT * FROM current_derivations").to_pylist()
    assert [(d["request_id"], d["has_request"]) for d in current] == [(rid, True)]
    at = (current[0]["version"] & ((1 << 42) - 1)) + int(
        datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000) + 1
    version = derivation_version(len(spans), at)
    chunks = select(session, "SELECT * FROM chunks_versions")
    rows = chunks.to_pylist()
    rows += [{**rows[0], "ordinal": n + k} for k in range(3)]
    more = _with_version(pa.Table.from_pylist(rows, schema=chunks.schema), version)
    for table, data in (("chunks_versions", more),
                        ("requests_versions", _with_version(select(
                            session, "SELECT * FROM requests_versions"), version)),
                        ("placements_versions", _with_version(select(
                            session, "SELECT * FROM placements_versions"), version)),
                        ("answer_sources_versions", _with_version(select(
                            session, "SELECT * FROM answer_sources_versions"), version)),
                        ("derivations", _with_version(select(
                            session, "SELECT * FROM derivations"), version))):
        store.conn.insert(table, data)
    assert len(derived_rows(session)["chunks"]) == n + 3

    stats = store.rederive([spans[0].trace_id])
    assert stats.requests == 1
    assert derived_rows(session) == before
    # three versions stored (none updated or deleted), the newest alone read
    assert select(session, "SELECT count() FROM chunks_versions").column(0)[0].as_py() == 3 * n + 3


def _with_version(table: pa.Table, version: int) -> pa.Table:
    return table.set_column(table.column_names.index("version"), "version",
                            pa.array([version] * table.num_rows, pa.uint64()))


def test_a_trace_that_no_longer_gives_a_request_is_read_as_none(chdb_folder: Path) -> None:
    """A derivation with no request (spans that describe no retrieval or LLM call) hides the
    rows of the one before it, as DuckDB deletes them."""
    session = connection_in(chdb_folder, "store_no_request")
    store = ClickHouseStore(session)
    spans = spans_of(small_jobs())
    first = sorted({s.trace_id for s in spans})[0]
    store.write([WriteJob(spans=[s for s in spans if s.trace_id == first])])
    assert select(session, "SELECT count() FROM request_evidence").column(0)[0].as_py() == 1
    # a later derivation, of more spans, that gave no request
    store.conn.insert("derivations", pa.table({
        "request_id": pa.array([request_id(first)], pa.int64()), "trace_id": [first],
        "time": pa.array([datetime.now(UTC)], pa.timestamp("us", tz="UTC")),
        "version": pa.array([derivation_version(10 ** 6, 0)], pa.uint64()),
        "has_request": [False]}))
    for view in ("requests", "chunks", "placements", "answer_sources", "request_evidence"):
        assert select(session, f"SELECT count() FROM {view}").column(0)[0].as_py() == 0, view


# --- schema bookkeeping and retention --------------------------------------------------------

def test_opening_a_store_again_applies_no_migration(chdb_folder: Path) -> None:
    session = connection_in(chdb_folder, "store_migrations")
    assert clickhouse.create_schema(session) == [m.version for m in sqlfiles.migrations()]
    ClickHouseStore(session)
    assert clickhouse.create_schema(session) == []
    recorded = select(session, "SELECT version FROM schema_migrations ORDER BY version")
    assert recorded.column(0).to_pylist() == [m.version for m in sqlfiles.migrations()]


def test_a_store_brought_up_to_this_definition_is_left_as_it_is(chdb_folder: Path) -> None:
    """Opening a store whose recorded schema definition is this one creates nothing again (a
    view dropped behind its back stays dropped); a store recorded with another definition gets
    every view again."""
    session = connection_in(chdb_folder, "store_definition")
    ClickHouseStore(session)
    view = sqlfiles.views()[-1].name

    def views() -> set[str]:
        return set(select(session, "SELECT name FROM system.tables WHERE database = "
                                   "currentDatabase()").column(0).to_pylist())

    assert view in views()
    session.command(f"DROP VIEW {view}")
    ClickHouseStore(session)
    assert view not in views()
    session.command("INSERT INTO derived_state VALUES ('schema', 'older', now64(6))")
    ClickHouseStore(session)
    assert view in views()
    recorded = select(session, sqlfiles.query("schema_definition", engine="clickhouse"))
    assert recorded.column(0)[0].as_py() == clickhouse.schema_hash()


def test_a_retention_sets_a_ttl_on_every_day_partitioned_table(chdb_folder: Path) -> None:
    session = connection_in(chdb_folder, "store_retention")
    store = ClickHouseStore(session)
    spans = spans_of(small_jobs())
    traces = sorted({s.trace_id for s in spans})
    old, recent = set(traces[::2]), set(traces[1::2])
    now_ns = time.time_ns()
    first = min(s.start_ns for s in spans)

    def aged(span: SpanRecord, days: int) -> SpanRecord:
        shift = now_ns - days * 86_400 * 10 ** 9 - first
        return dataclasses.replace(span, start_ns=span.start_ns + shift,
                                   end_ns=span.end_ns + shift)

    store.write([WriteJob(spans=[aged(s, 40 if s.trace_id in old else 0) for s in spans])])
    assert select(session, "SELECT count() FROM requests").column(0)[0].as_py() == len(traces)
    with pytest.raises(ValueError, match="whole number of days"):
        clickhouse.set_retention(session, 0)
    clickhouse.set_retention(session, 30)
    tables = select(session, "SELECT name, engine_full, partition_key FROM system.tables "
                             "WHERE database = currentDatabase() AND engine LIKE '%MergeTree'")
    partitioned = {row["name"]: row["engine_full"] for row in tables.to_pylist()
                   if row["partition_key"] and not row["name"].startswith("scoped_")}
    copies = {row["name"]: row["engine_full"] for row in tables.to_pylist()
              if row["name"].startswith("scoped_")}
    assert sorted(copies) == sorted(f"scoped_{n}" for n in clickhouse.SCOPED_TABLES)
    for name, engine in copies.items():  # a refresh's copies keep their hour
        assert "TTL scoped_at + toIntervalHour(1)" in engine, (name, engine)
    assert set(partitioned) == {"spans", "derivations", "requests_versions", "chunks_versions",
                                "placements_versions", "answer_sources_versions",
                                "outcomes_versions", "request_evidence_versions"}
    for name, engine in partitioned.items():
        assert "TTL" in engine and "toIntervalDay(30)" in engine, (name, engine)
    # once applied, the TTL leaves the rows of the traces 40 days old and keeps the others
    for name in partitioned:
        session.command(f"OPTIMIZE TABLE {name} FINAL")
    for table in ("requests", "spans", "chunks_versions", "derivations"):
        kept = select(session, f"SELECT DISTINCT trace_id FROM {table}" if table != "chunks_versions"
                      else "SELECT DISTINCT r.trace_id FROM chunks_versions c "
                           "JOIN requests r USING (request_id)")
        assert set(kept.column(0).to_pylist()) == recent, table
    assert select(session, "SELECT count() FROM chunks_versions").column(0)[0].as_py() == select(
        session, "SELECT count() FROM chunks").column(0)[0].as_py() > 0


def test_without_text_the_spans_are_kept_as_duckdb_keeps_them(chdb_folder: Path) -> None:
    """keep_text=False (--no-text): the same attributes stored, texts dropped alike."""
    session = connection_in(chdb_folder, "store_no_text")
    spans = spans_of(small_jobs())
    ClickHouseStore(session, keep_text=False).write([WriteJob(spans=spans)])
    duck = Store(duckdb.connect(), keep_text=False)
    duck.write([WriteJob(spans=spans)])
    query = "SELECT trace_id, span_id, attributes, text_refs FROM spans ORDER BY trace_id, span_id"
    expected = duck.conn.sql(query).fetchall()
    got = [tuple(r.values()) for r in select(session, query).to_pylist()]
    assert got == [(t, s, a, refs or []) for t, s, a, refs in expected]
    assert any("$redacted" in a for _, _, a, _ in expected)
    for table in ("texts", "chunk_texts"):
        assert duck.conn.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0] == select(
            session, f"SELECT count() FROM {table}").column(0)[0].as_py()
    questions = select(session, "SELECT count() FROM requests WHERE question IS NOT NULL "
                                "OR answer IS NOT NULL").column(0)[0].as_py()
    assert questions == 0 < select(session, "SELECT count() FROM requests").column(0)[0].as_py()
    duck.close()


def test_a_changed_evidence_definition_computes_every_row_again(chdb_folder: Path) -> None:
    session = connection_in(chdb_folder, "store_evidence_definition")
    store = ClickHouseStore(session)
    spans = spans_of(small_jobs())
    store.write([WriteJob(spans=spans)])
    before = derived_rows(session)["request_evidence"]
    n = len({s.trace_id for s in spans})
    assert select(session, "SELECT count() FROM request_evidence_versions").column(0)[0].as_py() == n
    ClickHouseStore(session)  # the same definition: nothing computed again
    assert select(session, "SELECT count() FROM request_evidence_versions").column(0)[0].as_py() == n
    # as after an upgrade that changed it, which changes the schema's definition too
    session.command("INSERT INTO derived_state VALUES ('request_evidence', 'older', now64(6)), "
                    "('schema', 'older', now64(6))")
    session.command("ALTER TABLE request_evidence_versions UPDATE n_chunks = -1 WHERE 1 "
                    "SETTINGS mutations_sync = 1")
    ClickHouseStore(session)
    assert select(session, "SELECT count() FROM request_evidence_versions").column(0)[0].as_py() == n
    assert derived_rows(session)["request_evidence"] == before


def test_a_machine_grade_that_changes_nothing_is_left_out(chdb_folder: Path) -> None:
    session = connection_in(chdb_folder, "store_machine_grades")
    store = ClickHouseStore(session)
    spans = spans_of(small_jobs())
    trace = spans[0].trace_id
    judge = Outcome(trace_id=trace, correct=False, score=0.25, grader="judge")
    store.write([WriteJob(spans=[s for s in spans if s.trace_id == trace], outcomes=[judge])])
    again = store.write([WriteJob(outcomes=[judge])])
    assert (again.outcomes, again.unchanged) == (0, 1)
    changed = store.write([WriteJob(outcomes=[Outcome(trace_id=trace, correct=True,
                                                      grader="judge")])])
    assert (changed.outcomes, changed.unchanged) == (1, 0)
    rows = select(session, "SELECT correct_judge, n_outcomes FROM request_outcomes").to_pylist()
    assert rows == [{"correct_judge": True, "n_outcomes": 2}]


def test_recover_derives_what_a_stopped_writer_left(chdb_folder: Path, one_writer: Any) -> None:
    """A writer that stopped after inserting spans (half of every trace's) and before deriving
    them: any other writer recovers them from the spans in ClickHouse."""
    session = connection_in(chdb_folder, "store_recover")
    spans = sorted(spans_of(small_jobs()), key=lambda s: (s.trace_id, s.span_id))
    store = ClickHouseStore(session)
    store.write([WriteJob(spans=spans[::2], outcomes=graded(spans))])
    assert store.recover().traces == 0
    stopped = ClickHouseStore(session)
    stopped._insert_spans({(s.trace_id, s.span_id): s for s in spans[1::2]}, datetime.now(UTC))
    assert derived_rows(session) != derived_rows(one_writer)
    stats = ClickHouseStore(session).recover()
    assert stats.traces == len({s.trace_id for s in spans})
    assert derived_rows(session) == derived_rows(one_writer)
    assert store.recover().traces == 0


def test_rows_of_an_unpublished_derivation_neither_show_nor_replace_the_current_ones(
        chdb_folder: Path) -> None:
    """A writer that stopped after inserting the rows of a newer derivation, before its
    derivations row: the rows are not read, and a merge keeps the current ones."""
    session = connection_in(chdb_folder, "store_unpublished")
    store = ClickHouseStore(session)
    spans = spans_of(small_jobs())
    trace = spans[0].trace_id
    store.write([WriteJob(spans=[s for s in spans if s.trace_id == trace])])
    before = derived_rows(session)
    newer = derivation_version(10 ** 6, 0)
    for table in ("requests_versions", "chunks_versions", "placements_versions",
                  "answer_sources_versions"):
        rows = select(session, f"SELECT * FROM {table}")
        assert rows.num_rows, table
        store.conn.insert(table, _with_version(rows, newer))
        session.command(f"OPTIMIZE TABLE {table} FINAL")
    assert derived_rows(session) == before
