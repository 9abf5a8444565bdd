"""The read side: named metric views, filters, group-by keys, and the queries that run them.

Every read the query API, the Python client and the CLI make is built here, so the HTTP
backend (which runs these server side) and the store backends return the same frames. Each
``run_*`` function takes a DuckDB connection or cursor, a ClickHouse store's connection, or a
reader of either (readers.py), and renders its SQL for that reader's engine. No
caller SQL is ever run: view names and group-by keys come only from allowlists, and every
filter value is bound as a parameter.

A metric view (schemas/sql/views/) is a template with three placeholders, ``{{ facts }}``,
``{{ groups }}`` and ``{{ partition }}`` (schemas/sql/sqlfiles.py). The store creates it rendered
with their defaults (the unfiltered ``request_facts``, no extra groups), so the view works on
its own in the DuckDB CLI; :func:`view_query` renders the same template with the caller's
filters (names only: the values are bound as parameters) and group-by keys.

A view declares itself with a header: ``-- metric: <description>`` and ``-- keys: a, b``
(its own key columns; a group-by key already among them is not added twice).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import cache
from typing import Any, get_args

from midtrace.collector.query.readers import Reader as Reader
from midtrace.collector.query.readers import read_cursor as read_cursor
from midtrace.collector.query.readers import reader
from midtrace.schemas.decode import utc_time
from midtrace.schemas.model import RequestKind
from midtrace.sql import sqlfiles

FILTER_KEYS: tuple[str, ...] = (
    "since", "until", "service", "model", "template", "strategy", "experiment", "context_bucket",
    "traffic", "grader")
GROUP_KEYS: tuple[str, ...] = (
    "service", "model", "template", "strategy", "experiment", "context_bucket", "week")
CONTEXT_BUCKETS: tuple[str, ...] = ("<4k", "4k-16k", "16k-64k", "64k+")
BANDS: tuple[str, ...] = ("early", "middle", "late")
TAXONOMY_CLASSES: tuple[str, ...] = (
    "ungraded", "answered", "missing", "dropped", "buried", "unused", "unlabeled")
TRAFFIC = ("production", "experiment", "all")
# what a stored trace is (docs/metrics.md, "Request kinds"); the metric views count `rag` only
REQUEST_KINDS: tuple[str, ...] = get_args(RequestKind)
# whose grades count (docs/grading.md, "Whose grades count"); unset is "all"
GRADERS = ("all", "person", "references", "judge")
MAX_OFFSET = 2**62  # DuckDB binds offsets as BIGINT
MAX_LIMIT = 1000


class QueryError(ValueError):
    """A read asked for something that is not allowed; the message names what is."""


def parse_time(value: str) -> datetime:
    """RFC 3339 (``2026-11-02T10:00:00Z``) or ``YYYY-MM-DD`` (midnight), in UTC."""
    text = value.strip()
    if len(text) == 10:
        try:
            return datetime.combine(date.fromisoformat(text), time(0), UTC)
        except ValueError:
            raise QueryError(f"{value!r} is not a time: use RFC 3339 or YYYY-MM-DD (UTC)") from None
    try:
        return utc_time(text)
    except ValueError as e:  # not a time, or out of range (9999-12-31T23:59:59-23:59)
        raise QueryError(f"{e}: use RFC 3339 or YYYY-MM-DD (UTC)") from None


def _format_time(value: datetime) -> str:
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Filters:
    """The one set of filters (docs/architecture.md, "The query API and its filters").

    ``since``/``until`` are a half-open UTC range ``[since, until)`` on request time; the
    others match a request column exactly.
    """

    since: datetime | None = None
    until: datetime | None = None
    service: str | None = None
    model: str | None = None
    template: str | None = None
    strategy: str | None = None
    experiment: str | None = None
    context_bucket: str | None = None
    traffic: str | None = None  # production | experiment | all; unset: see effective_traffic
    grader: str | None = None  # all | person | references | judge; unset: all

    def __post_init__(self) -> None:
        if self.grader is not None and self.grader not in GRADERS:
            raise QueryError(f"grader {self.grader!r} is not one of {', '.join(GRADERS)}")
        if self.traffic is not None and self.traffic not in TRAFFIC:
            raise QueryError(f"traffic {self.traffic!r} is not one of {', '.join(TRAFFIC)}")
        named = self.experiment is not None and self.experiment != NO_EXPERIMENT
        if named and self.traffic == "production":
            raise QueryError(f"experiment={self.experiment} is experiment traffic; it cannot be "
                             "read with traffic=production")
        if self.experiment == NO_EXPERIMENT and self.traffic == "experiment":
            raise QueryError(f"experiment={NO_EXPERIMENT} is production traffic; it cannot be "
                             "read with traffic=experiment")
        if self.context_bucket is not None and self.context_bucket not in CONTEXT_BUCKETS:
            raise QueryError(f"context_bucket {self.context_bucket!r} is not one of "
                             f"{', '.join(CONTEXT_BUCKETS)}")
        for key in ("since", "until"):
            value = getattr(self, key)
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, key, value.replace(tzinfo=UTC))

    def to_params(self) -> dict[str, str]:
        """Query parameters (or ``--filter`` pairs) for the filters that are set."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = _format_time(value) if isinstance(value, datetime) else str(value)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Filters:
        """Filters from query parameters; an unknown key is a ValueError naming the allowed ones."""
        unknown = sorted(set(params) - set(FILTER_KEYS))
        if unknown:
            raise QueryError(f"unknown filter key(s) {', '.join(unknown)}; "
                             f"allowed: {', '.join(FILTER_KEYS)}")
        values: dict[str, Any] = {}
        for key, value in params.items():
            if value is None or value == "":
                continue
            values[key] = parse_time(value) if key in ("since", "until") else str(value)
        return cls(**values)

    def is_empty(self) -> bool:
        return not self.to_params()

    def effective_traffic(self, default: str = "production") -> str:
        """The traffic counted: as asked; else experiment traffic when an experiment is
        named; else ``default`` (production, or experiment for the sweep views)."""
        if self.traffic is not None:
            return self.traffic
        if self.experiment is not None:
            return "production" if self.experiment == NO_EXPERIMENT else "experiment"
        return default

    def graders(self) -> str | None:
        """The one kind of grader whose grades count, or None for every kind merged."""
        return None if self.grader in (None, "all") else self.grader


