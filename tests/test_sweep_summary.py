"""The end-of-run summary, read from the views of a database the sweep's own sink wrote, and
the resume journal."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from midtrace.client import open_client
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from midtrace.sweep.journal import Journal, JournalError, journal_path
from midtrace.sweep.recording import Recorder, StoreSink
from midtrace.sweep.results import TrialResult, trace_id_of
from midtrace.sweep.summary import Summary, summarise, to_text

K = 5
CHUNK_TOKENS = 100  # slot s has its midpoint at (s - 0.5) / 5: slots 1-2 early, 3 middle, 4-5 late


def record(case: str, condition: str, correct: bool, slot: int | None,
           strategy: str = "score_order", answer: str = "x", cited: bool = False,
           required: int = 0, recalled: int = 0, experiment: str = "e",
           model: str = "m") -> RagRecord:
    """A sweep request of K chunks of 100 tokens; the case's gold chunk at ``slot`` (None: absent)."""
    gold = f"{case}-gold"
    ids = [f"{case}-d{i}" for i in range(1, K + 1)]
    if slot is not None:
        ids[slot - 1] = gold
    constraints = tuple(f"qualifier {i}" for i in range(required))
    return RagRecord(
        question=f"question {case}", answer=answer, model=model, template_id="t",
        strategy=strategy, experiment_id=experiment, condition=condition, case_id=case,
        prompt_tokens=K * CHUNK_TOKENS, cited_ids=(gold,) if cited and slot else (),
        chunks=tuple(Chunk(cid, decisive=cid == gold) for cid in ids),
        placements=tuple(Placement(cid, i, i * CHUNK_TOKENS, (i + 1) * CHUNK_TOKENS)
                         for i, cid in enumerate(ids)),
        outcome=Outcome(correct=correct, decisive_chunk_ids=(gold,),
                        required_constraints=constraints or None,
                        recalled_constraints=constraints[:recalled] if constraints else None))


RECORDS = [
    # case A fails only in the middle
    record("A", "rank_1", True, 1, answer="blue [1]", cited=True),
    record("A", "rank_3", False, 3, answer="red", cited=False),
    record("A", "rank_5", True, 5, answer="Blue [5].", cited=True),
    # case B is wrong at an edge too, but right at another edge and wrong in the middle: the
    # view counts it (right in some edge request, wrong in every middle one)
    record("B", "rank_1", False, 1),
    record("B", "rank_3", False, 3),
    record("B", "rank_5", True, 5, cited=True),
    # case C always right, the same answer everywhere
    record("C", "rank_1", True, 1, cited=True, required=2, recalled=2),
    record("C", "rank_3", True, 3, cited=True, required=2, recalled=1),
    record("C", "rank_5", True, 5, cited=True, required=2, recalled=2),
    record("C", "absent", False, None),
    # another strategy, kept apart
    record("A", "rank_3", True, 2, strategy="edge"),
    # another experiment, and another model under the same name: neither is this sweep's
    record("A", "rank_1", False, 1, experiment="other"),
    record("A", "rank_1", False, 1, model="m2"),
]


@pytest.fixture
def sweep_db(tmp_path: Path) -> Path:
    db = tmp_path / "sweep.duckdb"
    recorder = Recorder(StoreSink(db))
    try:
        now = time.time_ns()
        recorder.send([recorder.span(trace_id_of(r.experiment_id or "", (
            r.case_id or "", r.condition or "", r.strategy or "", i)), r, now, now + 1_000_000)
            for i, r in enumerate(RECORDS)])
    finally:
        recorder.close()
    return db


def summary_of(db: Path) -> Summary:
    client = open_client(db=db)
    try:
        return summarise(client, "e", "m", ["score_order", "edge", "reverse"])
    finally:
        client.close()


def test_summary_per_slot_delta_buried_and_consistency(sweep_db: Path) -> None:
    summary = summary_of(sweep_db)
    assert [s.strategy for s in summary.strategies] == ["score_order", "edge"]  # reverse: none
    s = summary.strategies[0]
    assert s.strategy == "score_order" and s.trials == 10
    assert list(s.by_condition) == ["rank_1", "rank_3", "rank_5", "absent"]
    assert {c: (r.successes, r.n) for c, r in s.by_condition.items()} == \
        {"rank_1": (2, 3), "rank_3": (1, 3), "rank_5": (3, 3), "absent": (0, 1)}
    assert s.condition_slots == {"rank_1": [1], "rank_3": [3], "rank_5": [5], "absent": []}
    assert {slot: (r.successes, r.n) for slot, r in s.by_slot.items()} == \
        {1: (2, 3), 3: (1, 3), 5: (3, 3)}
    assert s.sensitivity_delta == pytest.approx(2 / 3)
    assert s.delta_between == ("rank_5", "rank_3")
    assert (s.buried_cases, s.buried_eligible) == (2, 3)
    assert s.buried_rate == pytest.approx(2 / 3)
    assert (s.citation_alignment.successes, s.citation_alignment.n) == (6, 9)
    assert (s.constraint_recall.successes, s.constraint_recall.n) == (5, 6)
    # A answers blue and red; B and C always "x" (A's "[1]" and "[5]" would not matter)
    assert (s.consistency.successes, s.consistency.n) == (2, 3)
    edge = summary.strategies[1]
    assert edge.by_slot[2].successes == 1 and edge.condition_slots == {"rank_3": [2]}
    assert edge.by_condition["rank_3"].interval == (pytest.approx(0.2065, abs=1e-4), 1.0)
    text = to_text(summary)
    assert "strategy edge (1 calls)" in text
    assert "buried-evidence failure rate 67% (2 of 3 cases)" in text
    assert "rank_3             3    33%  [  6%,  79%]  slot 3" in text
    assert "absent             1     0%  [  0%,  79%]  (not in prompt)" in text
    assert "sensitivity delta 67 points (rank_5 best, rank_3 worst)" in text
    assert "citation alignment 67% of 9; constraint recall 83% of 6; answer consistency 67% of 3" \
        in text
    out = summary.to_json()
    json.dumps(out)
    assert out["strategies"][0]["by_condition"]["rank_3"]["slots"] == [3]
    assert out["strategies"][0]["by_slot"]["3"]["ci95"] == \
        [pytest.approx(0.0615, abs=1e-4), pytest.approx(0.7923, abs=1e-4)]


