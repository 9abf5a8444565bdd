"""The query API's refusals, and the two client backends giving the same frames."""

from __future__ import annotations

from pathlib import Path

import duckdb
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.ipc
import pytest

from midtrace.collector.storage.store import Store, WriteJob
from midtrace.client import (
    FileClient, Filters, HttpClient, QueryError, ReadOnlyError, SourceError, open_client)
from midtrace.collector.query import reads
from midtrace.schemas.model import Chunk, Outcome
from tests.metrics_fixtures import module_collector, ns, prompt, record
from tests.procs import Proc
from tests.sender import Sender

__all__ = ["module_collector"]


@pytest.fixture(scope="module")
def sent(module_collector: Proc) -> list[str]:
    s = Sender(module_collector.url, service="api")
    g = Chunk("g", label="direct_answer", source_id="policy", authority="canonical", cited=True)
    x = Chunk("x", source_id="old", authority="deprecated")
    return [
        s.send(record([g, x], prompt("g", "x"), model="m1", strategy="edge",
                      outcome=Outcome(correct=True)), ns("2026-09-07")),
        s.send(record([x, g], prompt("x", "g", spans=[(0, 500), (500, 520)]), prompt_tokens=20000,
                      model="m2", outcome=Outcome(correct=False)), ns("2026-09-21")),
        s.send(record([g], prompt("g"), model="m1", experiment_id="e", condition="start",
                      case_id="c", answer="Fourteen days"), ns("2026-09-22")),
    ]


def get(proc: Proc, path: str, **params: str) -> httpx.Response:
    return httpx.get(proc.url + path, params=params, timeout=10)


def test_views_list_and_json_shape(module_collector: Proc, sent: list[str]) -> None:
    listed = get(module_collector, "/api/v1/views").json()
    assert [v["name"] for v in listed["views"]] == list(reads.metric_views())
    assert listed["group_by"] == list(reads.GROUP_KEYS)
    body = get(module_collector, "/api/v1/views/accuracy_by_band", service="api",
               group_by="model,week", traffic="all").json()
    assert body["view"] == "accuracy_by_band" and body["group_by"] == ["model", "week"]
    assert body["filters"] == {"service": "api", "traffic": "all"}
    assert body["columns"][:3] == ["model", "week", "band"]
    # 1: g slot 1 of 2, (1 - 0.5) / 2 = 0.25 early; 2: g at [500, 520) of 20000 tokens,
    # 510 / 20000 = 0.0255 early; 3: k=1, 0.5 middle. 2026-09-22 is in the week of Monday 09-21.
    assert {(r["model"], r["week"], r["band"]) for r in body["rows"]} == {
        ("m1", "2026-09-07", "early"), ("m2", "2026-09-21", "early"), ("m1", "2026-09-21", "middle")}


def test_arrow_format(module_collector: Proc, sent: list[str]) -> None:
    response = get(module_collector, "/api/v1/views/failure_taxonomy", format="arrow")
    assert response.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pyarrow.ipc.open_stream(pa.BufferReader(response.content)).read_all()
    assert table.schema.names == ["class", "n", "share"]


