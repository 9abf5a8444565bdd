"""midtrace's tables and views on ClickHouse (docs/architecture.md, "Two engines").

The same SQL files as DuckDB's, rendered with ``engine="clickhouse"``: the migrations' table
DDL (the derived rows as versioned tables, read through views of each trace's newest
version), the request_evidence table, and every view. Everything runs through a
:class:`Connection`, which :func:`connect` opens on a store's URL through clickhouse-connect:
an HTTP(S) server, or chdb (ClickHouse in this process) through clickhouse-connect's chdb
backend, the same client API. The write path is collector/storage/clickhouse_store.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from midtrace.collector.settings import CLICKHOUSE_PASSWORD_ENV, ClickHouseURL
from midtrace.collector.storage.database import StoreError  # one line: what is wrong, what to do
from midtrace.sql import sqlfiles

log = logging.getLogger(__name__)

ENGINE = "clickhouse"

_END = re.compile(r";[ \t]*$", re.M)


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
        """Release a server's client, which is this connection's own. chdb's is the process's
        one connection to its folder, which every ``connect`` returns: it stays open."""
        if self.url.scheme != "chdb":
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


def create_schema(conn: Connection) -> list[int]:
    """Apply the migrations not yet recorded in the store's schema_migrations table, create
    request_evidence if missing, and (re)create the views (with their ClickHouse functions),
    all rendered for ClickHouse. Returns the versions of the migrations applied.

    A store last brought up to this same definition (:func:`schema_hash`, recorded in
    derived_state as "schema", last) is left as it is: creating the views again costs 0.5 s
    on chdb (seconds on a busy machine) on every command and collector start; reading the
    recorded definition, 10-20 ms."""
    wanted = schema_hash()
    if _recorded_schema(conn) == wanted:
        return []
    run(conn, sqlfiles.query("create_schema_migrations", engine=ENGINE))
    done = set(select(conn, sqlfiles.query("applied_migrations", engine=ENGINE))
               .column(0).to_pylist())
    applied = []
    for m in sqlfiles.migrations():
        if m.version in done:
            continue
        run(conn, sqlfiles.render(m.path, engine=ENGINE))
        run(conn, sqlfiles.query("record_migration", engine=ENGINE),
            {"version": m.version, "name": m.name, "applied_at": dt.datetime.now(dt.UTC)})
        applied.append(m.version)
    run(conn, sqlfiles.query("create_current_views", engine=ENGINE))
    _ensure_scoped_tables(conn)
    run(conn, sqlfiles.query("create_request_evidence", engine=ENGINE))
    create_views(conn)
    _ensure_evidence(conn)
    run(conn, sqlfiles.query("record_schema_definition", engine=ENGINE),
        {"definition_hash": wanted, "built_at": dt.datetime.now(dt.UTC)})
    return applied


def schema_hash() -> str:
    """What :func:`create_schema` brings a store up to: every migration, the tables and views
    it creates, and how request_evidence is computed, all rendered for ClickHouse."""
    sql = [sqlfiles.render(m.path, engine=ENGINE) for m in sqlfiles.migrations()]
    sql += [sqlfiles.query(name, engine=ENGINE)
            for name in ("create_schema_migrations", "create_current_views")]
    sql.append(sqlfiles.query("create_evidence_scopes", engine=ENGINE,
                              scoped_tables=SCOPED_TABLES))
    sql += [render_view(v) for v in sqlfiles.views()]
    sql.append(evidence_hash())
    return hashlib.sha256("\n".join(sql).encode("utf-8")).hexdigest()


def _recorded_schema(conn: Connection) -> str | None:
    """The definition the store was last brought up to; None for a new store."""
    tables = select(conn, sqlfiles.query("store_tables", engine=ENGINE)).column(0).to_pylist()
    if "derived_state" not in tables:
        return None
    found = select(conn, sqlfiles.query("schema_definition", engine=ENGINE))
    return found.column(0)[0].as_py() if found.num_rows else None


# what a refresh of request_evidence copies per scope (queries/create_evidence_scopes.sql)
SCOPED_TABLES = ("requests", "chunks", "placements", "answer_sources", "outcomes")


def _ensure_scoped_tables(conn: Connection) -> None:
    """Create the copies a refresh reads, first dropping a copy whose view has changed."""
    names = [*SCOPED_TABLES, *(f"scoped_{n}" for n in SCOPED_TABLES)]
    found = select(conn, sqlfiles.query("scoped_columns", engine=ENGINE), {"tables": names})
    columns = dict(zip(found.column("table").to_pylist(), found.column("columns").to_pylist()))
    for name in SCOPED_TABLES:
        copy = columns.get(f"scoped_{name}")
        if copy is not None and copy != columns.get(name):
            log.info("the columns of %s changed: its copies for refreshes are made anew", name)
            run(conn, sqlfiles.query("drop_scoped_table", engine=ENGINE, name=name))
    run(conn, sqlfiles.query("create_evidence_scopes", engine=ENGINE,
                             scoped_tables=SCOPED_TABLES))


def copy_evidence_scope() -> str:
    """The statements that copy the current rows of ``$request_ids`` under ``{scope:UUID}``,
    for a refresh of their request_evidence rows (scope "traces")."""
    return sqlfiles.query("copy_evidence_scope", engine=ENGINE, scoped_tables=SCOPED_TABLES)


# views numbered below this define request_evidence_live (collector/storage/store.py)
_EVIDENCE_INPUTS = 20


def evidence_hash() -> str:
    """What ClickHouse's request_evidence rows are computed by: the views that define
    request_evidence_live and the renderings that compute its rows, rendered for ClickHouse."""
    sql = [render_view(v) for v in sqlfiles.views() if v.version < _EVIDENCE_INPUTS]
    sql += [sqlfiles.query("fill_request_evidence", engine=ENGINE, scope=s)
            for s in ("all", "traces")]
    sql.append(copy_evidence_scope())
    sql.append(sqlfiles.query("create_request_evidence", engine=ENGINE))
    return hashlib.sha256("\n".join(sql).encode("utf-8")).hexdigest()


def _ensure_evidence(conn: Connection) -> None:
    """Compute every request_evidence row again when the SQL that computes them changed."""
    wanted = evidence_hash()
    found = select(conn, sqlfiles.query("evidence_definition", engine=ENGINE))
    if found.num_rows and found.column(0)[0].as_py() == wanted:
        return
    log.info("computing request_evidence (new store or a changed definition)")
    run(conn, sqlfiles.query("clear_request_evidence", engine=ENGINE))
    fill_request_evidence(conn)
    run(conn, sqlfiles.query("record_evidence_definition", engine=ENGINE),
        {"definition_hash": wanted, "built_at": dt.datetime.now(dt.UTC)})


def set_retention(conn: Connection, days: int) -> None:
    """Keep ``days`` days of rows: a TTL on every day-partitioned table (queries/
    set_retention.sql), the ClickHouse counterpart of ``midtrace prune --older-than``."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"retention must be a whole number of days, at least 1, not {days!r}")
    run(conn, sqlfiles.query("set_retention", engine=ENGINE, days=days))


