"""midtrace's tables and views on ClickHouse (docs/architecture.md, "Two engines").

The same SQL files as DuckDB's, rendered with ``engine="clickhouse"``: the migrations' table
DDL (the derived rows as versioned tables, read through views of each trace's newest
version), the request_evidence table, and every view. ``session`` is anything with a
``query(sql, fmt, params=...)`` method that runs one statement and keeps ``SET`` settings
between calls: a ``chdb.session.Session`` (the in-process ClickHouse engine) is one. The
write path is collector/storage/clickhouse_store.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any, Protocol

from midtrace.sql import sqlfiles

log = logging.getLogger(__name__)

ENGINE = "clickhouse"

_END = re.compile(r";[ \t]*$", re.M)


class Session(Protocol):
    def query(self, sql: str, *args: Any, **kwargs: Any) -> Any: ...


def statements(sql: str) -> list[str]:
    """The statements of rendered ``sql``: comment lines dropped, split at a ``;`` that ends
    a line (no SQL file of midtrace ends a line with ``;`` inside a string)."""
    text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in _END.split(text) if s.strip()]


def render_view(view: sqlfiles.SqlFile, **variables: Any) -> str:
    """``view`` rendered for ClickHouse (sqlfiles.render_view with engine "clickhouse")."""
    return sqlfiles.render_view(view, engine=ENGINE, **variables)


def create_schema(session: Session) -> list[int]:
    """Set the session's settings (:func:`set_session`), apply the migrations not yet
    recorded in its schema_migrations table, create request_evidence if missing, and
    (re)create the views (with their ClickHouse functions), all rendered for ClickHouse.
    Returns the versions of the migrations applied."""
    set_session(session)
    run(session, sqlfiles.query("create_schema_migrations", engine=ENGINE))
    done = set(select(session, sqlfiles.query("applied_migrations", engine=ENGINE))
               .column(0).to_pylist())
    applied = []
    for m in sqlfiles.migrations():
        if m.version in done:
            continue
        run(session, sqlfiles.render(m.path, engine=ENGINE))
        run(session, sqlfiles.query("record_migration", engine=ENGINE),
             {"version": m.version, "name": m.name, "applied_at": dt.datetime.now(dt.UTC)})
        applied.append(m.version)
    run(session, sqlfiles.query("create_current_views", engine=ENGINE))
    run(session, sqlfiles.query("create_request_evidence", engine=ENGINE))
    create_views(session)
    _ensure_evidence(session)
    return applied


# views numbered below this define request_evidence_live (collector/storage/store.py)
_EVIDENCE_INPUTS = 20


def evidence_hash() -> str:
    """What ClickHouse's request_evidence rows are computed by: the views that define
    request_evidence_live and the renderings that compute its rows, rendered for ClickHouse."""
    sql = [render_view(v) for v in sqlfiles.views() if v.version < _EVIDENCE_INPUTS]
    sql += [sqlfiles.query("fill_request_evidence", engine=ENGINE, scope=s)
            for s in ("all", "traces")]
    sql.append(sqlfiles.query("create_request_evidence", engine=ENGINE))
    return hashlib.sha256("\n".join(sql).encode("utf-8")).hexdigest()


def _ensure_evidence(session: Session) -> None:
    """Compute every request_evidence row again when the SQL that computes them changed."""
    wanted = evidence_hash()
    found = select(session, sqlfiles.query("evidence_definition", engine=ENGINE))
    if found.num_rows and found.column(0)[0].as_py() == wanted:
        return
    log.info("computing request_evidence (new store or a changed definition)")
    run(session, sqlfiles.query("clear_request_evidence", engine=ENGINE))
    fill_request_evidence(session)
    run(session, sqlfiles.query("record_evidence_definition", engine=ENGINE),
        {"definition_hash": wanted, "built_at": dt.datetime.now(dt.UTC)})


def set_retention(session: Session, days: int) -> None:
    """Keep ``days`` days of rows: a TTL on every day-partitioned table (queries/
    set_retention.sql), the ClickHouse counterpart of ``midtrace prune --older-than``."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"retention must be a whole number of days, at least 1, not {days!r}")
    run(session, sqlfiles.query("set_retention", engine=ENGINE, days=days))


def select(session: Session, sql: str, params: Mapping[str, Any] | None = None) -> Any:
    """The rows of one query as an Arrow table, ``params`` bound (:func:`parameters`)."""
    return session.query(sql, "ArrowTable", params=parameters(params or {}))


def set_session(session: Session) -> None:
    """Set what makes ClickHouse answer as DuckDB does (queries/clickhouse_settings.sql)."""
    run(session, sqlfiles.query("clickhouse_settings", engine=ENGINE))


def fill_request_evidence(session: Session) -> None:
    """Compute every row of request_evidence with ClickHouse's own request_evidence_live."""
    run(session, sqlfiles.query("fill_request_evidence", engine=ENGINE, scope="all"))


def create_views(session: Session) -> None:
    """(Re)create the views, rendered for ClickHouse with the stored views' defaults."""
    for v in sqlfiles.views():
        run(session, render_view(v))


def run(session: Session, sql: str, params: Mapping[str, Any] | None = None) -> None:
    """Run each statement of rendered ``sql`` in turn, ``params`` bound (:func:`parameters`)."""
    bound = parameters(params or {})
    for statement in statements(sql):
        if bound:
            session.query(statement, params=bound)
        else:
            session.query(statement)


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