@pytest.mark.parametrize(("path", "params", "names"), [
    ("/api/v1/views/no_such_view", {}, "accuracy_by_band"),
    ("/api/v1/views/read_csv('/etc/passwd')", {}, "allowed:"),
    ("/api/v1/views/request_facts", {}, "allowed:"),  # per-request rows are not a metric view
    ("/api/v1/views/overview", {"colour": "red"}, "allowed: since, until"),
    ("/api/v1/views/overview", {"group_by": "week,trace_id"}, "allowed: service"),
    ("/api/v1/views/overview", {"group_by": "1; DROP TABLE requests"}, "allowed: service"),
    ("/api/v1/views/overview", {"since": "last tuesday"}, "RFC 3339"),
    ("/api/v1/views/overview", {"context_bucket": "huge"}, "<4k"),
    ("/api/v1/views/overview", {"format": "csv"}, "json, arrow"),
    ("/api/v1/requests", {"class": "lost"}, "buried"),
    ("/api/v1/requests", {"limit": "0"}, "limit"),
    ("/api/v1/requests", {"limit": "ten"}, "integers"),
    ("/api/v1/requests", {"sql": "select 1"}, "allowed:"),
    ("/api/v1/views/overview", {"since": "9999-12-31T23:59:59-23:59"}, "out of range"),
    ("/api/v1/requests", {"since": "9999-12-31T23:59:59-23:59"}, "out of range"),
    ("/api/v1/requests", {"offset": "9223372036854775808"}, "offset must be between"),
    ("/api/v1/requests", {"limit": "9" * 5000}, "integers"),
])
def test_refusals_are_400_naming_what_is_allowed(module_collector: Proc, path: str,
                                                 params: dict[str, str], names: str) -> None:
    response = get(module_collector, path, **params)
    assert response.status_code == 400, response.text
    assert names in response.json()["error"]


def test_sql_looking_values_are_only_values(module_collector: Proc, sent: list[str]) -> None:
    for value in ("api' OR '1'='1", "x'); DROP TABLE requests; --", "read_csv('/etc/passwd')"):
        body = get(module_collector, "/api/v1/views/overview", service=value).json()
        assert body["rows"][0]["requests"] == 0
        page = get(module_collector, "/api/v1/requests", q=value).json()
        assert page["rows"] == [] and page["total"] == 0
    assert get(module_collector, "/api/v1/views/overview", service="api",
               traffic="all").json()["rows"][0]["requests"] == 3
    # the third request belongs to experiment "e": production traffic, the default, is two
    assert get(module_collector, "/api/v1/views/overview", service="api").json()["rows"][0]["requests"] == 2
    assert get(module_collector, "/api/v1/views/overview", service="api",
               traffic="experiment").json()["rows"][0]["requests"] == 1


def test_unknown_trace_is_404(module_collector: Proc) -> None:
    assert get(module_collector, "/api/v1/traces/" + "ab" * 16).status_code == 404
    assert get(module_collector, "/api/v1/traces/../../etc/passwd").status_code == 404


def test_requests_page_and_trace(module_collector: Proc, sent: list[str]) -> None:
    page = get(module_collector, "/api/v1/requests", service="api", limit="2", traffic="all").json()
    assert page["total"] == 3 and page["limit"] == 2 and page["offset"] == 0
    assert [r["trace_id"] for r in page["rows"]] == [sent[2], sent[1]]  # newest first
    trace = get(module_collector, f"/api/v1/traces/{sent[1]}").json()
    assert [c["chunk_id"] for c in trace["chunks"]] == ["x", "g"]
    assert trace["chunks"][1]["is_decisive"] is True and trace["chunks"][1]["is_cited"] is True
    # g at [500, 520) of 20000 tokens: midpoint 510 / 20000 = 0.0255, early; wrong -> unused
    assert trace["placements"][1]["band"] == "early"
    assert trace["outcome"]["correct"] is False and trace["taxonomy_class"] == "unused"


def test_facets(module_collector: Proc, sent: list[str]) -> None:
    facets = get(module_collector, "/api/v1/facets").json()
    assert facets["model"] == ["m1", "m2"] and facets["strategy"] == ["edge"]
    assert facets["experiment"] == ["e"] and facets["context_bucket"] == ["16k-64k"]
    assert facets["time"]["min"].startswith("2026-09-07")


