"""The bundled sample traces, ingested through the CLI, show in the report what was planted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from midtrace.client import Filters, open_client
from tests.sample_db import samples_duckdb

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield samples_duckdb(tmp_path_factory, tmp_path_factory.mktemp("samples") / "samples.duckdb")


def report(db: Path, *args: str) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-m", "midtrace", "report", "--db", str(db),
                          "--format", "json", *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_every_planted_taxonomy_class_is_reported(sample_db: Path) -> None:
    planted = MANIFEST["support"]["taxonomy"]
    got = report(sample_db, "--filter", "service=" + MANIFEST["support"]["service"])
    assert {row["class"]: row["n"] for row in got["taxonomy"]} == planted
    assert got["requests"] == MANIFEST["support"]["requests"]


def test_the_sweep_shows_a_u_shaped_slot_curve(sample_db: Path) -> None:
    got = report(sample_db, "--filter", "experiment=" + MANIFEST["sweep"]["experiment_id"],
                 "--filter", "strategy=score_order")
    by_slot = {row["slot"]: row["accuracy"] for row in got["accuracy_by_slot"] if row["k"] == 10}
    assert sorted(by_slot) == list(range(1, 11))
    edges = (by_slot[1] + by_slot[10]) / 2
    middle = sum(by_slot[s] for s in (4, 5, 6, 7)) / 4
    assert edges - middle > 0.1, by_slot


def test_the_template_change_in_week_3_buries_more_evidence(sample_db: Path) -> None:
    got = report(sample_db, "--filter", "service=" + MANIFEST["support"]["service"],
                 "--group-by", "week,template")
    share = {(r["group"]["week"], r["group"]["template"]): r["share"]
             for r in got["taxonomy"] if r["class"] == "buried"}
    weeks = sorted({week for week, _ in share})
    assert len(weeks) == 4
    assert all(template == "support-v1" for week, template in share if week in weeks[:2])
    v1 = [s for (w, t), s in share.items() if t == "support-v1"]
    v2 = [s for (w, t), s in share.items() if t == "support-v2"]
    assert v2 and min(v2) > 2 * max(v1), share


@pytest.mark.parametrize("incident,question_text", [
    ("refund", "refund window"), ("audit", "audit log"), ("deprecated", "rate limit")])
def test_incident_traces_are_found_by_question_text(sample_db: Path, incident: str,
                                                    question_text: str) -> None:
    trace_id = MANIFEST["support"]["incidents"][incident]
    with open_client(db=sample_db) as client:
        found = client.requests(Filters(), search=question_text, limit=500)
        assert trace_id in set(found["trace_id"])
        detail = client.trace(trace_id)
    assert detail is not None and detail["request"]["question"]
    assert question_text.lower() in detail["request"]["question"].lower()


def test_the_report_counts_production_traffic_unless_asked(sample_db: Path) -> None:
    everything = report(sample_db, "--filter", "traffic=all")["requests"]
    production = report(sample_db)["requests"]
    sweep = MANIFEST["sweep"]["requests"]
    assert everything - production == sweep
    assert report(sample_db, "--filter", "experiment=(none)")["requests"] == production
    assert report(sample_db, "--filter", "traffic=experiment")["requests"] == sweep


def test_every_sample_lies_in_the_four_sample_weeks(sample_db: Path) -> None:
    # The demo's Overview opens on the newest week of data: it must be a week with graded
    # support traffic, not the day a sample happened to be recorded.
    with open_client(db=sample_db) as client:
        span = client.facets()["time"]
    assert span["min"] >= "2026-10-26" and span["max"] < "2026-11-23", span


def test_the_week_3_template_regression_leads_the_findings(sample_db: Path) -> None:
    service = "service=" + MANIFEST["support"]["service"]
    got = report(sample_db, "--filter", service, "--until", "2026-11-16")
    assert got["review"]["week"] == "2026-11-09" and got["review"]["compared_with"] == "2026-11-02"
    findings = got["findings"]
    assert 1 <= len(findings) <= 5
    assert any(f["slice"] == {"template": "support-v2"} and f["new_slice"] for f in findings[:2])
    assert [abs(f["z"]) for f in findings] == sorted((abs(f["z"]) for f in findings), reverse=True)
    for f in findings:
        assert f["p_value"] < 0.05 and f["text"] and f["after"]["n"] >= got["review"]["min_n"]
        assert f["change"] == pytest.approx(f["after"]["value"] - f["before"]["value"])
    buried = [f for f in findings if f["metric"] == "buried_rate" and f["slice"] == {}]
    assert buried and buried[0]["before"]["value"] < buried[0]["after"]["value"]
    # the week's incidents: buried or unused wrong answers, grouped by question
    assert got["incidents"] and got["review"]["incidents"]["requests"] >= sum(
        q["requests"] for q in got["incidents"])
    assert all(t["class"] in ("buried", "unused") for q in got["incidents"] for t in q["traces"])


def test_a_quiet_week_says_nothing_moved(sample_db: Path) -> None:
    # weeks 1 and 2 of the support assistant: the same template, the same traffic
    got = report(sample_db, "--filter", "service=" + MANIFEST["support"]["service"],
                 "--until", "2026-11-09", "--filter", "model=claude-sonnet-4")
    assert got["review"]["week"] == "2026-11-02"
    assert got["findings"] == [] and got["review"]["summary"].startswith("Nothing moved")
