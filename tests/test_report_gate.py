"""`midtrace report` and `midtrace gate` through the CLI, reading a real collector and its file."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from midtrace import svg
from midtrace.cli import cli
from midtrace.schemas.model import Chunk, Outcome
from tests.metrics_fixtures import module_collector, ns, prompt, record, wilson
from tests.procs import Proc
from tests.sender import Sender

__all__ = ["module_collector"]


@pytest.fixture(scope="module")
def graded(module_collector: Proc) -> list[str]:
    """Four graded requests of service "gate": three right with g early (slot 1 of 3),
    one wrong with g in the middle (slot 2 of 3): accuracy 3/4, buried rate 1/1.
    The wrong one cites a source whose id looks like HTML."""
    s = Sender(module_collector.url, service="gate")
    g = Chunk("g", label="direct_answer", source_id="policy")
    x, y = Chunk("x"), Chunk("y", source_id="<b>old</b>", authority="deprecated")
    right = [s.send(record([g, x, y], prompt("g", "x", "y"), model="m1",
                           outcome=Outcome(correct=True)), ns(day))
             for day in ("2026-10-05", "2026-10-06", "2026-10-13")]
    wrong = s.send(record([g, x, replace(y, cited=True)], prompt("x", "g", "y"), model="m2",
                          outcome=Outcome(correct=False)), ns("2026-10-14"))
    return [*right, wrong]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_report_json_follows_the_schema(module_collector: Proc, graded: list[str]) -> None:
    code, out, _ = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["schema_version"] == "1" and report["filters"] == {"service": "gate"}
    assert report["requests"] == 4 and report["group_by"] == []
    bands = {r["band"]: r for r in report["accuracy_by_band"]}
    assert bands["early"]["n"] == 3 and bands["early"]["accuracy"] == 1.0
    assert bands["middle"]["n"] == 1 and bands["middle"]["correct"] == 0
    lo, hi = wilson(3, 3)
    assert bands["early"]["ci_low"] == pytest.approx(lo) and bands["early"]["ci_high"] == pytest.approx(hi)
    assert {(r["k"], r["slot"], r["n"]) for r in report["accuracy_by_slot"]} == {(3, 1, 3), (3, 2, 1)}
    assert {r["class"]: r["n"] for r in report["taxonomy"]} == {"answered": 3, "buried": 1}
    assert all(r["group"] == {} for r in report["accuracy_by_band"])
    for key in ("citations", "constraint_recall", "sweep", "weekly", "citation_drift"):
        assert isinstance(report[key], list)


def test_report_grouped_by_model_and_week(module_collector: Proc, graded: list[str]) -> None:
    code, out, _ = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--group-by", "model,week", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["group_by"] == ["model", "week"]
    groups = {(r["group"]["model"], r["group"]["week"], r["band"]) for r in report["accuracy_by_band"]}
    # 10-05 and 10-06 share the week of Monday 10-05; 10-13 and 10-14 that of 10-12
    assert groups == {("m1", "2026-10-05", "early"), ("m1", "2026-10-12", "early"),
                      ("m2", "2026-10-12", "middle")}
    # the weekly section is already by week: its group holds only the model
    assert all(set(r["group"]) == {"model"} for r in report["weekly"])


def test_report_html_has_inline_svg_and_escapes_text(module_collector: Proc, graded: list[str],
                                                     tmp_path: Path) -> None:
    out_file = tmp_path / "report.html"
    code, _, err = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--format", "html", "--output", str(out_file))
    assert code == 0 and "wrote" in err
    html = out_file.read_text()
    assert html.count("<svg") >= 4 and "<script" not in html and "http" not in html.split("<svg")[0]
    assert "&lt;b&gt;old&lt;/b&gt;" in html and "<b>old</b>" not in html
    for chart in re.findall(r"<svg.*?</svg>", html, re.S):
        ElementTree.fromstring(chart)  # each chart is well-formed SVG


def test_report_markdown(module_collector: Proc, graded: list[str]) -> None:
    code, out, _ = run("report", "--url", module_collector.url, "--filter", "service=gate")
    assert code == 0
    assert out.startswith("# midtrace weekly review: week of 2026-10-12")
    # findings first, then the incidents, the weeks, and every table in a collapsed appendix
    order = [out.index(h) for h in ("## Findings", "## Incidents of the week", "## Week by week",
                                    "<details>", "### Accuracy by decisive-evidence band")]
    assert order == sorted(order)
    assert "\\<b>" not in out and "<b>old</b>" not in out and "| middle |" in out
    assert "| Decisive evidence band | Requests | Graded | Correct | Accuracy |" in out
    assert "| 75.0% |" in out  # accuracy as a percentage


def test_gate_exit_codes(module_collector: Proc, graded: list[str], tmp_path: Path) -> None:
    url = ["--url", module_collector.url, "--filter", "service=gate"]
    # 3/4 = 0.75 >= 0.7 passes; buried and sensitivity off
    code, out, _ = run("gate", *url, "--min-n", "3", "--min-accuracy", "0.7",
                       "--max-buried-rate", "off", "--max-sensitivity-delta", "off")
    assert code == 0, out
    assert "PASS     min_accuracy" in out and "0.75" in out and out.strip().endswith("gate: pass")
    # defaults: accuracy 0.75 < 0.8, buried rate 1/1 > 0.1, no sweep data
    code, out, _ = run("gate", *url, "--min-n", "3")
    assert code == 1
    assert "FAIL     min_accuracy" in out and "FAIL     max_buried_rate" in out
    assert "NO DATA  max_sensitivity_delta" in out
    # 4 graded < 50: no data to judge
    code, out, _ = run("gate", *url, "--max-sensitivity-delta", "off")
    assert code == 1 and "no data to judge" in out
    # usage errors: exit 2
    assert run("gate", *url, "--filter", "colour=red")[0] == 2
    assert run("gate", *url, "--max-buried-rate", "lots")[0] == 2
    assert run("gate", "--url", module_collector.url, "--db", str(tmp_path / "x.duckdb"))[0] == 2
    assert run("gate")[0] == 2
    assert run("report", *url, "--group-by", "colour")[0] == 2
    # the source cannot be read: exit 3
    code, _, err = run("gate", "--url", "http://127.0.0.1:9", "--min-n", "0")
    assert code == 3 and "cannot reach" in err
    code, _, err = run("gate", "--db", str(tmp_path / "missing.duckdb"))
    assert code == 3 and "does not exist" in err
    code, _, err = run("gate", "--db", str(module_collector.db_path))  # type: ignore[attr-defined]
    assert code == 3 and "--url" in err  # the collector holds the file


class Webhook:
    """A real HTTP server on a free loopback port that records each POST and answers
    ``status``: a stand-in for a chat's incoming webhook."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.status = 200
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                hook.bodies.append({"content_type": self.headers.get("Content-Type"),
                                    "json": json.loads(self.rfile.read(length))})
                self.send_response(hook.status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if hook.status < 300 else b"invalid_token")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/secret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def test_report_posts_its_findings_to_a_webhook(module_collector: Proc, graded: list[str],
                                               webhook: Webhook, tmp_path: Path) -> None:
    out_file = tmp_path / "review.md"
    code, _, err = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--output", str(out_file), "--post", webhook.url)
    assert code == 0, err
    assert "posted to the webhook (HTTP 200)" in err and out_file.exists()
    (body,) = webhook.bodies
    assert body["content_type"] == "application/json" and set(body["json"]) == {"text"}
    text = body["json"]["text"]
    assert text.startswith("*midtrace weekly review: week of 2026-10-12*")
    assert "Nothing to compare" in text or "Nothing moved" in text  # four requests: no finding


