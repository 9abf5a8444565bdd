"""citation_positions reads the cited chunks' positions kept in request_evidence; it gives the
rows of its former definition, which scanned every chunk (tests/sql/), under every filter and
group key, after the settings change, and after each path that fills request_evidence: the
writer (spans, then a posted outcome), `midtrace rebuild`, and the rebuild on open; and on the
bundled sample traces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from midtrace.collector.query import reads
from midtrace.collector.storage.rebuild import rebuild
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.schemas.model import Chunk, Outcome, RagRecord
from midtrace.sql import sqlfiles
from tests.metrics_fixtures import ns, prompt, record
from tests.sample_db import samples_duckdb
from tests.test_sql_render import sdk_jobs

FORMER = (Path(__file__).parent / "sql" / "citation_positions_from_chunks.sql").read_text()
GOLD = "direct_answer"
FILTERS = [reads.Filters(), reads.Filters(traffic="all"), reads.Filters(traffic="experiment"),
           reads.Filters(model="m2"), reads.Filters(since=reads.parse_time("2026-09-14"))]
GROUPINGS = [(), ("week",), ("model",), ("week", "strategy"), reads.GROUP_KEYS]


def g(**kw: Any) -> Chunk:
    return Chunk("g", label=GOLD, **kw)


def cases() -> list[tuple[RagRecord, str, int]]:
    """Requests with a known grid cell each (bands under the default 1/3 and 2/3); without
    offsets a placement sits at (slot - 0.5) / k."""
    x, y = Chunk("x"), Chunk("y")
    week1, week2 = ns("2026-09-08"), ns("2026-09-15")
    return [
        # decisive early (0.25), cited itself: early/early
        (record([g(cited=True), x], prompt("g", "x"), model="m1"), "s", week1),
        # cited through cited_ids only: x at 1/6 early, g at 1/2 middle: middle/early
        (record([x, g(), y], prompt("x", "g", "y"), model="m1", cited_ids=("x",)), "s", week1),
        # the cited chunk placed twice, 1/6 and 5/6: middle/early and middle/late
        (record([Chunk("x", cited=True), g()], prompt("x", "g", "x"), model="m2",
                strategy="edge"), "s", week1),
        # two cited chunks in one band count once: middle (5/12) / early (1/12, 3/12)
        (record([Chunk("a", cited=True), Chunk("b", cited=True), g(), Chunk("h"), Chunk("i"),
                 Chunk("j")], prompt("a", "b", "g", "h", "i", "j"), model="m2"), "s", week2),
        # the cited chunk never reached the prompt: early/none
        (record([g(), Chunk("d", stage="dropped", drop_reason="budget", cited=True), x],
                prompt("g", "x"), model="m1"), "s", week2),
        # nothing cited: early/none
        (record([g(), x], prompt("g", "x"), model="m2"), "s", week2),
        # cited_ids naming no chunk of the request: early/none
        (record([g(), x], prompt("g", "x"), model="m2", cited_ids=("ghost",)), "s", week2),
        # the decisive chunk not in the prompt: left out
        (record([g(stage="dropped", drop_reason="budget"), Chunk("x", cited=True)],
                prompt("x"), model="m1"), "s", week2),
        # on the thresholds: g's midpoint 100 of 300 is middle, x's 200 of 300 late
        (record([g(), Chunk("x", cited=True)], prompt("g", "x", spans=[(80, 120), (180, 220)]),
                prompt_tokens=300, model="m1", strategy="edge"), "s", week2),
        # offsets without a prompt token count: out of max(token_end) = 400, g at 50 early,
        # x at 250 middle
        (record([g(), Chunk("x", cited=True)], prompt("g", "x", spans=[(0, 100), (100, 400)]),
                model="m2"), "s", week1),
        # experiment traffic: counted only when asked for
        (record([g(cited=True), x], prompt("g", "x"), model="m1", experiment_id="e",
                condition="start", case_id="c"), "s", week1),
        # the posted outcome below names x decisive: early/late until then, late/late after
        (record([g(), x], prompt("g", "x"), model="m2", cited_ids=("x",),
                question="graded later"), "s", week2),
    ]


BEFORE_OUTCOME = {("early", "early"): 1, ("early", "middle"): 1, ("early", "none"): 3,
                  ("early", "late"): 1, ("middle", "early"): 3, ("middle", "late"): 2}
AFTER_OUTCOME = {**{k: v for k, v in BEFORE_OUTCOME.items() if k != ("early", "late")},
                 ("late", "late"): 1}


def grid(conn: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], int]:
    table = reads.run_view(conn, "citation_positions").to_pylist()
    return {(r["decisive_band"], r["cited_band"]): r["requests"] for r in table}


def former(conn: duckdb.DuckDBPyConnection, filters: reads.Filters,
           group_by: tuple[str, ...]) -> list[tuple[Any, ...]]:
    view = reads.metric_views()["citation_positions"]
    keys = [k for k in group_by if k not in view.keys]
    conditions, params = reads._conditions(filters, view.traffic)
    sql = sqlfiles.render_string(FORMER, **sqlfiles.metric_inputs(conditions, keys))
    return conn.execute(sql, params).fetchall()


def assert_same_as_former(conn: duckdb.DuckDBPyConnection) -> int:
    """Every filter and grouping gives the former definition's rows, in its order."""
    compared = 0
    for filters in FILTERS:
        for group_by in GROUPINGS:
            sql, params = reads.view_query("citation_positions", filters, group_by)
            now = conn.execute(sql, params).fetchall()
            assert now == former(conn, filters, group_by), (filters, group_by)
            compared += len(now)
    stored = conn.execute("SELECT * FROM citation_positions").fetchall()
    assert stored == former(conn, reads.Filters(), ())
    table_equals_definition(conn)
    return compared


