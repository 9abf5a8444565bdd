"""The one SQL renderer: every placeholder of every template consumed, a misspelt one refused,
the stored views equal to their templates rendered with defaults; and no SQL left in .py files."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.intake import otlp
from midtrace.collector.receive.bodies import check_spans
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.execute import run_script, transaction
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.query import reads
from midtrace.sql import sqlfiles
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Outcome, RagRecord
from tests.metrics_fixtures import ns, prompt, record

ROOT = Path(__file__).resolve().parent.parent
LEFTOVERS = ("{{", "{%", "{#", "/*facts*/", "/*groups*/", "/*partition*/", "/*scope", "/*inline*/")
EVERY_FILTER = reads.Filters(
    since=reads.parse_time("2026-01-01"), until=reads.parse_time("2027-01-01"), service="s",
    model="m", template="t", strategy="edge", experiment="e", context_bucket="<4k")
NO_EXPERIMENT = reads.Filters(service="s", experiment=reads.NO_EXPERIMENT)
# every condition of schemas/sql/parts/filters.sql
# (traffic is not a condition of its own: it becomes no_experiment or any_experiment; nor is
# grader: it picks whose verdicts the facts carry, parts/graders.sql)
CONDITIONS = [*(k for k in reads.FILTER_KEYS if k not in ("traffic", "grader")), "no_experiment",
              "any_experiment", "question", "class"]


def assert_consumed(sql: str, where: str) -> None:
    left = [marker for marker in LEFTOVERS if marker in sql]
    assert not left, f"{where}: {left} left in\n{sql}"


@pytest.fixture()
def empty() -> Iterator[duckdb.DuckDBPyConnection]:
    store = Store(duckdb.connect())
    yield store.conn
    store.close()


@pytest.mark.parametrize("filters", [reads.Filters(), EVERY_FILTER, NO_EXPERIMENT,
                                     reads.Filters(traffic="all"), reads.Filters(traffic="experiment"),
                                     reads.Filters(grader="judge", service="s"),
                                     reads.Filters(grader="all")],
                         ids=["no filter", "every filter", "no experiment", "all traffic",
                              "experiment traffic", "judge grades", "all grades"])
def test_every_metric_view_renders_and_runs_with_every_group_key(
        empty: duckdb.DuckDBPyConnection, filters: reads.Filters) -> None:
    groupings = [(), *((key,) for key in reads.GROUP_KEYS), reads.GROUP_KEYS]
    for name in reads.metric_views():
        for group_by in groupings:
            sql, params = reads.view_query(name, filters, group_by)
            assert_consumed(sql, f"{name} by {group_by}")
            table = reads.run_view(empty, name, filters, group_by)
            own = [k for k in group_by if k not in reads.metric_views()[name].keys]
            assert table.column_names[:len(own)] == own, (name, group_by)
            assert set(params) == set(filters.to_params()) - {"traffic", "grader"} - (
                {"experiment"} if filters.experiment == reads.NO_EXPERIMENT else set())


def test_the_requests_list_runs_with_every_condition(empty: duckdb.DuckDBPyConnection) -> None:
    for filters in (reads.Filters(), EVERY_FILTER, NO_EXPERIMENT,
                    reads.Filters(grader="person")):
        for search in (None, "refund"):
            for taxonomy_class in (None, "buried"):
                table, total = reads.run_requests(empty, filters, search, taxonomy_class)
                assert total == 0 and table.num_rows == 0


def renderings(path: str) -> Iterator[tuple[str, str]]:
    """The template at ``path`` rendered with a value for every placeholder there is, once per
    scope where it has one (views read ``scope`` through parts/scope.sql)."""
    values: dict[str, Any] = {
        **sqlfiles.metric_inputs(CONDITIONS, reads.GROUP_KEYS, "judge"), "filters": CONDITIONS,
        "grader": "references",
        "group_keys": list(reads.GROUP_KEYS), "query": "SELECT 1 AS week", "database": "memory",
        "target": "texts", "columns": ["text_hash", "text"], "source": "_rows", "days": 30,
        "scoped_tables": clickhouse.SCOPED_TABLES, "name": "requests",
        "partitions": {"spans": ["20261109"], "derivations": ["20261108", "20261109"]},
        "tables": ["texts", "chunk_texts"],
        "engine": "clickhouse" if clickhouse_only(path) else sqlfiles.ENGINE}
    scoped = path.startswith("views/") or "scope" in sqlfiles.placeholders(path)
    for scope in (sqlfiles.SCOPES if scoped else ("all",)):
        yield scope, sqlfiles.render(path, **values, scope=scope)


def clickhouse_only(path: str) -> bool:
    """Whether the template at ``path`` is run on ClickHouse alone (its first line says so)."""
    env = sqlfiles.environment()
    source = env.loader.get_source(env, path)[0]  # type: ignore[union-attr]
    return source.startswith("-- engine: clickhouse\n")


def test_every_template_file_renders_with_nothing_left_and_parses() -> None:
    env = sqlfiles.environment()
    templates = [t for t in env.list_templates(extensions=["sql"]) if not t.startswith("parts/")]
    assert {t.split("/")[0] for t in templates} == {"migrations", "views", "queries"}
    for path in templates:
        for scope, sql in renderings(path):
            assert_consumed(sql, f"{path} (scope {scope})")
            if clickhouse_only(path):
                assert clickhouse.statements(sql), path
                continue
            assert duckdb.extract_statements(sql), path  # raises on a syntax error


def test_a_misspelt_placeholder_raises() -> None:
    with pytest.raises(jinja2.UndefinedError, match="fatcs"):
        sqlfiles.render_string("SELECT count(*) FROM {{ fatcs }}", facts="request_facts")
    view = reads.metric_views()["overview"].template
    with pytest.raises(jinja2.UndefinedError, match="is undefined"):
        sqlfiles.render(view.path)  # a view rendered without its placeholders
    scoped = '{% from "parts/scope.sql" import request_in_scope with context %}' \
             '{{ request_in_scope("r") }}'
    with pytest.raises(jinja2.TemplateRuntimeError, match="unknown scope trace"):
        sqlfiles.render_string(scoped, scope="trace")
    with pytest.raises(jinja2.TemplateRuntimeError, match="unknown filter condition servce"):
        sqlfiles.metric_inputs(["servce"])


def test_a_template_file_with_a_misspelt_placeholder_raises(tmp_path: Path) -> None:
    (tmp_path / "typo.sql").write_text("SELECT {{ groups }} count(*) FROM {{ fact }}\n")
    env = sqlfiles.environment().overlay(loader=jinja2.FileSystemLoader(tmp_path))
    with pytest.raises(jinja2.UndefinedError, match="'fact' is undefined"):
        env.get_template("typo.sql").render(engine=sqlfiles.ENGINE, **sqlfiles.metric_inputs())


# --- the stored views equal their templates rendered with defaults ---------------------------

def sdk_jobs(records: list[tuple[RagRecord, str, int]]) -> list[WriteJob]:
    """Each record on an llm span made by the real SDK, encoded and decoded as the collector
    would receive it."""
    jobs = []
    for rag, service, start in records:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("llm", start_time=start) as span:
            record_request(span, rag)
        body = otlp.encode_sdk_spans(list(exporter.get_finished_spans())).SerializeToString()
        check = check_spans(otlp.parse_protobuf(body))
        assert check.accepted and not check.rejected
        jobs.append(WriteJob(spans=check.accepted))
    return jobs


@pytest.fixture(scope="module")
def small() -> Iterator[Store]:
    g = Chunk("g", label="direct_answer", source_id="policy", authority="canonical", cited=True)
    x = Chunk("x", source_id="old", authority="deprecated")
    wrong, right = Outcome(correct=False), Outcome(correct=True)
    records = [
        (record([g, x], prompt("g", "x"), model="m1", strategy="edge", outcome=right),
         "a", ns("2026-09-07")),
        (record([x, g], prompt("x", "g", spans=[(0, 500), (500, 520)]), prompt_tokens=20000,
                model="m2", outcome=wrong), "a", ns("2026-09-21")),
        (record([x, g, Chunk("y")], prompt("x", "g", "y"), model="m2", confidence=0.9,
                cited_ids=("x",), outcome=Outcome(correct=False, required_constraints=("a", "b"),
                                                  recalled_constraints=("a",))),
         "b", ns("2026-09-23")),
        (record([g], prompt("g"), model="m1", experiment_id="e", condition="start", case_id="c",
                strategy="score_order", answer="Fourteen days", outcome=right), "b",
         ns("2026-09-22")),
        (record([x, g], prompt("x", "g"), model="m1", experiment_id="e", condition="end",
                case_id="c", strategy="score_order", answer="Thirty days", outcome=wrong), "b",
         ns("2026-09-22")),
        # the same case and condition under a second strategy: a pair for sweep_pairs
        (record([g, x], prompt("x", "g"), model="m1", experiment_id="e", condition="start",
                case_id="c", strategy="edge", answer="Fourteen days", outcome=right), "b",
         ns("2026-09-22")),
    ]
    store = Store(duckdb.connect())
    store.write(sdk_jobs(records))
    yield store
    store.close()


def rows(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None
         ) -> list[tuple[Any, ...]]:
    """The rows, floats rounded: the same sums taken in another order may differ in the last bit."""
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row)
            for row in conn.execute(sql, params or {}).fetchall()]


def test_defaults_give_the_rows_of_the_stored_views(small: Store) -> None:
    conn = small.conn
    assert rows(conn, "SELECT count(*) FROM requests") == [(6,)]
    compared = []
    for view in sqlfiles.views():
        if view.name == "helpers":  # macros beside one view: not a single query
            continue
        rendered = sqlfiles.render_view(view)
        name = sqlfiles.view_name(rendered)
        stored = sorted(rows(conn, f"SELECT * FROM {name}"), key=repr)
        assert sorted(rows(conn, sqlfiles.view_body(rendered)), key=repr) == stored, name
        if name in reads.metric_views():
            sql, params = reads.view_query(name)
            assert sorted(rows(conn, sql, params), key=repr) == stored, name
        compared.append((name, len(stored)))
    # every view has rows to compare but attribute_limits (no SDK here drops attributes)
    assert [name for name, n in compared if n == 0] == ["attribute_limits"], compared


def test_scoped_renderings_give_the_rows_of_the_stored_evidence_view(small: Store) -> None:
    conn = small.conn
    live = rows(conn, "SELECT * FROM request_evidence_live ORDER BY request_id")
    assert len(live) == 6
    assert rows(conn, "SELECT * FROM request_evidence ORDER BY request_id") == live
    view = sqlfiles.view_file("request_evidence_live")
    ranged = sqlfiles.view_body(sqlfiles.render_view(view, scope="request_range"))
    assert rows(conn, f"SELECT * FROM ({ranged}) ORDER BY request_id", {"lo": 2, "hi": 4}) == [
        r for r in live if 2 <= r[0] <= 4]
    ids = conn.execute("SELECT request_id, trace_id FROM requests WHERE request_id IN (1, 5)"
                       ).fetchall()
    traced = sqlfiles.view_body(sqlfiles.render_view(view, scope="traces"))
    assert rows(conn, f"SELECT * FROM ({traced}) ORDER BY request_id",
                {"request_ids": [i for i, _ in ids], "trace_ids": [t for _, t in ids]}) == [
        r for r in live if r[0] in (1, 5)]


# --- transactions -----------------------------------------------------------------------------

def test_a_transaction_commits_or_rolls_back_as_a_whole() -> None:
    conn = duckdb.connect()
    run_script(conn, "CREATE TABLE t (v INTEGER); INSERT INTO t VALUES ($v);", {"v": 1})
    with pytest.raises(RuntimeError):
        with transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("midway")
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (3)")
    assert conn.execute("SELECT v FROM t ORDER BY v").fetchall() == [(1,), (3,)]


def test_a_write_that_fails_midway_stores_nothing() -> None:
    store = Store(duckdb.connect())
    (first,) = sdk_jobs([(record([Chunk("g")], prompt("g")), "c", ns("2026-09-24"))])
    store.write([first])
    before = store.counts()
    (job,) = sdk_jobs([(record([Chunk("h")], prompt("h")), "c", ns("2026-09-25"))])
    with pytest.raises(AssertionError):
        # an outcome without a trace id fails after the spans and rows were inserted
        store.write([job, WriteJob(outcomes=[Outcome(correct=True)])])
    assert store.counts() == before and before["requests"] == 1
    store.close()


# --- no SQL in .py files ----------------------------------------------------------------------

SQL = re.compile(
    r"SELECT\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|DELETE\s+FROM\s|UPDATE\s+\w+\s+SET\s"
    r"|CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+)?(TABLE|VIEW|MACRO|INDEX)\s|DROP\s+(TABLE|VIEW)\s"
    r"|BEGIN\s+TRANSACTION|\bATTACH\s|\bSET\s+\w+\s*=")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_sql_statement_is_a_string_in_a_py_file() -> None:
    offenders = []
    for folder in ("schemas", "collector", "midtrace", "dashboard"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if {"build", "__pycache__"} & set(path.parts):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and id(node) not in docstrings and SQL.search(node.value)):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                     f"{node.value.strip()[:60]!r}")
    assert not offenders, "SQL belongs in schemas/sql/ (sqlfiles.query):\n" + "\n".join(offenders)
