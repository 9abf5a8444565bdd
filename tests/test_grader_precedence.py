"""Who graded decides which grade counts (docs/grading.md, "Precedence"), and a machine grade
that changes nothing is not stored again: real DuckDB, the store's own write path."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from midtrace.collector.receive.bodies import outcome_from_json, parse_outcomes
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.sql import sqlfiles

T = "4bf92f3577b34da6a3ce929d0e0e4736"


def write(store: Store, *items: dict[str, Any]) -> int:
    return store.write([WriteJob(outcomes=[outcome_from_json({"trace_id": T, **i}) for i in items])]).outcomes


def merged(store: Store) -> dict[str, Any]:
    cur = store.conn.execute(sqlfiles.query("merged_outcome_of_trace"), {"trace_id": T})
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def test_person_over_references_over_judge_whatever_their_times(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        write(store, {"grader": "judge", "correct": True, "score": 0.9, "note": "judge says",
                      "time": "2030-01-01T00:00:00Z"})
        assert merged(store)["grader"] == "judge"
        write(store, {"grader": "references", "correct": False, "reviewer": "references:g.jsonl",
                      "decisive_chunk_ids": ["c1"]})
        m = merged(store)
        assert (m["correct"], m["grader"], m["score"], m["note"]) == (False, "references", 0.9, "judge says")
        # a person's grade, dated long before both, wins every field it sets
        write(store, {"correct": True, "reviewer": "kim", "time": "2001-01-01T00:00:00Z"})
        m = merged(store)
        assert (m["correct"], m["grader"], m["reviewer"]) == (True, "person", "kim")
        assert m["decisive_chunk_ids"] == ["c1"] and m["score"] == 0.9
        # within one kind the newest still wins
        write(store, {"grader": "person", "correct": False, "time": "2002-01-01T00:00:00Z"})
        assert merged(store)["correct"] is False
        assert merged(store)["n_outcomes"] == 4
    finally:
        store.close()


def test_outcomes_stored_before_the_grader_column_count_as_a_person(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        write(store, {"grader": "references", "correct": False})
        store.conn.execute("INSERT INTO outcomes (outcome_id, trace_id, origin, received_at, correct) "
                           "VALUES (999, ?, 'api', ?, true)", [T, datetime(2000, 1, 1, tzinfo=UTC)])
        m = merged(store)
        assert (m["correct"], m["grader"]) == (True, "person")
    finally:
        store.close()


def test_a_machine_grade_that_changes_nothing_is_not_stored_again(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    grade = {"grader": "references", "correct": False, "score": 0.0, "decisive_chunk_ids": ["c1"],
             "reviewer": "references:g.jsonl"}
    try:
        assert write(store, grade) == 1
        assert write(store, grade) == 0
        assert write(store, {**grade, "correct": True}) == 1  # a changed grade is stored
        assert write(store, grade) == 1  # and changing back is a change again
        assert write(store, {"grader": "references", "correct": False}) == 0  # a subset of what is said
        person = {"correct": True, "reviewer": "kim"}
        assert write(store, person) == 1 and write(store, person) == 1  # a person's every post is kept
        assert merged(store)["n_outcomes"] == 5
    finally:
        store.close()


def test_grader_is_checked_on_post() -> None:
    check = parse_outcomes(b'{"outcomes": [{"trace_id": "' + T.encode() + b'", "grader": "robot"}]}')
    assert check.errors == [{"index": 0, "error": "grader must be one of person, references, "
                                                  "judge, got 'robot'"}]
