"""The bundled sample traces in both engines: a DuckDB file ingested through the CLI, and a
ClickHouse database holding the same rows.

The one place that puts the samples into ClickHouse: the base tables the views read are copied
from the DuckDB file through Parquet, and ClickHouse derives its request_evidence itself with
its own rendering of request_evidence_live, so every number read from it is computed there.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage import clickhouse

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
# The tables the views and the reads read, copied from DuckDB into ClickHouse; request_evidence
# is computed from them on each engine by its own rendering of request_evidence_live.
TABLES = ("settings", "prices", "requests", "chunks", "placements", "outcomes", "answer_sources",
          "spans", "texts", "chunk_texts")
REL = 1e-9


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("*.jsonl.gz")) + [SAMPLES / "langchain_rag.jsonl",
                                                 SAMPLES / "support_outcomes.json"]


def ingest_samples(db: Path) -> None:
    """The sample traces and their outcomes ingested into the DuckDB file ``db`` by the CLI."""
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db),
                          *map(str, sample_files())], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def load_samples(db: Path, url: ClickHouseURL, work: Path) -> clickhouse.Connection:
    """The rows of the DuckDB file ``db`` in the ClickHouse database ``url`` (created with
    midtrace's tables and views), through Parquet files in the folder ``work``, and
    request_evidence computed from them by ClickHouse (:func:`copy_tables`)."""
    conn = copy_tables(db, url, work)
    clickhouse.fill_request_evidence(conn)
    return conn


def copy_tables(db: Path, url: ClickHouseURL, work: Path) -> clickhouse.Connection:
    """The base tables of the DuckDB file ``db`` copied into the ClickHouse database ``url``
    (created with midtrace's tables and views) through Parquet files in the folder ``work``;
    request_evidence is left empty.

    On ClickHouse the derived rows are stored versioned (migrations/001_core.sql) and read
    through views of the same names: each is copied in as the one version 1 of its request,
    with the request's time beside it where the table is partitioned by it, and a row number
    where the view needs one; each request gets its ``derivations`` row last."""
    conn = clickhouse.connect(url)
    clickhouse.create_schema(conn)
    duck = duckdb.connect(str(db), read_only=True)
    try:
        for table in TABLES:
            target = VERSIONED.get(table, table)
            parquet = work / f"{table}.parquet"
            names = [name for (name,) in duck.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "ORDER BY ordinal_position", [table]).fetchall()]
            target_columns = clickhouse_columns(conn, target)
            # a list's <list>_set flag (ClickHouse's outcomes): whether DuckDB's list is not NULL
            extra = {f: f"{f.removesuffix('_set')} IS NOT NULL" for f in target_columns
                     if f.endswith("_set") and f.removesuffix("_set") in names}
            if table in VERSIONED:
                extra |= {c: sql for c, sql in _VERSION_COLUMNS.items()
                          if c in target_columns and c not in names}
            selected = ", ".join([*names, *(f"{sql} AS {c}" for c, sql in extra.items())])
            # written by pyarrow, not DuckDB's COPY: a connection to the same file elsewhere in
            # this process (midtrace's read client) may have turned DuckDB's file access off
            pq.write_table(duck.sql(f"SELECT {selected} FROM {table} t").to_arrow_table(), parquet)
            columns = ", ".join([*names, *extra])
            conn.command(f"TRUNCATE TABLE {target}")  # settings holds its defaults
            conn.command(f"INSERT INTO {target} ({columns}) "
                         f"SELECT {columns} FROM file('{parquet}', Parquet)")
    finally:
        duck.close()
    conn.command("INSERT INTO derivations SELECT request_id, trace_id, time, 1, true "
                 "FROM requests_versions")
    return conn


VERSIONED = {"requests": "requests_versions", "chunks": "chunks_versions",
             "placements": "placements_versions", "answer_sources": "answer_sources_versions",
             "outcomes": "outcomes_versions"}
# The views over the versioned tables (queries/create_current_views.sql).
STORAGE_VIEWS = [*VERSIONED, "current_derivations", "request_evidence"]
_VERSION_COLUMNS = {
    "version": "1::UBIGINT",
    "time": "(SELECT r.time FROM requests r WHERE r.request_id = t.request_id)",
    "seq": "(row_number() OVER (PARTITION BY request_id) - 1)::INTEGER"}


def clickhouse_columns(conn: clickhouse.Connection, table: str) -> list[str]:
    return conn.query("SELECT name FROM system.columns WHERE database = currentDatabase() "
                      "AND table = {table:String} ORDER BY position",
                      {"table": table}).column(0).to_pylist()


# Rows compared across the engines: sorted by all their columns, floats to a relative 1e-9,
# lists as lists, NULL equal to NULL, and a NULL list (DuckDB) equal to an empty one (ClickHouse).

def same_grouping(expected: pa.Table, got: pa.Table, column: str) -> tuple[pa.Table, pa.Table]:
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


def rows_of(table: pa.Table, ordered: bool = False) -> list[tuple[Any, ...]]:
    """The rows of ``table`` as both engines can agree on them, sorted unless ``ordered`` (a
    query whose ORDER BY both engines follow)."""
    rows = [tuple(_value(v) for v in row.values()) for row in table.to_pylist()]
    return rows if ordered else sorted(rows, key=_key)


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
        assert same(e, g), f"{view}, row {i}:\n DuckDB     {e}\n ClickHouse {g}"


def same(e: Any, g: Any) -> bool:
    """Whether DuckDB's value ``e`` and ClickHouse's ``g`` are the same (dicts key by key)."""
    if isinstance(e, dict) and isinstance(g, dict):
        return e.keys() == g.keys() and all(same(e[k], g[k]) for k in e)
    if e is None and g == [] or e == [] and g is None:
        return True
    if isinstance(e, tuple | list) and isinstance(g, tuple | list):
        return len(e) == len(g) and all(same(a, b) for a, b in zip(e, g))
    if isinstance(e, float) or isinstance(g, float):
        if e is None or g is None:
            return False
        if math.isnan(e) and math.isnan(g):  # a missing value in a data frame
            return True
        return math.isclose(float(e), float(g), rel_tol=REL, abs_tol=1e-12)
    return bool(e == g)