def test_a_failed_post_is_an_error_with_its_status(module_collector: Proc, graded: list[str],
                                                  webhook: Webhook, tmp_path: Path) -> None:
    webhook.status = 403
    code, _, err = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--output", str(tmp_path / "r.md"), "--post", webhook.url)
    assert code == 4 and "HTTP 403" in err and "invalid_token" in err
    assert "secret" not in err  # the webhook's path is a credential: never echoed
    webhook.status = 500
    code, out, err = run("gate", "--url", module_collector.url, "--filter", "service=gate",
                         "--min-n", "3", "--post", webhook.url)
    assert code == 4 and "HTTP 500" in err and "gate: FAIL" in out
    # nobody listening: an error too, never silence
    closed = Webhook()
    closed.close()
    code, _, err = run("gate", "--url", module_collector.url, "--filter", "service=gate",
                       "--post", closed.url)
    assert code == 4 and "cannot reach the webhook at http://127.0.0.1:" in err
    assert run("gate", "--url", module_collector.url, "--post", "ftp://example")[0] == 2


def test_gate_posts_its_verdict(module_collector: Proc, graded: list[str],
                                webhook: Webhook) -> None:
    code, _, err = run("gate", "--url", module_collector.url, "--filter", "service=gate",
                       "--min-n", "3", "--min-accuracy", "0.7", "--max-buried-rate", "off",
                       "--max-sensitivity-delta", "off", "--post", webhook.url)
    assert code == 0, err
    text = webhook.bodies[0]["json"]["text"]
    assert text.splitlines()[0] == "*midtrace gate: pass* (service=gate)"
    assert "PASS     min_accuracy" in text


