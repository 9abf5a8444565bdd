"""The end-of-run summary and the resume journal, from results the runner holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from midtrace.sweep.journal import Journal, JournalError, journal_path
from midtrace.sweep.results import TrialResult, band, trace_id_of
from midtrace.sweep.summary import summarise, to_text, wilson


def result(case: str, condition: str, correct: bool, slots: tuple[int, ...] = (),
           bands: tuple[str, ...] = (), strategy: str = "score_order", answer: str = "x",
           cited: bool | None = None, required: int = 0, recalled: int = 0,
           repeat: int = 0) -> TrialResult:
    return TrialResult(case=case, condition=condition, strategy=strategy, repeat=repeat,
                       trace_id=trace_id_of("e", (case, condition, strategy, repeat)), k=5,
                       slots=slots, bands=bands, correct=correct, matched=correct,
                       required=required, recalled=recalled, cited_decisive=cited,
                       answer=answer, prompt_tokens=100, latency_ms=1.0, attempts=1)


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert wilson(0, 3)[0] == 0.0 and round(wilson(0, 3)[1], 4) == 0.5615
    assert wilson(3, 3)[1] == 1.0 and round(wilson(3, 3)[0], 4) == 0.4385
    assert wilson(0, 0) == (0.0, 1.0)


def test_band_thresholds() -> None:
    assert [band(m, 300) for m in (0, 99.9, 100, 199.9, 200, 300)] == \
        ["early", "early", "middle", "middle", "late", "late"]


def test_summary_per_slot_delta_buried_and_consistency() -> None:
    rows = [
        # case A fails only in the middle: buried
        result("A", "rank_1", True, (1,), ("early",), answer="blue", cited=True),
        result("A", "rank_3", False, (3,), ("middle",), answer="red", cited=False),
        result("A", "rank_5", True, (5,), ("late",), answer="blue", cited=True),
        # case B fails at an edge too: not buried
        result("B", "rank_1", False, (1,), ("early",), cited=False),
        result("B", "rank_3", False, (3,), ("middle",), cited=False),
        result("B", "rank_5", True, (5,), ("late",), cited=True),
        # case C always right, same answer everywhere
        result("C", "rank_1", True, (1,), ("early",), cited=True, required=2, recalled=2),
        result("C", "rank_3", True, (3,), ("middle",), cited=True, required=2, recalled=1),
        result("C", "rank_5", True, (5,), ("late",), cited=True, required=2, recalled=2),
        result("C", "absent", False),
        # another strategy, kept apart
        result("A", "rank_3", True, (2,), ("early",), strategy="edge"),
    ]
    summary = summarise("e", "m", ["score_order", "edge"], rows)
    s = summary.strategies[0]
    assert s.strategy == "score_order" and s.trials == 10
    assert list(s.by_condition) == ["rank_1", "rank_3", "rank_5", "absent"]
    assert {c: (r.successes, r.n) for c, r in s.by_condition.items()} == \
        {"rank_1": (2, 3), "rank_3": (1, 3), "rank_5": (3, 3), "absent": (0, 1)}
    assert {slot: (r.successes, r.n) for slot, r in s.by_slot.items()} == \
        {1: (2, 3), 3: (1, 3), 5: (3, 3)}
    assert s.sensitivity_delta == pytest.approx(2 / 3)
    assert s.delta_between == ("rank_5", "rank_3")
    assert (s.buried_cases, s.buried_eligible) == (1, 3)
    assert (s.citation_alignment.successes, s.citation_alignment.n) == (6, 9)
    assert (s.constraint_recall.successes, s.constraint_recall.n) == (5, 6)
    assert (s.consistency.successes, s.consistency.n) == (2, 3)  # B always "x", C always "x"
    edge = summary.strategies[1]
    assert edge.by_slot[2].successes == 1 and edge.condition_slots == {"rank_3": [2]}
    text = to_text(summary)
    assert "strategy edge (1 calls)" in text
    assert "buried-evidence failure rate 33% (1 of 3 cases)" in text
    assert "rank_3             3    33%  [  6%,  79%]  slot 3" in text
    json.dumps(summary.to_json())


def test_journal_resumes_and_survives_a_cut_line(tmp_path: Path) -> None:
    header = {"experiment": "exp/1", "model": "m", "template_version": "v1"}
    path = journal_path(tmp_path, "exp/1")
    assert path.name == "exp_1.jsonl"
    j = Journal(path, header)
    j.append([result("A", "rank_1", True, (1,), ("early",)), result("A", "rank_2", False)])
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


def test_trace_ids_follow_the_trial() -> None:
    a = trace_id_of("exp", ("c", "rank_1", "edge", 0))
    assert a == trace_id_of("exp", ("c", "rank_1", "edge", 0))
    assert len(a) == 32 and int(a, 16)
    assert a != trace_id_of("exp", ("c", "rank_1", "edge", 1))
    assert a != trace_id_of("exp2", ("c", "rank_1", "edge", 0))
