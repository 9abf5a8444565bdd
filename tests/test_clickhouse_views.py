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

import datetime as dt
import decimal
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from midtrace.collector.query import reads
from midtrace.collector.storage import clickhouse
from midtrace.sql import sqlfiles
from tests.chdb_databases import session_in

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
# The tables the views read, copied from DuckDB into ClickHouse; request_evidence is
# computed from them on each engine by its own rendering of request_evidence_live.
TABLES = ("settings", "prices", "requests", "chunks", "placements", "outcomes", "answer_sources",
          "spans")
# On ClickHouse the derived rows are stored versioned (migrations/001_core.sql) and read
# through views of the same names: each is copied in as the one version 1 of its request, with
# the request's time beside it where the table is partitioned by it, and a row number where
# the view needs one.
VERSIONED = {"requests": "requests_versions", "chunks": "chunks_versions",
             "placements": "placements_versions", "answer_sources": "answer_sources_versions",
             "outcomes": "outcomes_versions"}
STORAGE_VIEWS = [*VERSIONED, "current_derivations", "request_evidence"]
# Views besides the metric views whose rows are compared: the per-request ones the metric
# views are built on, the settings row and the attribute-limit warnings.
BASE_VIEWS = ["metric_settings", "request_outcomes", "placement_positions",
              "request_evidence_live", "request_facts_all", "request_facts", "request_costs",
              "attribute_limits"]
# Columns only ClickHouse's rendering has: whether the merged outcome sets its required
# constraints (a ClickHouse array cannot be NULL).
CLICKHOUSE_ONLY = {"request_outcomes": ["required_constraints_set"]}
METRIC_VIEWS = sorted(reads.metric_views())
REL = 1e-9
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
def engines(tmp_path_factory: pytest.TempPathFactory,
            chdb_path: Path) -> Iterator[tuple[Any, Any]]:
    """A DuckDB store of the sample traces and a chdb session holding the same base tables
    in a database of its own (one chdb path for the whole test session)."""
    root = tmp_path_factory.mktemp("engines")
    db = root / "samples.duckdb"
    files = sorted(SAMPLES.glob("*.jsonl.gz")) + [SAMPLES / "langchain_rag.jsonl",
                                                  SAMPLES / "support_outcomes.json"]
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db),
                          *map(str, files)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    duck = duckdb.connect(str(db), read_only=True)
    session = session_in(chdb_path, "view_parity")
    clickhouse.create_schema(session)
    for table in TABLES:
        target = VERSIONED.get(table, table)
        parquet = root / f"{table}.parquet"
        names = [name for (name,) in duck.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall()]
        target_columns = _clickhouse_columns(session, target)
        # a list's <list>_set flag (ClickHouse's outcomes): whether DuckDB's list is not NULL
        flags = {f: f"{f.removesuffix('_set')} IS NOT NULL" for f in target_columns
                 if f.endswith("_set") and f.removesuffix("_set") in names}
        extra = {"version": "1::UBIGINT",
                 "time": "(SELECT r.time FROM requests r WHERE r.request_id = t.request_id)",
                 "seq": "(row_number() OVER (PARTITION BY request_id) - 1)::INTEGER"}
        flags |= {c: sql for c, sql in extra.items()
                  if c in target_columns and c not in names and table in VERSIONED}
        selected = ", ".join([*names, *(f"{sql} AS {f}" for f, sql in flags.items())])
        duck.execute(f"COPY (SELECT {selected} FROM {table} t) TO '{parquet}' (FORMAT parquet)")
        columns = ", ".join([*names, *flags])
        session.query(f"TRUNCATE TABLE {target}")  # settings holds its defaults
        session.query(f"INSERT INTO {target} ({columns}) "
                      f"SELECT {columns} FROM file('{parquet}', Parquet)")
    session.query("INSERT INTO derivations SELECT request_id, trace_id, time, 1, true "
                  "FROM requests_versions")
    clickhouse.fill_request_evidence(session)
    yield duck, session
    duck.close()
    session.close()


def _clickhouse_columns(session: Any, table: str) -> list[str]:
    return session.query(f"SELECT name FROM system.columns WHERE database = currentDatabase() "
                         f"AND table = '{table}' ORDER BY position",
                         "ArrowTable").column(0).to_pylist()


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
        got = session.query(f"SELECT count() FROM {table}", "ArrowTable").column(0)[0].as_py()
        assert (table, got) == (table, expected)
    assert duck.execute("SELECT count(*) FROM request_evidence").fetchall()[0][0] > 1000


def test_every_view_is_compared(engines: tuple[Any, Any]) -> None:
    duck, session = engines
    query = ("SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW' "
             "AND table_schema = 'main'")
    assert sorted(n for (n,) in duck.execute(query).fetchall()) == sorted(BASE_VIEWS + METRIC_VIEWS)
    on_clickhouse = session.query("SELECT name FROM system.tables WHERE engine = 'View' "
                                  "AND database = currentDatabase()", "ArrowTable")
    assert sorted(on_clickhouse.column(0).to_pylist()) == sorted(
        BASE_VIEWS + METRIC_VIEWS + STORAGE_VIEWS)