def test_both_backends_give_the_same_frames(module_collector: Proc, sent: list[str]) -> None:
    """Last in this module: it stops the collector to open its file."""
    http = open_client(url=module_collector.url, fresh=True)
    assert isinstance(http, HttpClient)
    with pytest.raises(SourceError, match="--url"):
        FileClient(module_collector.db_path)  # type: ignore[attr-defined]
    cases = [(name, f, g) for name in reads.metric_views()
             for f, g in ((Filters(), ()), (Filters(service="api"), ("week", "model")),
                          (Filters(traffic="all"), ("experiment",)),
                          (Filters(model="m1", context_bucket="<4k"), ("strategy",)))]
    over_http = [http.view(name, f, g) for name, f, g in cases]
    requests_http, total_http = http.requests_page(Filters(service="api", traffic="all"), limit=2,
                                                   offset=1)
    trace_http = http.trace(sent[0])
    facets_http = http.facets()
    settings_http = http.settings()
    help_text = get(module_collector, "/api/v1/settings").json()["help"]
    http.close()
    module_collector.stop()

    file = open_client(db=module_collector.db_path)  # type: ignore[attr-defined]
    assert file.read_only
    for (name, f, g), expected in zip(cases, over_http):
        pd.testing.assert_frame_equal(file.view(name, f, g), expected, obj=f"{name} {f} {g}")
    page, total = file.requests_page(Filters(service="api", traffic="all"), limit=2, offset=1)
    pd.testing.assert_frame_equal(page, requests_http)
    assert total == total_http == 3 and len(page) == 2
    assert str(page["time"].dt.tz) == "UTC"  # whatever the machine's time zone
    assert file.trace(sent[0]) == trace_http
    assert file.facets() == facets_http
    assert file.settings() == settings_http
    assert settings_http["min_n"] == 30 and settings_http["band_early_end"] == pytest.approx(1 / 3)
    assert set(help_text) == set(settings_http) and "early band" in help_text["band_early_end"]
    with pytest.raises(ReadOnlyError, match="grade through a running collector"):
        file.post_outcome({"trace_id": sent[0], "correct": True})
    with pytest.raises(QueryError, match="allowed"):
        file.view("nope")
    # the table the writer kept per trace equals its definition computed whole
    assert isinstance(file, FileClient)
    drift = file.conn.execute("SELECT count(*) FROM (SELECT * FROM request_evidence EXCEPT "
                              "SELECT * FROM request_evidence_live)").fetchone()
    assert drift == (0,)
    file.close()

    # thresholds live in the settings table and apply at once: sent[0]'s g sits at 0.25
    # ((1 - 0.5) / 2), early under 1/3, middle once early ends at 0.2
    conn = duckdb.connect(str(module_collector.db_path))  # type: ignore[attr-defined]
    conn.execute("UPDATE settings SET value = 0.2 WHERE key = 'band_early_end'")
    conn.close()
    with FileClient(module_collector.db_path) as again:  # type: ignore[attr-defined]
        trace = again.trace(sent[0])
        assert trace is not None and trace["request"]["decisive_band"] == "middle"
        assert trace["placements"][0]["band"] == "middle"
        assert again.settings()["band_early_end"] == 0.2


def test_external_access_off_leaves_the_writer_working(tmp_path: Path) -> None:
    conn = duckdb.connect(str(tmp_path / "t.duckdb"))
    store = Store(conn)
    conn.execute("SET enable_external_access = false")
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    with pytest.raises(duckdb.Error):
        conn.execute(f"SELECT * FROM read_csv('{secret}')").fetchall()
    from midtrace.collector.receive.bodies import outcome_from_json

    store.write([WriteJob(outcomes=[outcome_from_json({"trace_id": "ab" * 16, "correct": True})])])
    assert store.counts()["outcomes"] == 1
    store.close()


def test_file_backend_on_an_empty_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.duckdb"
    Store.open(path).close()
    with FileClient(path) as client:
        assert client.view("overview").iloc[0]["requests"] == 0
        for name in reads.metric_views():
            client.view(name, Filters(), ["week"])  # every view runs on no data
        assert client.requests().empty and client.trace("ab" * 16) is None
        assert client.facets()["time"] == {"min": None, "max": None}
    with pytest.raises(SourceError, match="does not exist"):
        FileClient(tmp_path / "missing.duckdb")