def test_the_bands_come_from_the_database_settings(sweep_db: Path) -> None:
    with duckdb.connect(str(sweep_db)) as conn:  # the middle band now starts after slot 3
        conn.execute("UPDATE settings SET value = 0.6 WHERE key = 'band_early_end'")
    s = summary_of(sweep_db).strategies[0]
    assert (s.buried_cases, s.buried_eligible, s.buried_rate) == (0, 0, None)
    assert "buried-evidence failure rate - (no case placed both in the middle and at an edge)" \
        in to_text(summary_of(sweep_db))


def test_no_graded_request_gives_no_interval(tmp_path: Path) -> None:
    db = tmp_path / "ungraded.duckdb"
    recorder = Recorder(StoreSink(db))
    try:
        ungraded = replace(record("A", "rank_1", True, 1), outcome=None)
        now = time.time_ns()
        recorder.send([recorder.span(trace_id_of("e", ("A", "rank_1", "score_order", 0)),
                                     ungraded, now, now + 1)])
    finally:
        recorder.close()
    (s,) = summary_of(db).strategies
    assert s.by_condition["rank_1"].to_json() == {"n": 0, "correct": 0, "accuracy": None,
                                                  "ci95": [None, None]}
    assert "rank_1             0      -  [   -,    -]  slot 1" in to_text(summary_of(db))


def result(case: str, condition: str, correct: bool, slots: tuple[int, ...] = ()) -> TrialResult:
    return TrialResult(case=case, condition=condition, strategy="score_order", repeat=0,
                       trace_id=trace_id_of("e", (case, condition, "score_order", 0)), k=5,
                       slots=slots, correct=correct, matched=correct, required=0, recalled=0,
                       cited_decisive=None, answer="x", prompt_tokens=100, latency_ms=1.0,
                       attempts=1)


def test_journal_resumes_and_survives_a_cut_line(tmp_path: Path) -> None:
    header = {"experiment": "exp/1", "model": "m", "template_version": "v1"}
    path = journal_path(tmp_path, "exp/1")
    assert path.name == "exp_1.jsonl"
    j = Journal(path, header)
    j.append([result("A", "rank_1", True, (1,)), result("A", "rank_2", False)])
    j.close()
    with open(path, "a") as f:
        f.write('{"case": "A", "condit')  # a kill in the middle of a write
    j = Journal(path, header)
    assert sorted(j.done) == [("A", "rank_1", "score_order", 0), ("A", "rank_2", "score_order", 0)]
    assert j.done[("A", "rank_1", "score_order", 0)].slots == (1,)
    j.append([result("A", "rank_3", True)])
    j.close()
    assert len(Journal(path, header).done) == 3
    with pytest.raises(JournalError, match="recorded with model 'm', this run has 'other'"):
        Journal(path, {**header, "model": "other"})


def test_a_journal_holding_unicode_line_separators_resumes_whole(tmp_path: Path) -> None:
    """The journal writes U+2028, U+2029 and U+0085 as they are (JSON allows them inside a
    string); read back with ``str.splitlines`` a line holding one was cut in two: in the
    header the journal was "not a midtrace sweep journal", in a trial the call was paid again."""
    header = {"experiment": "e", "model": "m\u2028x", "template_version": "v1"}
    path = journal_path(tmp_path, "e")
    j = Journal(path, header)
    odd = replace(result("A", "rank_1", True), answer="14 days\u2029by card\u0085ok")
    j.append([odd, result("A", "rank_2", False)])
    j.close()
    done = Journal(path, header).done
    assert sorted(done) == [("A", "rank_1", "score_order", 0), ("A", "rank_2", "score_order", 0)]
    assert done[odd.key].answer == odd.answer


def test_a_journal_line_with_a_field_since_dropped_still_resumes(tmp_path: Path) -> None:
    header = {"experiment": "e", "model": "m", "template_version": "v1"}
    path = journal_path(tmp_path, "e")
    Journal(path, header).close()
    line = {**result("A", "rank_3", False, (3,)).to_json(), "bands": ["middle"]}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    assert Journal(path, header).done[("A", "rank_3", "score_order", 0)].slots == (3,)


def test_trace_ids_follow_the_trial() -> None:
    a = trace_id_of("exp", ("c", "rank_1", "edge", 0))
    assert a == trace_id_of("exp", ("c", "rank_1", "edge", 0))
    assert len(a) == 32 and int(a, 16)
    assert a != trace_id_of("exp", ("c", "rank_1", "edge", 1))
    assert a != trace_id_of("exp2", ("c", "rank_1", "edge", 0))