def parse_group_by(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Group-by keys from ``"a,b"`` or a sequence; an unknown key is a QueryError."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    keys: list[str] = []
    for item in items:
        key = item.strip()
        if not key:
            continue
        if key not in GROUP_KEYS:
            raise QueryError(f"unknown group-by key {key!r}; allowed: {', '.join(GROUP_KEYS)}")
        if key not in keys:
            keys.append(key)
    return tuple(keys)


@dataclass(frozen=True)
class MetricView:
    name: str
    description: str
    keys: tuple[str, ...]
    template: sqlfiles.SqlFile
    traffic: str = "production"  # what the view counts unless asked: its `-- traffic:` line


@cache
def metric_views() -> dict[str, MetricView]:
    """The views a caller may ask for, by name, in file order."""
    out: dict[str, MetricView] = {}
    for f in sqlfiles.views():
        description = keys = None
        for line in f.sql.splitlines():
            if line.startswith("-- metric:"):
                description = line.removeprefix("-- metric:").strip()
            elif line.startswith("-- keys:"):
                keys = tuple(k.strip() for k in line.removeprefix("-- keys:").split(",") if k.strip())

        if description is None:
            continue
        if "facts" not in sqlfiles.placeholders(f.path):
            raise RuntimeError(f"metric view file {f.path} does not read {{{{ facts }}}}")
        name = sqlfiles.view_name(sqlfiles.render_view(f))
        out[name] = MetricView(name, description, keys or (), f, sqlfiles.default_traffic(f) or "production")
    return out


# `experiment=(none)` selects the requests that belong to no experiment: production traffic,
# without the sweeps recorded beside it (the weekly review reads it this way).
NO_EXPERIMENT = "(none)"


def _conditions(filters: Filters, default_traffic: str = "production") -> tuple[list[str], dict[str, Any]]:
    """The filter conditions that apply (names in schemas/sql/parts/filters.sql) and their
    parameters. Traffic (docs/architecture.md): production unless asked otherwise."""
    names: list[str] = []
    params: dict[str, Any] = {}
    for key in FILTER_KEYS:
        value = getattr(filters, key)
        if key in ("traffic", "grader") or (key == "experiment" and value == NO_EXPERIMENT):
            continue
        if value is not None:
            names.append(key)
            params[key] = value
    traffic = filters.effective_traffic(default_traffic)
    if traffic == "production":
        names.append("no_experiment")
    elif traffic == "experiment":
        names.append("any_experiment")
    return names, params


def view_query(name: str, filters: Filters = Filters(), group_by: Sequence[str] = (),
               engine: str = sqlfiles.ENGINE) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters that compute view ``name`` under ``filters``, grouped by
    ``group_by``, in the SQL of ``engine`` (DuckDB unless asked)."""
    views = metric_views()
    view = views.get(name)
    if view is None:
        raise QueryError(f"unknown view {name!r}; allowed: {', '.join(views)}")
    keys = [k for k in parse_group_by(group_by) if k not in view.keys]
    conditions, params = _conditions(filters, view.traffic)
    inputs = sqlfiles.metric_inputs(conditions, keys, filters.graders(), engine)
    sql = sqlfiles.view_body(sqlfiles.render_view(view.template, engine=engine, **inputs))
    if keys and not view.keys:
        sql = sqlfiles.query("grouped_metric", query=sql, group_keys=keys, engine=engine)
    return sql, params


def run_view(conn: Any, name: str, filters: Filters = Filters(),
             group_by: Sequence[str] = ()) -> Any:
    """Run a metric view on ``conn`` (a DuckDB connection or cursor, a ClickHouse store's
    connection, or a reader of either: readers.py); a pyarrow Table."""
    db = reader(conn)
    sql, params = view_query(name, filters, group_by, db.engine)
    return db.arrow(sql, params)


def _requests_conditions(filters: Filters, search: str | None,
                         taxonomy_class: str | None) -> tuple[list[str], dict[str, Any]]:
    conditions, params = _conditions(filters)
    if search:
        conditions.append("question")
        params["question"] = search
    if taxonomy_class is not None:
        if taxonomy_class not in TAXONOMY_CLASSES:
            raise QueryError(f"unknown class {taxonomy_class!r}; allowed: {', '.join(TAXONOMY_CLASSES)}")
        conditions.append("class")
        params["class"] = taxonomy_class
    return conditions, params


def run_requests(conn: Any, filters: Filters = Filters(), search: str | None = None,
                 taxonomy_class: str | None = None, limit: int = 50,
                 offset: int = 0) -> tuple[Any, int]:
    """One page of requests, newest first, and the total that match; (pyarrow Table, int)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    conditions, params = _requests_conditions(filters, search, taxonomy_class)
    grader = filters.graders()
    db = reader(conn)
    ((total,),) = db.rows(sqlfiles.query("requests_count", filters=conditions, grader=grader,
                                         engine=db.engine), params)
    table = db.arrow(sqlfiles.query("requests_page", filters=conditions, grader=grader,
                                    engine=db.engine),
                     {**params, "limit": limit, "offset": offset})
    return table, int(total)


def run_request_texts(conn: Any, filters: Filters = Filters(), limit: int = 500,
                      offset: int = 0) -> Any:
    """One page of requests in arrival order with their question, answer and chunk texts
    (``chunks``: a list of ``{chunk_id, text}``), what reference grading reads; a pyarrow
    Table."""
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    conditions, params = _conditions(filters)
    db = reader(conn)
    return db.arrow(sqlfiles.query("request_texts_page", filters=conditions,
                                   grader=filters.graders(), engine=db.engine),
                    {**params, "limit": limit, "offset": offset})


def json_value(value: Any) -> Any:
    """A value as JSON can carry it: times as RFC 3339 strings, NaN as null."""
    if isinstance(value, datetime):
        return _format_time(value) if value.tzinfo is not None else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return json_value(value.item())
    return value


def _dicts(db: Reader, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of query ``name`` as dicts of JSON values."""
    return [{n: json_value(v) for n, v in row.items()}
            for row in db.dicts(sqlfiles.query(name, engine=db.engine), params)]


def run_trace(conn: Any, trace_id: str) -> dict[str, Any] | None:
    """One request with its chunks (text inline), placements, outcomes, taxonomy class and
    the chunks its answer follows (answer_sources) and its replays (`midtrace replay`,
    docs/replay.md), per experiment and layout."""
    trace_id = trace_id.strip().lower()
    by_trace = {"trace_id": trace_id}
    db = reader(conn)
    found = db.rows(sqlfiles.query("request_of_trace", engine=db.engine), by_trace)
    if not found:
        return None
    request_id = found[0][0]
    p = {"r": request_id}
    request = _dicts(db, "trace_request", p)[0]
    chunks = _dicts(db, "trace_chunks", p)
    placements = _dicts(db, "trace_placements", p)
    sources = _dicts(db, "trace_answer_sources", p)
    merged = _dicts(db, "merged_outcome_of_trace", by_trace)
    outcomes = _dicts(db, "outcomes_of_trace", by_trace)
    replays = _dicts(db, "replays_of_trace", by_trace)
    request.pop("request_id", None)
    return {
        "trace_id": trace_id,
        "request": request,
        "chunks": chunks,
        "placements": placements,
        "answer_sources": sources,
        "outcome": merged[0] if merged else None,
        "outcomes": outcomes,
        "taxonomy_class": request.get("taxonomy_class"),
        "replays": replays,
    }


def run_settings(conn: Any) -> dict[str, Any]:
    """The settings the metric views apply (band thresholds, min_n, high_confidence), each
    with its help text: ``{"settings": {key: value}, "help": {key: text}}``."""
    db = reader(conn)
    rows = db.rows(sqlfiles.query("settings", engine=db.engine))
    return {"settings": {str(k): float(v) for k, v, _ in rows},
            "help": {str(k): str(h) for k, _, h in rows}}


def run_facets(conn: Any) -> dict[str, Any]:
    """Distinct values of each equality filter, the time range of the data, and how many
    requests there are of each kind."""
    db = reader(conn)
    (row,) = db.dicts(sqlfiles.query("facets", engine=db.engine))
    out: dict[str, Any] = {key: row[key] for key in
                           ("service", "model", "template", "strategy", "experiment")}
    out["context_bucket"] = [b for b in CONTEXT_BUCKETS if b in set(row["context_bucket"])]
    out["time"] = {"min": json_value(row["min_time"]), "max": json_value(row["max_time"])}
    out["requests"] = int(row["requests"])
    out["kinds"] = {kind: int(row[kind]) for kind in REQUEST_KINDS}
    return out


def run_trace_prompts(conn: Any, trace_id: str) -> list[str]:
    """The prompt texts the trace's LLM spans carried (OpenInference, GenAI or Vercel AI SDK
    messages, joined as the collector joins them when it locates the chunks), the last-ending
    call first; none where the app recorded no prompt text or the collector kept none
    (``--no-text``). For `midtrace replay`, which sends a request's own prompt again."""
    from midtrace.collector.normalize import genai, openinference, vercel_ai
    from midtrace.collector.normalize.attr_values import readable
    from midtrace.collector.storage.spanstore import span_from_row

    ids = {"trace_ids": [trace_id.strip().lower()]}
    db = reader(conn)
    texts = dict(db.rows(sqlfiles.query("texts_of_traces", engine=db.engine), ids))
    spans = [span_from_row(row, texts)
             for row in db.rows(sqlfiles.query("spans_of_traces", engine=db.engine), ids)]
    out: list[str] = []
    for span in sorted(spans, key=lambda s: (s.end_ns, s.span_id), reverse=True):
        calls = []
        if openinference.span_kind(span) == "LLM":
            calls.append(openinference.llm_call(span))
        if genai.is_inference(span):
            events = [e for e in spans if genai.is_event(e) and e.parent_span_id == span.span_id]
            calls.append(genai.llm_call(span, events))
        if vercel_ai.is_llm_call(span):
            calls.append(vercel_ai.llm_call(span))
        for call in calls:
            prompt = readable(call.prompt)
            if prompt and prompt not in out:
                out.append(prompt)
    return out
