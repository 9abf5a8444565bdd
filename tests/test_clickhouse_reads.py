"""The reads over a ClickHouse store give what they give over DuckDB.

The bundled samples in both engines (tests/clickhouse_samples.py): each run_* function of the
read engine (collector/query/reads.py), the client, `midtrace report`, `midtrace gate` and the
dashboard's pages are run on the DuckDB file and on the chdb database, and their answers are
compared: rows in their order where the query orders them, floats to a relative 1e-9, NULL
equal to NULL, a NULL list (DuckDB) equal to an empty one (ClickHouse has no NULL array).
"""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from midtrace import supervise as launch
from midtrace.cli import cli
from midtrace.client import ClickHouseClient, ReadOnlyError, SourceError, open_client
from midtrace.collector.query import reads
from midtrace.collector.query.reads import Filters
from midtrace.collector.settings import ClickHouseURL, parse_store
from midtrace.collector.storage import clickhouse
from tests.clickhouse_samples import rows_of, same

# A trace graded twice (two outcomes, the merged one's lists partly unset), one whose outcome
# sets an empty recalled-constraints list ("none recalled"), one whose answer follows chunks
# (answer_sources), a sweep's, LangChain's (the only samples whose spans keep the prompt text)
# and one that is not there.
TRACES = {
    "graded twice": "f49438ed341b387d0cf62e7b92df4f26",
    "graded twice, constraints set": "d69870dca2cf8a5529d3301caffb63f4",
    "none recalled": "df3ce79a80ff421632aaee66aa5e0224",
    "with answer sources": "e3272ba318dbf193a5a0d714ffb880e2",
    "a sweep's": "f07659f90d33d0808f623a596b588ccf",
    "LangChain's, with its prompt": "afadf7ebc721e27692aedb42afff7815",
    "missing": "0" * 32,
}
SINCE, UNTIL = reads.parse_time("2026-11-02"), reads.parse_time("2026-11-16")
# run_requests: (filters, search, class, limit, offset)
REQUESTS: dict[str, tuple[Filters, str | None, str | None, int, int]] = {
    "first page": (Filters(), None, None, 50, 0),
    "time, service and model, second page": (
        Filters(since=SINCE, until=UNTIL, service="support-assistant", model="gpt-4.1-mini"),
        None, None, 40, 40),
    "search over all traffic": (Filters(traffic="all"), "refund", None, 200, 0),
    "buried by a person's grades": (Filters(grader="person"), None, "buried", 100, 0),
    "an experiment's, bucket and strategy": (
        Filters(experiment="sweep-2026-11", strategy="edge", context_bucket="<4k"),
        None, None, 1000, 5),
    "ungraded, judge's grades, template": (
        Filters(grader="judge", template="support-v2"), None, "ungraded", 20, 10),
    "past the last page": (Filters(), None, None, 10, 1_000_000),
}
REQUEST_TEXTS: dict[str, tuple[Filters, int, int]] = {
    "first page": (Filters(), 30, 0),
    "all traffic, judge's grades, a later page": (Filters(traffic="all", grader="judge"), 100, 50),
    "an experiment's": (Filters(experiment="sweep-2026-11"), 50, 0),
}
VIEW_FILTERS: dict[str, tuple[Filters, tuple[str, ...]]] = {
    "all traffic by model and week": (Filters(traffic="all"), ("model", "week")),
    "a fortnight of one service by strategy": (
        Filters(since=SINCE, until=UNTIL, service="support-assistant"), ("strategy",)),
}


@pytest.fixture(scope="module")
def stores(sample_stores: tuple[Path, ClickHouseURL]
           ) -> Iterator[tuple[reads.Reader, reads.Reader]]:
    """Readers of the samples: (DuckDB, ClickHouse)."""
    db, url = sample_stores
    duck = duckdb.connect(str(db), read_only=True)
    yield reads.read_cursor(duck), reads.reader(clickhouse.connect(url))
    duck.close()


def both(stores: tuple[reads.Reader, reads.Reader], fn: Callable[[Any], Any]) -> tuple[Any, Any]:
    duck, ch = stores
    assert (duck.engine, ch.engine) == ("duckdb", "clickhouse")
    return fn(duck), fn(ch)


def assert_same_table(expected: Any, got: Any, ordered: bool) -> None:
    assert got.column_names == expected.column_names
    expected_rows, got_rows = rows_of(expected, ordered), rows_of(got, ordered)
    assert len(got_rows) == len(expected_rows)
    for i, (e, g) in enumerate(zip(expected_rows, got_rows)):
        assert same(e, g), f"row {i}:\n DuckDB     {e}\n ClickHouse {g}"


