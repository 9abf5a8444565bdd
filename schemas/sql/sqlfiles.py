"""The SQL of midtrace, kept in .sql files beside this module and rendered by one renderer.

Every file under ``schemas/sql/`` is a Jinja template, rendered by the one environment here
with ``StrictUndefined`` (a misspelt placeholder raises instead of rendering as nothing) and
autoescape off. The folders:

- ``migrations/``: numbered table DDL, applied once each, in order;
- ``views/``: numbered views (and DuckDB macros), created in order whenever the store opens a
  database, rendered with the defaults below, so a DuckDB file describes itself;
- ``queries/``: the named statements the code runs (:func:`query`);
- ``parts/``: Jinja macros the others import; never run on their own.

Every render gets ``engine``: ``"duckdb"`` (the default) or ``"clickhouse"`` (:data:`ENGINES`).
A file is written once and branches on it where the dialects differ, mostly through the
macros of parts/dialect.sql; the migrations and views/01_helpers.sql keep a ClickHouse branch
of their own (docs/architecture.md, "Two engines"). A query whose first line is
``-- engine: clickhouse`` has no DuckDB counterpart and is run on ClickHouse alone (the views
over its versioned tables, its TTL, its recovery).

A metric view (a view file with a ``-- metric:`` header) has three placeholders, filled by
:func:`metric_inputs` from the macros in parts/metric_inputs.sql:

- ``{{ facts }}``: the request facts it aggregates: ``request_facts`` in the stored view, a
  filtered subquery ``(SELECT * FROM request_facts WHERE ...)`` under filters, each filter
  value a bound parameter (``$service``, ``$since`` ...; ``{service:String}`` for
  ClickHouse), never formatted in; under a ``grader=`` filter, request_facts with that
  kind's verdicts (parts/graders.sql);
- ``{{ groups }}``: the caller's extra group-by columns, each followed by a comma
  (``service, week, ``), written in front of the view's own key columns; empty by default;
- ``{{ partition }}``: ``PARTITION BY <those columns>`` for window clauses; empty by default.

The definition of ``request_evidence_live`` (views numbered below 20) reads one variable and
one function, so the store can compute the rows of some requests with the view's own SQL:

- ``scope``: which requests (parts/scope.sql): ``"all"`` (the stored view), ``"request_range"``
  (request ids in ``[$lo, $hi]``) or ``"traces"`` (``$request_ids`` and their ``$trace_ids``);
- ``relation(name)``: view ``name`` itself under scope ``"all"``, else that view's query
  inlined in parentheses and rendered under the same scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, NoReturn

import jinja2
from jinja2 import meta

ENGINE = "duckdb"
ENGINES: tuple[str, ...] = ("duckdb", "clickhouse")
HERE = Path(__file__).resolve().parent  # schemas/sql/, installed as the package midtrace.sql
SCOPES: tuple[str, ...] = ("all", "request_range", "traces")

_NUMBERED = re.compile(r"^(\d+)_([a-z0-9_]+)\.sql$")
_VIEW = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW\s+(\w+)\s+AS\s+(.*?);?\s*$", re.S | re.I)


@dataclass(frozen=True)
class SqlFile:
    version: int
    name: str
    sql: str  # unrendered
    path: str  # relative to schemas/sql/


def _folder(name: str) -> list[SqlFile]:
    files = []
    for entry in (HERE / name).iterdir():
        match = _NUMBERED.match(entry.name)
        if match:
            files.append(SqlFile(int(match[1]), match[2], entry.read_text(encoding="utf-8"),
                                 f"{name}/{entry.name}"))
    return sorted(files, key=lambda f: f.version)


def migrations() -> list[SqlFile]:
    """Numbered table migrations, in the order they must be applied."""
    return _folder("migrations")


def views() -> list[SqlFile]:
    """View definitions (templates of CREATE OR REPLACE VIEW), in dependency order."""
    return _folder("views")


def _fail(message: str) -> NoReturn:
    raise jinja2.TemplateRuntimeError(message)


def _identifier(value: str) -> str:
    return '"' + str(value).replace('"', '""') + '"'


@jinja2.pass_context
def _relation(context: jinja2.runtime.Context, name: str) -> str:
    scope = context["scope"]
    if scope == "all":
        return name
    return f"({view_body(render_view(view_file(name), scope=scope, engine=context['engine']))})"


@cache
def environment() -> jinja2.Environment:
    """The one Jinja environment every SQL file is rendered by."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.globals.update(fail=_fail, relation=_relation)
    env.filters["identifier"] = _identifier
    return env


