"""`midtrace cases`: stored requests become sweep cases that `midtrace sweep --cases` reads.

The known traces go through a real collector; the command runs as a subprocess against it
(`--url`) and, once it has stopped, against the file (`--store`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from midtrace.references import Reference
from midtrace.sweep.cases import load_cases
from midtrace.sweep.from_traces import NO_TEXT, case_from_trace
from tests.dashboard_data import INCIDENT_QUESTION, UNGRADED_QUESTION, Fixture, send_all
from tests.procs import Proc, start_collector

MIDTRACE = [sys.executable, "-m", "midtrace"]


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Path, Fixture]]:
    tmp = tmp_path_factory.mktemp("cases")
    proc = start_collector(tmp / "traces.duckdb", tmp / "collector.log")
    try:
        yield proc, tmp, send_all(proc.url)
    finally:
        proc.stop()


def cases(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MIDTRACE, "cases", *args], capture_output=True, text=True,
                          timeout=120)


def test_an_incident_becomes_a_case_the_sweep_reads(sent: tuple[Proc, Path, Fixture]) -> None:
    proc, tmp, fx = sent
    refs = tmp / "refs.jsonl"
    refs.write_text(json.dumps({"question": INCIDENT_QUESTION.upper(), "answers": ["14 days"],
                                "required_constraints": ["opened items"]}) + "\n")
    out = tmp / "cases.jsonl"
    done = cases("--url", proc.url, "--class", "buried", "--references", str(refs),
                 "--output", str(out))
    assert done.returncode == 0, done.stderr
    loaded = load_cases(out)
    assert loaded.bad == [] and [c.id for c in loaded.cases] == [fx.incident]
    case = loaded.cases[0]
    assert case.question == INCIDENT_QUESTION and case.answers == ("14 days",)
    # the grade named policy-2026#3; every other retrieved chunk, dropped too, by retrieval rank
    assert [c.id for c in case.decisive] == ["policy-2026#3"]
    assert [c.id for c in case.distractors] == ["faq-returns#1", "policy-2026#4", "xss-chunk",
                                                "md-chunk", "blog-old#2"]
    assert case.decisive[0].text == "Opened items may be returned within 14 days of delivery."
    assert case.constraints == ("opened items",)
    assert case.metadata["prompt_order"] == ["faq-returns#1", "xss-chunk", "policy-2026#3",
                                             "md-chunk", "policy-2026#4"]
    # every other buried request is counted out with its reason, on standard error
    assert "wrote 1 case(s)" in done.stderr
    assert "skipped" in done.stderr and "no --references line has its question" in done.stderr


def test_the_same_from_the_file_by_trace_id(sent: tuple[Proc, Path, Fixture]) -> None:
    proc, tmp, fx = sent
    proc.stop()  # the file is free once the collector has stopped
    refs = tmp / "refs-file.jsonl"
    refs.write_text(json.dumps({"question": INCIDENT_QUESTION, "answers": ["14 days"]}) + "\n"
                    + json.dumps({"question": UNGRADED_QUESTION, "answers": ["no"]}) + "\n")
    done = cases("--store", str(tmp / "traces.duckdb"), "--references", str(refs),
                 "--trace-id", fx.incident, "--trace-id", fx.ungraded)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [c["id"] for c in lines] == [fx.incident]
    assert "skipped 1: no decisive chunk is known among its chunks: grade it first" in done.stderr


def test_a_bad_references_line_stops_before_anything_is_read(tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"question": "q", "answers": []}) + "\n")
    done = cases("--store", str(tmp_path / "none.duckdb"), "--references", str(refs))
    assert done.returncode == 2 and "line 1" in done.stderr


def test_requests_stored_without_text_cannot_become_cases() -> None:
    ref = {"q": Reference(line=1, question="q", answers=("a",))}
    trace = {"trace_id": "ab" * 16, "request": {"question": None, "answer": None},
             "chunks": [{"chunk_id": "c1", "text": None, "is_decisive": True}]}
    assert "--no-text" in str(case_from_trace(trace, ref))
    trace["request"] = {"question": "q"}
    assert case_from_trace(trace, ref) == NO_TEXT