def select(conn: Connection, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
    """The rows of one query as an Arrow table, ``params`` bound to its ``{name:Type}``."""
    return conn.query(sql, params)


FILL_BATCH = 200_000  # requests per statement: a million at once needs over 20 GB on chdb


def fill_request_evidence(conn: Connection, batch: int = FILL_BATCH) -> None:
    """Compute every row of request_evidence with ClickHouse's own request_evidence_live, in
    request id ranges of about ``batch`` requests each (the ids are hashes, spread evenly;
    dense ids copied from DuckDB split as evenly)."""
    found = conn.query(sqlfiles.query("request_id_range", engine=ENGINE)).to_pylist()[0]
    n, lo, hi = found["n"], found["lo"], found["hi"]
    if not n:
        return
    if n <= batch:
        run(conn, sqlfiles.query("fill_request_evidence", engine=ENGINE, scope="all"))
        return
    parts = -(-n // batch)
    step = -(-(hi - lo + 1) // parts)
    sql = sqlfiles.query("fill_request_evidence", engine=ENGINE, scope="request_range")
    for start in range(lo, hi + 1, step):
        run(conn, sql, {"lo": start, "hi": min(start + step - 1, hi)})


def create_views(conn: Connection) -> None:
    """(Re)create the views, rendered for ClickHouse with the stored views' defaults."""
    for v in sqlfiles.views():
        run(conn, render_view(v))


def run(conn: Connection, sql: str, params: Mapping[str, Any] | None = None) -> None:
    """Run each statement of rendered ``sql`` in turn, ``params`` bound to its ``{name:Type}``."""
    for statement in statements(sql):
        conn.command(statement, params)