def render(path: str, **variables: Any) -> str:
    """The file at ``path`` (relative to schemas/sql/) rendered with ``variables``.

    The files are the package's own and do not change while it runs, so a rendering with
    hashable variables is kept: the store renders the same statements on every commit, and
    one of them (request_evidence_live inlined, queries/fill_request_evidence.sql) takes
    milliseconds to render."""
    key = tuple(sorted(variables.items()))
    try:
        hash(key)
    except TypeError:  # a list or dict among the variables: rendered each time
        return _render(path, variables)
    return _render_kept(path, key)


@lru_cache(maxsize=512)
def _render_kept(path: str, variables: tuple[tuple[str, Any], ...]) -> str:
    return _render(path, dict(variables))


def _render(path: str, variables: dict[str, Any]) -> str:
    return environment().get_template(path).render({"engine": ENGINE, **variables})


def render_string(text: str, **variables: Any) -> str:
    """``text`` rendered as a template of the same environment (for checks and tests)."""
    return environment().from_string(text).render({"engine": ENGINE, **variables})


def placeholders(path: str) -> set[str]:
    """The variables the template at ``path`` reads itself (not ``engine``, the globals, or
    what macros it imports ``with context`` read, such as ``scope``)."""
    env = environment()
    source = env.loader.get_source(env, path)[0]  # type: ignore[union-attr]
    return meta.find_undeclared_variables(env.parse(source)) - {"engine", *env.globals}


def query(name: str, **variables: Any) -> str:
    """The named statement(s) of schemas/sql/queries/, rendered with ``variables``."""
    return render(f"queries/{name}.sql", **variables)


def metric_inputs(filters: Sequence[str] = (), group_keys: Sequence[str] = (),
                  grader: str | None = None, engine: str = ENGINE) -> dict[str, str]:
    """``facts``, ``groups`` and ``partition`` of a metric view: with no arguments, what the
    stored view is created with. ``filters`` names the set filters (parts/filters.sql), whose
    values the caller binds as parameters of the same names; ``grader`` (person, references,
    judge; None or all for the merged outcome) picks whose grades count (parts/graders.sql)."""
    inputs: Any = environment().get_template("parts/metric_inputs.sql").make_module(
        {"engine": engine})
    return {"facts": str(inputs.facts(list(filters), grader)),
            "groups": str(inputs.groups(list(group_keys))),
            "partition": str(inputs.partition(list(group_keys)))}


# The condition (parts/filters.sql) that selects each kind of traffic; "all" needs none.
TRAFFIC_CONDITIONS = {"production": ["no_experiment"], "experiment": ["any_experiment"], "all": []}


def default_traffic(view: SqlFile) -> str | None:
    """The traffic a metric view counts unless asked otherwise: its ``-- traffic:`` line, else
    production; None for a view that is not a metric view (no ``-- metric:`` line)."""
    lines = view.sql.splitlines()
    if not any(line.startswith("-- metric:") for line in lines):
        return None
    for line in lines:
        if line.startswith("-- traffic:"):
            return line.removeprefix("-- traffic:").strip()
    return "production"


def view_defaults(view: SqlFile | None = None, engine: str = ENGINE) -> dict[str, Any]:
    """What a view file is rendered with when the store creates it: a metric view counts its
    default traffic (so the stored view agrees with the query API's default)."""
    traffic = default_traffic(view) if view is not None else None
    return {**metric_inputs(TRAFFIC_CONDITIONS[traffic] if traffic else (), engine=engine),
            "scope": "all"}


def render_view(view: SqlFile, **variables: Any) -> str:
    """A view file rendered: the defaults of the stored view, overridden by ``variables``
    (``engine`` among them: the defaults are rendered for the same engine)."""
    engine = variables.get("engine", ENGINE)
    return render(view.path, **{**view_defaults(view, engine), **variables})


def view_file(name: str) -> SqlFile:
    """The file that creates view ``name``."""
    found = [v for v in views() if re.search(rf"\bVIEW\s+{re.escape(name)}\s+AS\b", v.sql)]
    if len(found) != 1:
        raise LookupError(f"expected one view file creating {name}, found {len(found)}")
    return found[0]


def view_body(sql: str) -> str:
    """The query of the one CREATE OR REPLACE VIEW in rendered ``sql`` (comment lines dropped)."""
    return _view_match(sql)[2]


def view_name(sql: str) -> str:
    """The name of the one view rendered ``sql`` creates."""
    return _view_match(sql)[1]


def _view_match(sql: str) -> re.Match[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    match = _VIEW.search(body)
    if match is None:
        raise ValueError("expected one CREATE OR REPLACE VIEW")
    return match