@pytest.mark.parametrize("view", sorted(reads.metric_views()))
@pytest.mark.parametrize("variant", sorted(VIEW_FILTERS))
def test_run_view(stores: tuple[reads.Reader, reads.Reader], view: str, variant: str) -> None:
    filters, group_by = VIEW_FILTERS[variant]
    expected, got = both(stores, lambda db: reads.run_view(db, view, filters, group_by))
    assert_same_table(expected, got, ordered=False)


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_run_requests(stores: tuple[reads.Reader, reads.Reader], case: str) -> None:
    filters, search, taxonomy_class, limit, offset = REQUESTS[case]
    (expected, total), (got, got_total) = both(stores, lambda db: reads.run_requests(
        db, filters, search, taxonomy_class, limit, offset))
    assert got_total == total
    assert total > 0
    assert expected.num_rows == (0 if case == "past the last page" else min(limit, total - offset))
    assert_same_table(expected, got, ordered=True)


@pytest.mark.parametrize("case", sorted(REQUEST_TEXTS))
def test_run_request_texts(stores: tuple[reads.Reader, reads.Reader], case: str) -> None:
    filters, limit, offset = REQUEST_TEXTS[case]
    expected, got = both(stores, lambda db: reads.run_request_texts(db, filters, limit, offset))
    assert expected.num_rows == limit
    assert any(row["chunks"] for row in expected.to_pylist())
    assert_same_table(expected, got, ordered=True)


@pytest.mark.parametrize("case", sorted(TRACES))
def test_run_trace(stores: tuple[reads.Reader, reads.Reader], case: str) -> None:
    expected, got = both(stores, lambda db: reads.run_trace(db, TRACES[case]))
    if case == "missing":
        assert expected is None and got is None
        return
    assert expected["chunks"] and expected["placements"]
    if case.startswith("graded twice"):
        assert len(expected["outcomes"]) == 2
    if case == "none recalled":
        assert [o["recalled_constraints"] for o in expected["outcomes"]] == [[]]
    if case == "with answer sources":
        assert expected["answer_sources"]
    # a list set to [] by an outcome stays [], and one it left unset is NULL on both engines
    for e, g in zip(expected["outcomes"], got["outcomes"], strict=True):
        assert {k: v for k, v in g.items() if k.endswith("constraints")} == \
            {k: v for k, v in e.items() if k.endswith("constraints")}
    assert expected.keys() == got.keys()
    for key in expected:
        assert same(expected[key], got[key]), (key, expected[key], got[key])


def test_no_sample_is_a_replay(stores: tuple[reads.Reader, reads.Reader]) -> None:
    """The replays of a trace are read on ClickHouse too (run_trace runs replays_of_trace), but
    the samples hold none to compare: this fails when they do, to add a replayed trace above."""
    for db in stores:
        assert all(not reads.run_trace(db, t)["replays"] for t in TRACES.values()
                   if t != TRACES["missing"])


def test_run_settings_and_facets(stores: tuple[reads.Reader, reads.Reader]) -> None:
    expected, got = both(stores, reads.run_settings)
    assert expected == got and expected["settings"]["min_n"] > 0
    expected, got = both(stores, reads.run_facets)
    assert expected == got
    assert expected["requests"] > 1000 and len(expected["model"]) > 1


@pytest.mark.parametrize("case", sorted(TRACES))
def test_run_trace_prompts(stores: tuple[reads.Reader, reads.Reader], case: str) -> None:
    expected, got = both(stores, lambda db: reads.run_trace_prompts(db, TRACES[case]))
    assert expected == got
    assert bool(expected) == (case == "LangChain's, with its prompt")


