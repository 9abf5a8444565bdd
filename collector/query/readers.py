"""What the read engine (reads.py) runs its SQL on: a DuckDB connection or cursor, or a
ClickHouse store (collector/storage/clickhouse.py), behind one small interface.

A reader knows its ``engine``, the name the SQL files are rendered for, and runs a rendered
statement with its parameters bound (``$name`` on DuckDB, ``{name:Type}`` on ClickHouse, the
values Python's in both): :meth:`arrow` gives the rows as an Arrow table, :meth:`rows` as
tuples, :meth:`dicts` as dicts by column name. The read functions choose nothing else per
engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from midtrace.sql import sqlfiles

if TYPE_CHECKING:  # pyarrow is loaded by a read, not by importing the read engine (the sweep)
    import pyarrow as pa

Params = Mapping[str, Any] | None


class Reader(Protocol):
    engine: str

    def arrow(self, sql: str, params: Params = None) -> pa.Table: ...

    def rows(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]: ...

    def dicts(self, sql: str, params: Params = None) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class DuckDBReader:
    """Reads on a DuckDB connection or cursor, as DuckDB's Python API returns them."""

    engine = "duckdb"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def arrow(self, sql: str, params: Params = None) -> pa.Table:
        return self.conn.sql(sql, params=params).to_arrow_table()

    def _execute(self, sql: str, params: Params) -> Any:
        return self.conn.execute(sql, params) if params is not None else self.conn.execute(sql)

    def rows(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        return list(self._execute(sql, params).fetchall())

    def dicts(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        cursor = self._execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def close(self) -> None:
        self.conn.close()


class ClickHouseReader:
    """Reads on a ClickHouse store (a collector.storage.clickhouse.Connection).

    Two differences of the results, not of the SQL, are undone here, so a read gives what it
    gives on DuckDB:

    - a column selected as ``alias.name`` is called ``name``, as DuckDB calls it (ClickHouse
      keeps the qualified name when more than two joined relations have a column ``name``);
    - an unsigned integer (ClickHouse's ``count()`` is a UInt64) is signed, as DuckDB's are,
      so that the difference of two counts can be negative in a data frame;
    - a ClickHouse array is never NULL: where a table keeps a ``<list>_set`` flag beside a
      list (docs/architecture.md, "Two engines"), :meth:`dicts` gives the list as DuckDB
      does, NULL when the flag says it was not set, and leaves the flag out."""

    engine = "clickhouse"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def arrow(self, sql: str, params: Params = None) -> pa.Table:
        table: pa.Table = self.conn.query(sql, params)
        names = table.column_names
        bare = [n.rsplit(".", 1)[-1] if "." in n and n.rsplit(".", 1)[-1] not in names else n
                for n in names]
        if bare != names:
            table = table.rename_columns(bare)
        import pyarrow as pa

        signed = pa.schema([field.with_type(_signed().get(field.type, field.type))
                            for field in table.schema])
        return table.cast(signed) if signed != table.schema else table

    def rows(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        return _tuples(self.arrow(sql, params))

    def dicts(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        table = self.arrow(sql, params)
        names = table.column_names
        flags = [n for n in names if n.endswith("_set") and n.removesuffix("_set") in names]
        out = []
        for row in _tuples(table):
            record = dict(zip(names, row))
            for flag in flags:
                if not record.pop(flag):
                    record[flag.removesuffix("_set")] = None
            out.append(record)
        return out

    def close(self) -> None:
        """The store's connection outlives a read: it is shared (clickhouse.connect)."""


@cache
def _signed() -> dict[Any, Any]:
    """Each unsigned integer type with the signed one that holds all of its values."""
    import pyarrow as pa

    return {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
            pa.uint64(): pa.int64()}


def _tuples(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(column.to_pylist() for column in table.columns)))


def reader(conn: Any) -> Reader:
    """The reader of ``conn``: a reader itself, a ClickHouse store's connection, or a DuckDB
    connection or cursor (used as it is: :func:`read_cursor` makes one that reads in UTC)."""
    if isinstance(conn, DuckDBReader | ClickHouseReader):
        return conn
    from midtrace.collector.storage.clickhouse import Connection

    if isinstance(conn, Connection):
        return ClickHouseReader(conn)
    return DuckDBReader(conn)


def read_cursor(conn: Any) -> Reader:
    """A reader on its own cursor of the DuckDB connection ``conn``, showing times in UTC
    whatever the machine's zone; on a ClickHouse store, whose time columns are UTC, its
    reader."""
    if not isinstance(reader(conn), DuckDBReader):
        return reader(conn)
    cursor = conn.cursor()
    cursor.execute(sqlfiles.query("utc_session"))
    return DuckDBReader(cursor)
