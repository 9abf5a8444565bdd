"""midtrace's tables and views on ClickHouse (docs/architecture.md, "Two engines").

The same SQL files as DuckDB's, rendered with ``engine="clickhouse"``: the migrations' table
DDL, the request_evidence table, and every view. ``session`` is anything with a
``query(sql)`` method that runs one statement and keeps ``SET`` settings between calls: a
``chdb.session.Session`` (the in-process ClickHouse engine) is one, and so is a
:class:`Connection`, which :func:`connect` opens on a store's URL through clickhouse-connect:
an HTTP(S) server, or chdb through clickhouse-connect's chdb backend (the same client API).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections.abc import Mapping
from typing import Any, Protocol

import pyarrow as pa

from midtrace.collector.settings import CLICKHOUSE_PASSWORD_ENV, ClickHouseURL
from midtrace.collector.storage.database import StoreError  # one line: what is wrong, what to do
from midtrace.sql import sqlfiles

ENGINE = "clickhouse"

_END = re.compile(r";[ \t]*$", re.M)


class Session(Protocol):
    def query(self, sql: str, *args: Any, **kwargs: Any) -> Any: ...


class Connection:
    """One ClickHouse store: a clickhouse-connect client with the session settings
    (queries/clickhouse_settings.sql) sent on every query, so that no server-side session is
    needed and any number of threads may share it."""

    def __init__(self, client: Any, url: ClickHouseURL) -> None:
        self.client = client
        self.url = url

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
        """The rows of one statement as an Arrow table; ``params`` bind ``{name:Type}``."""
        return self.client.query_arrow(sql, parameters=dict(params or {}))

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """Run one statement that returns no rows."""
        self.client.command(sql, parameters=dict(params or {}) or None)

    def insert(self, table: str, data: pa.Table) -> None:
        """Append ``data``'s rows to ``table``, its columns by name."""
        if data.num_rows:
            self.client.insert_arrow(table, data)

    def close(self) -> None:
        self.client.close()


_chdb_lock = threading.Lock()
_chdb: dict[tuple[str, str], Connection] = {}


def connect(url: ClickHouseURL) -> Connection:
    """Open the store ``url`` names. The ClickHouse engine chdb runs in this process on one
    folder: every database of that folder can be opened, and no other folder."""
    try:
        import clickhouse_connect
    except ImportError:
        raise StoreError("a ClickHouse store needs clickhouse-connect: pip install "
                         "'midtrace[clickhouse]'") from None
    settings = session_settings()
    if url.scheme == "chdb":
        assert url.path is not None
        key = (str(url.path.resolve()), url.database)
        with _chdb_lock:
            if key not in _chdb:
                try:
                    if url.database != "default":
                        with _open_chdb(clickhouse_connect, key[0], "default", settings) as c:
                            c.command(f"CREATE DATABASE IF NOT EXISTS {url.database}")
                    client = _open_chdb(clickhouse_connect, key[0], url.database, settings)
                except Exception as e:  # chdb missing, or another folder open in this process
                    raise StoreError(f"cannot open {url}: {_first_line(e)}") from None
                _chdb[key] = Connection(client, url)
            return _chdb[key]
    try:
        client = clickhouse_connect.get_client(
            host=url.host, port=url.port, username=url.user, database=url.database,
            password=os.environ.get(CLICKHOUSE_PASSWORD_ENV, ""),
            secure=url.scheme == "clickhouses", settings=settings,
            autogenerate_session_id=False)  # no server session: threads share the client
    except Exception as e:
        raise StoreError(f"cannot reach {url}: {_first_line(e)}") from None
    return Connection(client, url)


def _open_chdb(clickhouse_connect: Any, path: str, database: str, settings: dict[str, str]) -> Any:
    return clickhouse_connect.get_client(dsn=f"chdb://{path}", database=database,
                                         settings=settings)


def session_settings() -> dict[str, str]:
    """The settings of queries/clickhouse_settings.sql, by name."""
    pairs = (s.removeprefix("SET ").split("=", 1)
             for s in statements(sqlfiles.query("clickhouse_settings", engine=ENGINE)))
    return {name.strip(): value.strip() for name, value in pairs}


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def statements(sql: str) -> list[str]:
    """The statements of rendered ``sql``: comment lines dropped, split at a ``;`` that ends
    a line (no SQL file of midtrace ends a line with ``;`` inside a string)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in _END.split(text) if s.strip()]


def render_view(view: sqlfiles.SqlFile, **variables: Any) -> str:
    """``view`` rendered for ClickHouse (sqlfiles.render_view with engine "clickhouse")."""
    return sqlfiles.render_view(view, engine=ENGINE, **variables)


def create_schema(session: Session | Connection) -> None:
    """Set the session's settings (:func:`set_session`), create every table of the migrations, request_evidence,
    and the views (with their ClickHouse functions), all rendered for ClickHouse."""
    set_session(session)
    for m in sqlfiles.migrations():
        _run(session, sqlfiles.render(m.path, engine=ENGINE))
    _run(session, sqlfiles.query("create_request_evidence", engine=ENGINE))
    create_views(session)


def set_session(session: Session | Connection) -> None:
    """Set what makes ClickHouse answer as DuckDB does (queries/clickhouse_settings.sql). A
    :class:`Connection` sends them with every query already."""
    if isinstance(session, Connection):
        return
    _run(session, sqlfiles.query("clickhouse_settings", engine=ENGINE))


def fill_request_evidence(session: Session | Connection) -> None:
    """Compute every row of request_evidence with ClickHouse's own request_evidence_live."""
    _run(session, sqlfiles.query("fill_request_evidence", engine=ENGINE, scope="all"))


def create_views(session: Session | Connection) -> None:
    """(Re)create the views, rendered for ClickHouse with the stored views' defaults."""
    for v in sqlfiles.views():
        _run(session, render_view(v))


def _run(session: Session | Connection, sql: str) -> None:
    run = session.command if isinstance(session, Connection) else session.query
    for statement in statements(sql):
        run(statement)


def parameters(params: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters as ClickHouse parses them, as text: a time in UTC without its zone
    (the filters' {since:DateTime64(6, 'UTC')}, parts/filters.sql), a list as an array
    literal (parts/scope.sql's {trace_ids:Array(String)})."""
    return {name: _parameter(value) for name, value in params.items()}


def _parameter(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, list | tuple):
        return "[" + ",".join(_element(v) for v in value) + "]"
    return str(value)


def _element(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)