def table_equals_definition(conn: duckdb.DuckDBPyConnection) -> None:
    for a, b in (("request_evidence", "request_evidence_live"),
                 ("request_evidence_live", "request_evidence")):
        ((n,),) = conn.execute(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT "
                               f"SELECT * FROM {b})").fetchall()
        assert n == 0, f"{a} has rows {b} lacks"


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "traces.duckdb")
    s.write(sdk_jobs(cases()))
    yield s
    s.close()


def test_the_view_reads_the_grid_the_chunk_scan_gave(store: Store) -> None:
    conn = store.conn
    assert grid(conn) == BEFORE_OUTCOME
    assert assert_same_as_former(conn) > 50

    ((trace_id,),) = conn.execute(
        "SELECT trace_id FROM requests WHERE question = 'graded later'").fetchall()
    store.write([WriteJob(outcomes=[Outcome(trace_id=trace_id, correct=False,
                                            decisive_chunk_ids=("x",))])])
    assert grid(conn) == AFTER_OUTCOME
    assert_same_as_former(conn)


def test_bands_follow_the_settings_as_the_chunk_scan_did(store: Store, tmp_path: Path) -> None:
    store.close()
    conn = duckdb.connect(str(tmp_path / "traces.duckdb"))
    conn.execute("UPDATE settings SET value = 0.2 WHERE key = 'band_early_end'")
    conn.execute("UPDATE settings SET value = 0.5 WHERE key = 'band_late_start'")
    # under [0, 0.2) early, [0.2, 0.5) middle: 0.25 is middle now, 1/6 still early, 1/2 late
    changed = grid(conn)
    assert changed != BEFORE_OUTCOME and changed[("middle", "none")] == 3
    assert assert_same_as_former(conn) > 50
    conn.close()
    store.reopen()  # for the fixture to close


def test_every_path_that_fills_request_evidence_keeps_the_positions(store: Store,
                                                                      tmp_path: Path) -> None:
    rebuild(store, batch_traces=5)  # midtrace rebuild: derived again from the kept spans
    assert grid(store.conn) == BEFORE_OUTCOME
    assert_same_as_former(store.conn)

    store.conn.execute("DELETE FROM derived_state")  # as after an upgrade: rebuilt on open
    store.close()
    again = Store.open(tmp_path / "traces.duckdb")
    assert again.conn.execute("SELECT count(*) FROM derived_state").fetchall() == [(1,)]
    assert grid(again.conn) == BEFORE_OUTCOME
    assert_same_as_former(again.conn)
    again.close()
    store.reopen()  # for the fixture to close


def test_the_sample_traces_give_the_rows_of_the_chunk_scan(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    db = samples_duckdb(tmp_path_factory, tmp_path / "samples.duckdb")
    conn = duckdb.connect(str(db), read_only=True)
    try:
        ((cited,),) = conn.execute("SELECT count(*) FROM request_evidence "
                                   "WHERE cited_positions IS NOT NULL").fetchall()
        assert cited > 100
        assert assert_same_as_former(conn) > 100
    finally:
        conn.close()
