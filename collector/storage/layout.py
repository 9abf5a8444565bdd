"""Whether a DuckDB file holds a midtrace store this midtrace can use, checked on opening.

A store records the numbered migrations it has had (``schema_migrations``), and its tables
must be exactly what those migrations make. A writable open then applies the missing ones; a
read-only open cannot, so it wants every migration already applied. Anything else is refused
with one line that says what is wrong and what to do: a DuckDB file with tables but no record
of migrations (another program's file, or a midtrace store from before they were recorded),
one from a newer midtrace, one whose tables were changed by hand.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb

from midtrace.collector.storage.database import RESTORE, StoreError
from midtrace.sql import sqlfiles

Shape = dict[str, dict[str, str]]  # table -> column -> type


def check_layout(conn: duckdb.DuckDBPyConnection, path: str | Path, writable: bool) -> None:
    """Raise StoreError unless ``conn`` (the file ``path``) holds a store midtrace can use:
    writable, one it can bring up to date; read-only, one already up to date."""
    shape = _shape(conn)
    if "schema_migrations" not in shape:
        if not shape and writable:
            return  # a new store
        if not shape:
            raise StoreError(f"{path} is an empty DuckDB file, not a midtrace store yet; open "
                             "it once for writing (midtrace ingest or collector) to make it one")
        raise StoreError(
            f"{path} is a DuckDB file but not a midtrace store: it has tables "
            f"({', '.join(sorted(shape)[:3])}{', ...' if len(shape) > 3 else ''}) and no "
            "schema_migrations table (another program's file, or a midtrace store from before "
            "layouts were recorded); name another file, or a new path for a new store")
    done = frozenset(v for (v,) in conn.execute(sqlfiles.query("applied_migrations")).fetchall())
    newest = max(m.version for m in sqlfiles.migrations())
    if done and max(done) > newest:
        raise StoreError(f"{path} was written by a newer midtrace (layout {max(done)}; this one "
                         f"knows layouts up to {newest}); upgrade midtrace to open it")
    difference = _difference(shape, expected_shape(done))
    if difference:
        raise StoreError(f"{path} does not have the tables its recorded layout "
                         f"{max(done, default=0)} makes ({difference}); it was changed by hand "
                         f"or written by an unreleased midtrace: {RESTORE}")
    if not writable and max(done, default=0) < newest:
        raise StoreError(f"{path} has an older layout ({max(done, default=0)}; this midtrace "
                         f"writes {newest}) and is opened read-only; bring it up to date once "
                         f"with: midtrace rebuild --store {path}")


def older_evidence(path: str | Path) -> StoreError:
    """A read-only open found request_evidence derived by other SQL than this midtrace's."""
    return StoreError(f"{path} was written by another midtrace version (its request_evidence is "
                      "derived by other SQL) and is opened read-only; bring it up to date once "
                      f"with: midtrace rebuild --store {path}")


def _shape(conn: duckdb.DuckDBPyConnection) -> Shape:
    shape: Shape = {}
    for table, column, kind in conn.execute(sqlfiles.query("table_columns")).fetchall():
        shape.setdefault(table, {})[column] = kind
    return shape


@cache
def expected_shape(versions: frozenset[int]) -> Shape:
    """The tables the migrations numbered ``versions`` make, applied in order to an empty
    database."""
    with duckdb.connect() as conn:
        conn.execute(sqlfiles.query("create_schema_migrations"))
        for m in sqlfiles.migrations():
            if m.version in versions:
                conn.execute(sqlfiles.render(m.path))
        return _shape(conn)


def _difference(actual: Shape, expected: Shape) -> str | None:
    """The first way ``actual`` differs from ``expected`` in the tables ``expected`` has."""
    for table, columns in sorted(expected.items()):
        found = actual.get(table)
        if found is None:
            return f"no table {table}"
        for column, kind in columns.items():
            if column not in found:
                return f"{table} has no column {column}"
            if found[column] != kind:
                return f"{table}.{column} is {found[column]}, not {kind}"
        extra = sorted(set(found) - set(columns))
        if extra:
            return f"{table} has a column {extra[0]} no migration made"
    return None