def test_the_query_api_answers_from_a_clickhouse_store_as_from_duckdb(
        sample_stores: tuple[Path, ClickHouseURL]) -> None:
    """The API's routes over a ClickHouse store's connection give the JSON they give over a
    DuckDB connection."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from midtrace.collector.query.api import query_routes

    db, url = sample_stores
    duck, ch = duckdb.connect(str(db), read_only=True), clickhouse.connect(url)
    graded, prompted = TRACES["graded twice"], TRACES["LangChain's, with its prompt"]
    paths = ["/api/v1/views/overview?group_by=model", "/api/v1/views/accuracy_by_band?traffic=all",
             "/api/v1/requests?q=refund&limit=20&offset=5", "/api/v1/request-texts?limit=10",
             f"/api/v1/traces/{graded}", f"/api/v1/prompts/{prompted}", "/api/v1/facets",
             "/api/v1/settings", f"/api/v1/traces/{TRACES['missing']}"]
    try:
        answers = []
        for conn in (duck, ch):
            with TestClient(Starlette(routes=query_routes(lambda c=conn: c))) as http:
                answers.append([(r.status_code, r.json()) for r in map(http.get, paths)])
    finally:
        duck.close()
    for path, expected, got in zip(paths, *answers, strict=True):
        assert expected[0] == (404 if path.endswith(TRACES["missing"]) else 200), path
        assert same(expected, got), path


def test_a_clickhouse_client_reads_as_a_file_client_and_writes_nothing(
        sample_stores: tuple[Path, ClickHouseURL]) -> None:
    db, url = sample_stores
    file, ch = open_client(db=db), open_client(db=str(url))
    try:
        assert isinstance(ch, ClickHouseClient) and ch.read_only
        assert ch.views() == file.views()
        assert ch.settings() == file.settings()
        frame, total = ch.requests_page(Filters(), limit=5)
        assert (total, list(frame["trace_id"])) == (file.requests_page(Filters(), limit=5)[1],
                                                    list(file.requests(Filters(), limit=5)["trace_id"]))
        overview, expected = ch.view("overview"), file.view("overview")
        assert list(overview.columns) == list(expected.columns)
        # counts signed, as DuckDB's: a difference of two may be negative in the frame
        assert list(overview.dtypes) == list(expected.dtypes)
        assert (overview["wrong"] - overview["requests"]).iloc[0] < 0
        assert overview.iloc[0]["requests"] == expected.iloc[0]["requests"] > 0
        with pytest.raises(ReadOnlyError, match="read-only; grade through a running collector"):
            ch.post_outcome({"trace_id": TRACES["graded twice"], "correct": True})
    finally:
        file.close()
        ch.close()


def test_an_empty_clickhouse_store_reads_as_an_empty_duckdb_file(
        chdb_database: ClickHouseURL, tmp_path: Path) -> None:
    from midtrace.collector.storage.store import Store

    Store.open(tmp_path / "empty.duckdb").close()
    duck = duckdb.connect(str(tmp_path / "empty.duckdb"), read_only=True)
    conn = clickhouse.connect(chdb_database)
    clickhouse.create_schema(conn)
    try:
        stores = (reads.read_cursor(duck), reads.reader(conn))
        for fn in (reads.run_facets, reads.run_settings, lambda db: reads.run_trace(db, "0" * 32),
                   lambda db: reads.run_requests(db)[1],
                   lambda db: reads.run_view(db, "overview").to_pylist(),
                   lambda db: reads.run_request_texts(db).num_rows):
            expected, got = both(stores, fn)
            assert same(expected, got), (expected, got)
        assert open_client(db=chdb_database).facets()["requests"] == 0
    finally:
        duck.close()


def test_a_database_without_midtrace_tables_is_not_a_store(chdb_database: ClickHouseURL) -> None:
    with pytest.raises(SourceError, match=r"is not a midtrace store: its database t_\w+ has no "
                                          r"table or view requests \(nor \d+ more"):
        open_client(db=chdb_database)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_does_not_answer_is_one_line_without_the_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIDTRACE_CLICKHOUSE_PASSWORD", "pw-not-to-show")
    store = f"clickhouse://bob@127.0.0.1:{_free_port()}/traces"
    for args in (["report", "--store", store], ["gate", "--store", store]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 3, result.output
        assert result.output.startswith(f"midtrace: cannot reach {store}: ")
        assert result.output.count("\n") == 1 and "Traceback" not in result.output
        assert "pw-not-to-show" not in result.output


def test_without_clickhouse_connect_a_clickhouse_store_says_what_to_install(
        sample_stores: tuple[Path, ClickHouseURL], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)  # import fails as if missing
    result = CliRunner().invoke(cli, ["report", "--store", str(sample_stores[1])])
    assert result.exit_code == 3
    assert result.output == ("midtrace: a ClickHouse store needs clickhouse-connect: pip install "
                             "'midtrace[clickhouse]'\n")


def test_report_reads_a_clickhouse_store_as_a_duckdb_file(
        sample_stores: tuple[Path, ClickHouseURL]) -> None:
    """The Markdown report is the same but for the time it was made; the JSON one too, but
    that a sum of integers is a float on DuckDB (a 128-bit decimal) and an integer on
    ClickHouse, and floats agree to a relative 1e-9 (averages summed in another order)."""
    db, url = sample_stores
    outputs = {}
    for fmt in ("md", "json"):
        for store in (str(db), str(url)):
            result = CliRunner().invoke(cli, ["report", "--store", store, "--format", fmt,
                                              "--group-by", "model"])
            assert result.exit_code == 0, result.output
            outputs[fmt, store] = result.output
    generated = re.compile(r"generated[_ a-z\"]*:? ?\"?[0-9T:.Z-]+")
    md_duck, md_ch = (generated.sub("generated", outputs["md", s]) for s in (str(db), str(url)))
    assert md_ch == md_duck and "3,023 requests" in md_duck
    json_duck, json_ch = (json.loads(outputs["json", s]) for s in (str(db), str(url)))
    json_duck.pop("generated_at"), json_ch.pop("generated_at")
    assert same(json_duck, json_ch)


@pytest.mark.parametrize("args", [[], ["--min-accuracy", "0.4", "--max-buried-rate", "off",
                                       "--max-sensitivity-delta", "off"]],
                         ids=["fails", "passes"])
def test_gate_judges_a_clickhouse_store_as_a_duckdb_file(
        sample_stores: tuple[Path, ClickHouseURL], args: list[str]) -> None:
    db, url = sample_stores
    duck = CliRunner().invoke(cli, ["gate", "--store", str(db), *args])
    ch = CliRunner().invoke(cli, ["gate", "--store", str(url), *args])
    assert (ch.exit_code, ch.output) == (duck.exit_code, duck.output)
    assert duck.exit_code == (1 if not args else 0), duck.output


def test_the_dashboard_refuses_a_clickhouse_store_it_cannot_read(tmp_path: Path) -> None:
    """Checked in a child process (a chdb folder opens in one process only), before the
    dashboard starts: one line, exit 3."""
    result = CliRunner().invoke(cli, ["dashboard", "--store", f"chdb://{tmp_path}/empty",
                                      "--port", "0"])
    assert result.exit_code == 3, result.output
    assert result.output == (f"midtrace: chdb://{tmp_path}/empty is not a midtrace store: its "
                             "database default has no table or view requests (nor "
                             f"{len(reads.metric_views()) + 5} more of midtrace's)\n")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for key in (launch.ENV_URL, launch.ENV_DB, launch.ENV_TOKEN, launch.ENV_REQUIRE_TOKEN):
        monkeypatch.delenv(key, raising=False)
    yield monkeypatch


def _page(store: str, env: pytest.MonkeyPatch, page: str | None = None,
          trace_id: str | None = None) -> list[tuple[str, Any]]:
    """What the app shows over ``store`` (the store's own name left out): every metric,
    heading, text, caption, table and chart, in page order."""
    env.setenv(launch.ENV_DB, store)
    at = AppTest.from_file(str(launch.app_path()), default_timeout=120)
    at.run()
    if page is not None:
        at.switch_page(f"app_pages/{page}.py").run()
    if trace_id is not None:
        at.text_input(key="trace_id").input(trace_id).run()
    assert not at.exception, at.exception
    named = store if "://" in store else Path(store).name  # as the sidebar names it
    shown: list[tuple[str, Any]] = []
    for kind in ("metric", "subheader", "text", "caption", "markdown", "warning", "info"):
        for element in at.get(kind):
            value = (element.label, element.value) if kind == "metric" else element.value
            if named not in str(value):
                shown.append((kind, value))
    shown += [("table", frame.value.to_dict("list")) for frame in at.dataframe]
    shown += [("chart", json.loads(chart.proto.spec)["data"]) for chart in at.get("plotly_chart")]
    return shown


def test_the_overview_shows_the_same_figures_over_clickhouse(
        env: pytest.MonkeyPatch, sample_stores: tuple[Path, ClickHouseURL]) -> None:
    db, url = sample_stores
    expected, got = _page(str(db), env), _page(str(url), env)
    assert ("subheader", "Findings") in expected
    assert any(kind == "metric" and label == "Accuracy" for kind, (label, *_) in
               (s for s in expected if s[0] == "metric"))
    assert [kind for kind, _ in got] == [kind for kind, _ in expected]
    for e, g in zip(expected, got):
        assert same(e, g), f"\n DuckDB     {e}\n ClickHouse {g}"


def test_the_inspector_shows_the_same_trace_over_clickhouse(
        env: pytest.MonkeyPatch, sample_stores: tuple[Path, ClickHouseURL]) -> None:
    db, url = sample_stores
    trace_id = TRACES["graded twice"]
    expected = _page(str(db), env, "inspector", trace_id)
    got = _page(str(url), env, "inspector", trace_id)
    assert any(kind == "table" and "chunk_id" in value for kind, value in expected)
    assert [kind for kind, _ in got] == [kind for kind, _ in expected]
    for e, g in zip(expected, got):
        assert same(e, g), f"\n DuckDB     {e}\n ClickHouse {g}"


def test_a_chdb_url_round_trips_through_the_dashboards_environment(
        sample_stores: tuple[Path, ClickHouseURL]) -> None:
    url = sample_stores[1]
    assert parse_store(str(url)) == url
    settings = launch.DashboardSettings(db=str(url))
    settings.check()
    assert launch.streamlit_env(settings)[launch.ENV_DB] == str(url)