def test_incidents_link_to_the_inspector(module_collector: Proc, graded: list[str]) -> None:
    code, out, _ = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--format", "json", "--dashboard-url", "http://dash.example:8501/")
    assert code == 0
    report = json.loads(out)
    (question,) = report["incidents"]
    assert question["requests"] == 1 and question["classes"] == {"buried": 1, "unused": 0}
    (trace,) = question["traces"]
    assert trace["trace_id"] == graded[3] and trace["class"] == "buried"
    assert trace["inspector_url"] == f"http://dash.example:8501/inspector?trace_id={graded[3]}"
    assert [(d["chunk_id"], d["slot"], d["band"]) for d in trace["decisive"]] == [("g", 2, "middle")]
    assert [(c["chunk_id"], c["source_id"], c["authority"]) for c in trace["cited"]] == [
        ("y", "<b>old</b>", "deprecated")]
    code, out, _ = run("report", "--url", module_collector.url, "--filter", "service=gate",
                       "--format", "html", "--dashboard-url", "http://dash.example:8501")
    assert f'<a href="http://dash.example:8501/inspector?trace_id={graded[3]}">' in out
    assert run("report", "--url", module_collector.url, "--dashboard-url", "javascript:x")[0] == 2


def test_gate_and_report_from_the_file(module_collector: Proc, graded: list[str]) -> None:
    """Last in this module: stops the collector to read its file."""
    _, over_http, _ = run("report", "--url", module_collector.url, "--filter", "service=gate",
                          "--format", "json")
    module_collector.stop()
    db = str(module_collector.db_path)  # type: ignore[attr-defined]
    code, from_file, _ = run("report", "--db", db, "--filter", "service=gate", "--format", "json")
    assert code == 0
    a, b = json.loads(over_http), json.loads(from_file)
    a.pop("generated_at"), b.pop("generated_at")
    assert a == b
    code, out, _ = run("gate", "--db", db, "--filter", "service=gate", "--min-n", "4",
                       "--min-accuracy", "0.75", "--max-buried-rate", "1",
                       "--max-sensitivity-delta", "off")
    assert code == 0, out


def test_svg_charts_are_plain_functions() -> None:
    bars = svg.bar_chart("t <x>", ["early", "middle"], [0.9, 0.5], [0.8, 0.3], [1.0, 0.7],
                         ["n=10", "n=4"], y_max=1.0)
    assert bars.startswith("<svg") and bars.count("<rect") == 2 and "t &lt;x&gt;" in bars
    line = svg.line_chart("weeks", ["a", "b", "c"], {"s": [0.5, None, 0.7]}, y_max=1.0)
    assert line.count("<polyline") == 2  # the gap breaks the line
    assert "no data" in svg.bar_chart("empty", [], [])