@pytest.mark.parametrize("view", BASE_VIEWS + METRIC_VIEWS)
def test_the_view_gives_the_same_rows_on_both_engines(engines: tuple[Any, Any],
                                                      view: str) -> None:
    duck, session = engines
    expected = duck.sql(f"SELECT * FROM {view}").to_arrow_table()
    got = session.query(f"SELECT * FROM {view}", "ArrowTable")
    assert got.column_names == expected.column_names + CLICKHOUSE_ONLY.get(view, [])
    got = got.select(expected.column_names)
    assert got.num_rows == expected.num_rows, view
    assert expected.num_rows > 0 or view == "attribute_limits", f"{view} is empty on the samples"
    if "answer_key" in expected.column_names:
        # each engine hashes the normalised answer its own way: the keys must group the
        # requests alike, one DuckDB key to one ClickHouse key
        expected, got = _same_grouping(expected, got, "answer_key")
    assert_same_rows(view, _rows(expected), _rows(got))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("view", METRIC_VIEWS)
def test_the_view_filtered_and_grouped_gives_the_same_rows_on_both_engines(
        engines: tuple[Any, Any], view: str, variant: str) -> None:
    duck, session = engines
    filters, group_by = VARIANTS[variant]
    sql, params = reads.view_query(view, filters, group_by)
    expected = duck.sql(sql, params=params).to_arrow_table()
    sql, params = reads.view_query(view, filters, group_by, engine=clickhouse.ENGINE)
    got = session.query(sql, "ArrowTable", params=clickhouse.parameters(params))
    assert got.column_names == expected.column_names
    assert got.num_rows == expected.num_rows, (view, variant)
    assert_same_rows(f"{view} ({variant})", _rows(expected), _rows(got))


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
    got = session.query(sqlfiles.view_body(clickhouse.render_view(view, scope=scope)),
                        "ArrowTable", params=clickhouse.parameters(params))
    assert got.column_names == expected.column_names
    assert expected.num_rows == got.num_rows == (300 if scope == "request_range" else 100)
    assert expected.column("correct").null_count < expected.num_rows
    expected, got = _same_grouping(expected, got, "answer_key")
    assert_same_rows(f"request_evidence_live ({scope})", _rows(expected), _rows(got))


def test_the_variants_return_rows(engines: tuple[Any, Any]) -> None:
    duck, _ = engines
    for variant, (filters, group_by) in VARIANTS.items():
        sql, params = reads.view_query("overview", filters, group_by)
        assert duck.sql(sql, params=params).fetchall(), variant


def _same_grouping(expected: pa.Table, got: pa.Table, column: str) -> tuple[pa.Table, pa.Table]:
    pairs = dict(zip(expected.column("request_id").to_pylist(),
                     expected.column(column).to_pylist(), strict=True))
    theirs = dict(zip(got.column("request_id").to_pylist(), got.column(column).to_pylist(),
                      strict=True))
    assert pairs.keys() == theirs.keys()
    mapping = {(pairs[r], theirs[r]) for r in pairs}
    assert len({e for e, _ in mapping}) == len({g for _, g in mapping}) == len(mapping)
    assert all((e is None) == (g is None) for e, g in mapping)
    i = expected.column_names.index(column)
    return expected.remove_column(i), got.remove_column(i)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(_value(v) for v in row.values()) for row in table.to_pylist()),
                  key=_key)


def _value(value: Any) -> Any:
    """A value as both engines can agree on it: a NULL list is an empty one, a struct its
    values, a decimal a float, a time in UTC."""
    if isinstance(value, dict):
        return tuple(_value(v) for v in value.values())
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if isinstance(value, bool):
        return int(value)
    return value


def _key(value: Any) -> Any:
    """A sort key that puts NULL (and an empty list, ClickHouse's NULL list) first and rounds
    floats, so both sides sort alike."""
    if value is None or value == []:
        return (0, "")
    if isinstance(value, tuple | list):
        return (1, tuple(_key(v) for v in value))
    if isinstance(value, float):
        return (1, float(f"{value:.9g}"))
    return (1, value)


def assert_same_rows(view: str, expected: list[tuple[Any, ...]],
                     got: list[tuple[Any, ...]]) -> None:
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert _same(e, g), f"{view}, row {i}:\n DuckDB     {e}\n ClickHouse {g}"


def _same(e: Any, g: Any) -> bool:
    if e is None and g == [] or e == [] and g is None:
        return True
    if isinstance(e, tuple | list) and isinstance(g, tuple | list):
        return len(e) == len(g) and all(_same(a, b) for a, b in zip(e, g))
    if isinstance(e, float) or isinstance(g, float):
        if e is None or g is None:
            return False
        return math.isclose(float(e), float(g), rel_tol=REL, abs_tol=1e-12)
    return bool(e == g)
