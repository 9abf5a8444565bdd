"""One definition per metric: every view gives the same rows on DuckDB and on ClickHouse.

The bundled sample traces are ingested into a DuckDB file through the CLI; the base tables
the views read are copied into chdb (the in-process ClickHouse engine) through Parquet, and
ClickHouse derives its request_evidence itself; then each view, rendered from its one file
for each engine (docs/architecture.md, "Two engines"), runs on both and every row is
compared: rows sorted by all their columns, floats to a relative 1e-9, lists as lists, NULL
equal to NULL. ClickHouse has no NULL array, so a NULL list of DuckDB's compares equal to an
empty one, and nothing else does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from midtrace.collector.query import reads
from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage import clickhouse
from midtrace.sql import sqlfiles
from tests.clickhouse_samples import (
    STORAGE_VIEWS, TABLES, assert_same_rows, rows_of, same_grouping)

# Views besides the metric views whose rows are compared: the per-request ones the metric
# views are built on, the settings row and the attribute-limit warnings.
BASE_VIEWS = ["metric_settings", "request_outcomes", "placement_positions",
              "request_evidence_live", "request_facts_all", "request_facts", "request_costs",
              "attribute_limits"]
# Columns only ClickHouse's rendering has: whether the merged outcome sets its required
# constraints (a ClickHouse array cannot be NULL).
CLICKHOUSE_ONLY = {"request_outcomes": ["required_constraints_set"]}
METRIC_VIEWS = sorted(reads.metric_views())
# Filters and group keys as the query API passes them (collector/query/reads.py), each value a
# bound parameter: every filter condition and group key is exercised by at least one.
VARIANTS = {
    "all traffic by every key": (reads.Filters(traffic="all"), reads.GROUP_KEYS),
    "by week": (reads.Filters(), ("week",)),
    "time, service, model and bucket by template and strategy": (
        reads.Filters(since=reads.parse_time("2026-11-02"), until=reads.parse_time("2026-11-16"),
                      service="support-assistant", model="gpt-4.1-mini",
                      context_bucket="<4k"), ("template", "strategy")),
    "experiment, strategy and template, person's grades by model": (
        reads.Filters(experiment="sweep-2026-11", strategy="edge", template="sweep-v1",
                      grader="person"), ("model",)),
    "no experiment, judge's grades by service and bucket": (
        reads.Filters(experiment=reads.NO_EXPERIMENT, grader="judge"),
        ("service", "context_bucket")),
}


@pytest.fixture(scope="session")
def engines(sample_stores: tuple[Path, ClickHouseURL]
            ) -> Iterator[tuple[Any, clickhouse.Connection]]:
    """The sample traces in a DuckDB file and in a chdb database of the process's one chdb
    folder (tests/clickhouse_samples.py)."""
    db, url = sample_stores
    duck = duckdb.connect(str(db), read_only=True)
    yield duck, clickhouse.connect(url)
    duck.close()


def test_nothing_of_duckdb_is_left_in_the_clickhouse_rendering() -> None:
    """No DuckDB parameter ($name) and no template syntax in any migration, view (in every
    scope) or filtered metric query rendered for ClickHouse."""
    every = reads.Filters(since=reads.parse_time("2026-01-01"),
                          until=reads.parse_time("2027-01-01"), service="s", model="m",
                          template="t", strategy="edge", experiment="e", context_bucket="<4k",
                          grader="judge")
    rendered = [sqlfiles.render(m.path, engine=clickhouse.ENGINE) for m in sqlfiles.migrations()]
    rendered += [clickhouse.render_view(v, scope=scope) for v in sqlfiles.views()
                 for scope in sqlfiles.SCOPES]
    rendered += [reads.view_query(name, every, reads.GROUP_KEYS, engine=clickhouse.ENGINE)[0]
                 for name in METRIC_VIEWS]
    for sql in rendered:
        code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
        assert not re.search(r"\$\w|\{\{|\{%|\bEXCLUDE\b|\bunnest\(|\blist_", code), sql


def test_the_base_tables_arrive_whole(engines: tuple[Any, Any]) -> None:
    duck, session = engines
    for table in (*TABLES, "request_evidence"):
        expected = duck.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
        got = session.query(f"SELECT count() FROM {table}").column(0)[0].as_py()
        assert (table, got) == (table, expected)
    assert duck.execute("SELECT count(*) FROM request_evidence").fetchall()[0][0] > 1000


def test_every_view_is_compared(engines: tuple[Any, Any]) -> None:
    duck, session = engines
    query = ("SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW' "
             "AND table_schema = 'main'")
    assert sorted(n for (n,) in duck.execute(query).fetchall()) == sorted(BASE_VIEWS + METRIC_VIEWS)
    on_clickhouse = session.query("SELECT name FROM system.tables WHERE engine = 'View' "
                                  "AND database = currentDatabase()")
    assert sorted(on_clickhouse.column(0).to_pylist()) == sorted(
        BASE_VIEWS + METRIC_VIEWS + STORAGE_VIEWS)


@pytest.mark.parametrize("view", BASE_VIEWS + METRIC_VIEWS)
def test_the_view_gives_the_same_rows_on_both_engines(engines: tuple[Any, Any],
                                                      view: str) -> None:
    duck, session = engines
    expected = duck.sql(f"SELECT * FROM {view}").to_arrow_table()
    got = session.query(f"SELECT * FROM {view}")
    assert got.column_names == expected.column_names + CLICKHOUSE_ONLY.get(view, [])
    got = got.select(expected.column_names)
    assert got.num_rows == expected.num_rows, view
    assert expected.num_rows > 0 or view == "attribute_limits", f"{view} is empty on the samples"
    if "answer_key" in expected.column_names:
        # each engine hashes the normalised answer its own way: the keys must group the
        # requests alike, one DuckDB key to one ClickHouse key
        expected, got = same_grouping(expected, got, "answer_key")
    assert_same_rows(view, rows_of(expected), rows_of(got))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("view", METRIC_VIEWS)
def test_the_view_filtered_and_grouped_gives_the_same_rows_on_both_engines(
        engines: tuple[Any, Any], view: str, variant: str) -> None:
    duck, session = engines
    filters, group_by = VARIANTS[variant]
    sql, params = reads.view_query(view, filters, group_by)
    expected = duck.sql(sql, params=params).to_arrow_table()
    sql, params = reads.view_query(view, filters, group_by, engine=clickhouse.ENGINE)
    got = session.query(sql, params)
    assert got.column_names == expected.column_names
    assert got.num_rows == expected.num_rows, (view, variant)
    assert_same_rows(f"{view} ({variant})", rows_of(expected), rows_of(got))


@pytest.mark.parametrize("scope", ["request_range", "traces"])
def test_request_evidence_of_some_requests_is_the_same_on_both_engines(
        engines: tuple[Any, Any], scope: str) -> None:
    """The rows the store recomputes after a write or in a rebuild (parts/scope.sql)."""
    duck, session = engines
    some = duck.execute("SELECT request_id, trace_id FROM requests ORDER BY request_id "
                        "LIMIT 300 OFFSET 1000").fetchall()
    if scope == "request_range":
        params: dict[str, Any] = {"lo": some[0][0], "hi": some[-1][0]}
    else:
        params = {"request_ids": [r for r, _ in some[::3]], "trace_ids": [t for _, t in some[::3]]}
    view = sqlfiles.view_file("request_evidence_live")
    expected = duck.sql(sqlfiles.view_body(sqlfiles.render_view(view, scope=scope)),
                        params=params).to_arrow_table()
    if scope == "traces":  # ClickHouse reads the rows of a refresh from copies made for it
        params["scope"] = "5c0fe000-0000-4000-8000-000000000137"
        clickhouse.run(session, clickhouse.copy_evidence_scope(), params)
    got = session.query(sqlfiles.view_body(clickhouse.render_view(view, scope=scope)), params)
    assert got.column_names == expected.column_names
    assert expected.num_rows == got.num_rows == (300 if scope == "request_range" else 100)
    assert expected.column("correct").null_count < expected.num_rows
    expected, got = same_grouping(expected, got, "answer_key")
    assert_same_rows(f"request_evidence_live ({scope})", rows_of(expected), rows_of(got))


def test_the_variants_return_rows(engines: tuple[Any, Any]) -> None:
    duck, _ = engines
    for variant, (filters, group_by) in VARIANTS.items():
        sql, params = reads.view_query("overview", filters, group_by)
        assert duck.sql(sql, params=params).fetchall(), variant


def test_request_evidence_filled_in_ranges_is_the_same_as_filled_at_once(
        engines: tuple[Any, Any]) -> None:
    """A large store computes request_evidence in request id ranges (all at once needs more
    memory than a machine has at a million requests): the rows are the same."""
    duck, conn = engines
    before = rows_of(conn.query("SELECT * FROM request_evidence"))
    clickhouse.run(conn, sqlfiles.query("clear_request_evidence", engine=clickhouse.ENGINE))
    assert conn.query("SELECT count() AS n FROM request_evidence").to_pylist() == [{"n": 0}]
    clickhouse.fill_request_evidence(conn, batch=700)
    after = rows_of(conn.query("SELECT * FROM request_evidence"))
    assert len(after) == duck.execute("SELECT count(*) FROM request_evidence").fetchall()[0][0]
    assert after == before
