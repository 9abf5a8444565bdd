"""How the store runs SQL on its DuckDB connection: transactions, and files of several
statements whose parameters are bound statement by statement."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import duckdb

from midtrace.collector.storage.database import CommittedThenInvalidated, committed_anyway


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block as one transaction: committed if it returns, rolled back if it raises.
    A commit that held though DuckDB's checkpoint after it failed raises
    CommittedThenInvalidated."""
    conn.begin()
    try:
        yield conn
        conn.commit()
    except BaseException as e:
        if committed_anyway(e):  # nothing to roll back: the commit is durable
            raise CommittedThenInvalidated(e) from e
        try:
            conn.rollback()
        except duckdb.Error:
            pass  # a COMMIT that failed (a full disk) has ended the transaction already
        raise


def run_script(conn: duckdb.DuckDBPyConnection, sql: str,
               params: Mapping[str, Any] | None = None) -> None:
    """Run each statement of ``sql`` with the named parameters it uses.

    DuckDB binds parameters only to the last statement of a multi-statement string, and a
    statement refuses a parameter it does not name."""
    params = params or {}
    for statement in duckdb.extract_statements(sql):
        conn.execute(statement, {name: params[name] for name in statement.named_parameters})
