"""`midtrace grade --references` (docs/grading.md): the file, the matching, the grade, and end
to end through a real collector and on a file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from midtrace.client import Filters, open_client
from midtrace.references import (
    NOT_RETRIEVED, Reference, grade_answer, parse_references, question_key)
from midtrace.schemas.model import Chunk, Placement, RagRecord
from tests.metrics_fixtures import post_outcomes
from tests.procs import Proc, start_collector
from tests.sender import Sender

MIDTRACE = [sys.executable, "-m", "midtrace"]

# --- the file and the grade, no I/O ----------------------------------------------------------


def test_question_matching_folds_case_and_whitespace_only() -> None:
    assert question_key("  How LONG is\tthe refund\n window? ") == question_key(
        "how long is the refund window?")
    assert question_key("Straße?") == question_key("STRASSE?")
    assert question_key("How long is the refund window") != question_key(
        "How long is the refund window?")  # punctuation is kept: a question is no answer


def test_reference_lines_and_sweep_cases_are_read() -> None:
    case = {"id": "refund", "question": "Refund window?", "answers": ["14 days"],
            "decisive": [{"id": "p#1", "text": "Refunds within 14 days."}],
            "constraints": ["receipt"]}
    refs = parse_references([
        json.dumps({"question": "How long?", "answers": ["14 days"]}),
        "",
        "// a comment",
        json.dumps({"question": "Who?", "answers": ["Kim"], "required_constraints": ["x"],
                    "in_corpus": False}),
        json.dumps(case),
    ])
    assert refs.bad == []
    assert refs.references == [
        Reference(1, "How long?", ("14 days",)),
        Reference(4, "Who?", ("Kim",), ("x",), in_corpus=False),
        Reference(5, "Refund window?", ("14 days",), ("receipt",)),
    ]


def test_bad_lines_name_their_number_and_what_is_wrong() -> None:
    refs = parse_references([
        "{not json",
        json.dumps({"question": "Q?"}),
        json.dumps({"question": "Q?", "answers": "14 days"}),
        json.dumps({"question": "Q?", "answers": ["14 days"], "answer": "x"}),
        json.dumps({"question": "Q?", "answers": ["the"]}),
        json.dumps({"question": "Q?", "answers": ["14"], "in_corpus": "yes"}),
        json.dumps({"question": "  q? ", "answers": ["14"]}),
        json.dumps({"question": "Q?", "answers": ["15"]}),
        json.dumps({"id": "c", "question": "Q2?", "answers": ["1"]}),
        json.dumps(["a list"]),
    ])
    assert [b.split(":", 1)[0] for b in refs.bad] == [
        "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 8", "line 9", "line 10"]
    assert "not JSON" in refs.bad[0]
    assert "answers must be a non-empty list" in refs.bad[1]
    assert "unknown field(s) answer" in refs.bad[3]
    assert "normalisation" in refs.bad[4]
    assert "in_corpus must be true or false" in refs.bad[5]
    assert "the same question as line 7" in refs.bad[6]
    assert "(a sweep case) decisive" in refs.bad[7]
    assert [r.line for r in refs.references] == [7]


def test_grade_finds_decisive_chunks_or_says_why_none() -> None:
    ref = Reference(1, "Refund window?", ("14 days", "two weeks"), ("receipt", "original box"))
    chunks = [("w", "The warranty lasts 30 days."), ("r", "Refunds: within 14 Days."),
              ("t", "Two weeks, as said."), ("x", None)]
    g = grade_answer(ref, "Within 14 days, with a Receipt.", chunks)
    assert g.correct and g.decisive_chunk_ids == ("r", "t") and g.recalled_constraints == ("receipt",)
    g = grade_answer(ref, "30 days", chunks[:1])
    assert not g.correct and g.decisive_chunk_ids == (NOT_RETRIEVED,)
    not_in_corpus = Reference(2, "Q?", ("42",), in_corpus=False)
    assert grade_answer(not_in_corpus, "It is 42.", chunks).decisive_chunk_ids is None


# --- end to end ----------------------------------------------------------------------------

TEXTS = {
    "refund": "Refunds are accepted within 14 days of purchase with a receipt.",
    "warranty": "The warranty covers defects for 30 days.",
    "shipping": "Standard shipping takes 5 business days.",
    "noise": "Our office is closed on public holidays.",
}
REFERENCES = [
    {"question": "How long is the refund window?", "answers": ["14 days", "fourteen days"],
     "required_constraints": ["receipt"]},
    {"question": "How long does shipping take?", "answers": ["5 business days"]},
    {"question": "Who is the CEO?", "answers": ["Jane Roe"]},
    {"question": "What is the answer to everything?", "answers": ["42"], "in_corpus": False},
    {"question": "Is this line ever asked?", "answers": ["no"]},
]
REFUND, SHIPPING, CEO, EVERYTHING = (r["question"] for r in REFERENCES[:4])


@dataclass(frozen=True)
class Case:
    """One request and what a reader works out by hand from the table of TEXTS."""

    question: str
    order: tuple[str, ...]   # chunk ids in prompt order
    answer: str
    slot: int | None         # 1-based slot of the chunk holding a reference answer
    correct: bool | None     # the grade that counts
    taxonomy: str


CASES = [
    Case(REFUND, ("refund", "warranty", "shipping", "noise"), "Within 14 days, with a receipt.", 1, True, "answered"),
    Case("  how LONG is the refund   window? ", ("warranty", "refund", "shipping", "noise"), "30 days.", 2, False, "buried"),
    Case(REFUND, ("warranty", "shipping", "refund", "noise"), "The window is 14 days.", 3, True, "answered"),
    Case(REFUND, ("warranty", "shipping", "noise", "refund"), "30 days", 4, False, "unused"),
    Case(SHIPPING, ("shipping", "refund", "warranty", "noise"), "5 business days", 1, True, "answered"),
    Case(SHIPPING, ("refund", "warranty", "shipping", "noise"), "Shipping takes 5 business days.", 3, True, "answered"),
    Case(SHIPPING, ("refund", "shipping", "warranty", "noise"), "Two weeks.", 2, False, "buried"),
    Case(CEO, ("refund", "warranty", "shipping", "noise"), "I do not know.", None, False, "missing"),
    Case(EVERYTHING, ("noise", "warranty", "shipping", "refund"), "It is 42.", None, True, "answered"),
    Case(EVERYTHING, ("noise", "warranty", "shipping", "refund"), "Unknown.", None, False, "unlabeled"),
    Case("What are your opening hours?", ("noise", "refund", "warranty", "shipping"), "9 to 5.", None, None, "ungraded"),
    # references say wrong, but a person graded it correct first: the person wins
    Case(REFUND, ("refund", "warranty", "shipping", "noise"), "30 days", 1, True, "answered"),
]
PERSON_GRADED = len(CASES) - 1


def record_of(case: Case) -> RagRecord:
    chunks = tuple(Chunk(id=cid, text=TEXTS[cid], retrieval_rank=i + 1)
                   for i, cid in enumerate(sorted(TEXTS)))
    placements = tuple(Placement(cid, i, i * 100, (i + 1) * 100) for i, cid in enumerate(case.order))
    return RagRecord(question=case.question, answer=case.answer, model="m", prompt_tokens=400,
                     chunks=chunks, placements=placements)


def write_references(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in REFERENCES), encoding="utf-8")
    return path


def grade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MIDTRACE, "grade", *args], capture_output=True, text=True, timeout=120)


def expected_by_slot() -> dict[tuple[int, int], tuple[int, int]]:
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for c in CASES:
        if c.slot is not None and c.correct is not None:
            n, right = out.get((4, c.slot), (0, 0))
            out[(4, c.slot)] = (n + 1, right + c.correct)
    return out


def outcome_rows(url: str, trace_ids: list[str]) -> int:
    return sum(len(httpx.get(f"{url}/api/v1/traces/{t}", timeout=10).json()["outcomes"])
               for t in trace_ids)


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, list[str], Path]]:
    folder = tmp_path_factory.mktemp("grade")
    proc = start_collector(folder / "traces.duckdb", folder / "collector.log")
    sender = Sender(proc.url)
    trace_ids = sender.send_many([record_of(c) for c in CASES])
    # a person's grade, sent before the references grade and dated earlier still
    post_outcomes(proc.url, {"trace_id": trace_ids[PERSON_GRADED], "correct": True,
                             "reviewer": "kim", "time": "2020-01-01T00:00:00Z"})
    yield proc, trace_ids, write_references(folder / "golden.jsonl")
    sender.provider.shutdown()
    proc.stop()


def test_grade_through_a_collector_gives_the_hand_computed_accuracy_by_slot(
        sent: tuple[Proc, list[str], Path]) -> None:
    proc, trace_ids, references = sent
    done = grade("--url", proc.url, "--references", str(references), "--list-unmatched")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "matched 11 of 12 requests to 4 of 5 reference lines" in out
    assert "graded 11: 5 correct, 6 wrong" in out  # by the references alone
    assert "unmatched: line 5: Is this line ever asked?" in out
    with open_client(url=proc.url, fresh=True) as client:
        slots = client.view("accuracy_by_slot")
        got = {(int(r.k), int(r.slot)): (int(r.n), int(r.correct)) for r in slots.itertuples()}
        assert got == expected_by_slot()
        listed = client.requests(limit=100)
        classes = dict(zip(listed.trace_id, listed.taxonomy_class))
        assert [classes[t] for t in trace_ids] == [c.taxonomy for c in CASES]
        first = client.trace(trace_ids[0])
        assert first is not None
        assert first["outcome"]["grader"] == "references"
        assert first["outcome"]["reviewer"] == "references:golden.jsonl"
        assert first["outcome"]["decisive_chunk_ids"] == ["refund"]
        assert first["outcome"]["recalled_constraints"] == ["receipt"]
        assert first["outcomes"][0]["grader"] == "references"
        person = client.trace(trace_ids[PERSON_GRADED])
        assert person is not None
        # the person's correct wins over the later references grade; the decisive chunk the
        # person did not name comes from the references grade, field by field
        assert person["outcome"]["correct"] is True and person["outcome"]["grader"] == "person"
        assert person["outcome"]["decisive_chunk_ids"] == ["refund"]
        assert person["outcome"]["reviewer"] == "kim"
        missing = client.trace(trace_ids[7])
        assert missing is not None and missing["outcome"]["decisive_chunk_ids"] == [NOT_RETRIEVED]


def test_grading_again_adds_no_rows_and_changes_nothing(sent: tuple[Proc, list[str], Path]) -> None:
    proc, trace_ids, references = sent
    first = grade("--url", proc.url, "--references", str(references))
    assert first.returncode == 0, first.stderr
    rows = outcome_rows(proc.url, trace_ids)
    with open_client(url=proc.url, fresh=True) as client:
        before = client.view("failure_taxonomy")
    again = grade("--url", proc.url, "--references", str(references))
    assert again.returncode == 0, again.stderr
    assert outcome_rows(proc.url, trace_ids) == rows == len(CASES) - 1 + 1  # one each, plus the person's
    with open_client(url=proc.url, fresh=True) as client:
        assert client.view("failure_taxonomy").equals(before)


def test_the_grader_filter_counts_one_kind_of_grade(sent: tuple[Proc, list[str], Path]) -> None:
    proc, trace_ids, references = sent
    assert grade("--url", proc.url, "--references", str(references)).returncode == 0

    def overview(grader: str | None) -> tuple[int, int]:
        with open_client(url=proc.url, fresh=True) as client:
            row = client.view("overview", Filters(grader=grader)).iloc[0]
        return int(row.graded), int(row.correct)

    # every kind merged: the person's correct wins over the references' wrong
    assert overview(None) == overview("all") == (11, 6)
    assert overview("references") == (11, 5)  # the references' own verdicts, the person's too
    assert overview("person") == (1, 1)
    assert overview("judge") == (0, 0)
    with open_client(url=proc.url, fresh=True) as client:
        listed = client.requests(Filters(grader="person"), limit=100)
        graded = listed[listed.correct.notna()]
        assert list(graded.trace_id) == [trace_ids[PERSON_GRADED]]
        assert list(graded.grader) == ["person"]
        wrong = client.requests(Filters(grader="references"), taxonomy_class="unused", limit=100)
        # the person's request too: by the references it is wrong, its answer at slot 1
        assert set(wrong.trace_id) == {trace_ids[3], trace_ids[PERSON_GRADED]}
    report = subprocess.run([*MIDTRACE, "report", "--url", proc.url, "--filter", "grader=references",
                             "--format", "json"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    body = json.loads(report.stdout)
    assert body["graders"] == "references" and body["filters"]["grader"] == "references"
    assert (body["overview"][0]["graded"], body["overview"][0]["correct"]) == (11, 5)
    md = subprocess.run([*MIDTRACE, "report", "--url", proc.url, "--format", "md"],
                        capture_output=True, text=True, timeout=120)
    assert "Counts every grade: a person's over the references' over the judge's." in md.stdout
    bad = httpx.get(f"{proc.url}/api/v1/views/overview", params={"grader": "robot"}, timeout=10)
    assert bad.status_code == 400 and "grader 'robot' is not one of" in bad.json()["error"]


def test_bad_references_file_grades_nothing(sent: tuple[Proc, list[str], Path], tmp_path: Path) -> None:
    proc, _, _ = sent
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(REFERENCES[0]) + "\n" + json.dumps({"question": "Q?"}) + "\n")
    done = grade("--url", proc.url, "--references", str(bad))
    assert done.returncode == 2
    assert f"{bad}: line 2: answers must be a non-empty list" in done.stderr
    assert "nothing was graded" in done.stderr


def test_grade_a_file_with_store(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    proc = start_collector(db, tmp_path / "collector.log")
    sender = Sender(proc.url)
    try:
        trace_ids = sender.send_many([record_of(c) for c in CASES[:PERSON_GRADED]])
    finally:
        sender.provider.shutdown()
        proc.stop()
    references = write_references(tmp_path / "golden.jsonl")
    for _ in range(2):
        done = grade("--store", str(db), "--references", str(references))
        assert done.returncode == 0, done.stderr
    assert "10 of them unchanged and not stored again" in done.stdout
    with open_client(db=db) as client:
        slots = client.view("accuracy_by_slot")
        got = {(int(r.k), int(r.slot)): (int(r.n), int(r.correct)) for r in slots.itertuples()}
        want = Counter[tuple[int, int]]()
        right = Counter[tuple[int, int]]()
        for c in CASES[:PERSON_GRADED]:
            if c.slot is not None and c.correct is not None:
                want[(4, c.slot)] += 1
                right[(4, c.slot)] += c.correct
        assert got == {key: (want[key], right[key]) for key in want}
        outcomes = [client.trace(t) for t in trace_ids]
        assert sum(len(t["outcomes"]) for t in outcomes if t) == 10
