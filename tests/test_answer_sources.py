"""The chunks an answer follows (collector/normalize/answer_sources.py): the matcher alone,
then the rows the store keeps of it, replaced on re-derive and removed by prune."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from midtrace.collector.normalize.answer_sources import _TOKEN, _Words, answer_sources
from midtrace.collector.query.reads import Filters, run_view
from midtrace.collector.storage.derive import prepare
from midtrace.collector.storage.retention import prune
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.schemas.encode import request_attributes
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from midtrace.schemas.span import SpanRecord
from tests.metrics_fixtures import wilson

WARRANTY = "Warranty: the Hub is covered against defects for 30 days from delivery."
REFUND = "Refunds: an item can be returned for a refund within 14 days of delivery."


def incident(answer: str = "You can return it within 30 days of delivery.",
             **chunk_texts: str) -> RagRecord:
    """Eight chunks in prompt order: the warranty paragraph at slot 2, the refund paragraph
    (the decisive one) at slot 7, filler around them."""
    texts = [f"Store hours and shipping options, note {i}." for i in range(8)]
    texts[1], texts[6] = WARRANTY, REFUND
    ids = [f"filler-{i}" for i in range(8)]
    ids[1], ids[6] = "warranty#2", "refund#1"
    for name, text in chunk_texts.items():  # warranty_2 for warranty#2, filler_3 for filler-3
        kind, n = name.split("_")
        texts[ids.index(f"{kind}{'-' if kind == 'filler' else '#'}{n}")] = text
    chunks = tuple(Chunk(cid, text=t) for cid, t in zip(ids, texts))
    return RagRecord(question="How long do I have to return the Hub for a refund?", answer=answer,
                     chunks=chunks, placements=tuple(Placement(c, i, 100 * i, 100 * i + 90)
                                                     for i, c in enumerate(ids)),
                     prompt_tokens=800)


def followed(record: RagRecord) -> dict[str, list[tuple[str, str, str]]]:
    """chunk id -> (kind, answer text, chunk text) of each match."""
    texts = {c.id: c.text or "" for c in record.chunks}
    answer = record.answer or ""
    return {s.chunk_id: [(m.kind, answer[m.answer_start:m.answer_end],
                          texts[s.chunk_id][m.chunk_start:m.chunk_end]) for m in s.matches]
            for s in answer_sources(record)}


def test_the_refund_incident_answer_follows_the_warranty_chunk() -> None:
    found = followed(incident())
    assert found == {"warranty#2": [("number", "30 days", "30 days")]}
    # the refund chunk shares "days of delivery" with the answer: two words, not specific enough
    assert [s.ordinal for s in answer_sources(incident())] == [1]


def test_the_same_fact_written_otherwise_still_matches() -> None:
    for written in ("a 30-day warranty", "thirty days of cover", "cover for 30 Days", "30 day cover"):
        found = followed(incident(warranty_2=f"The Hub has {written}."))
        assert list(found) == ["warranty#2"], written
    # a number inside a longer one is not the same number
    assert followed(incident(warranty_2="Covered for 130 days.")) == {}


def test_dates_quotes_and_money_are_specific_content() -> None:
    record = incident(answer='It shipped on March 3, 2026 for $200, marked "final sale".',
                      warranty_2="Order 88 shipped March 3 2026.",
                      refund_1="Items marked \u201cfinal sale\u201d cost $200 and are not refunded.")
    assert followed(record) == {
        "warranty#2": [("date", "March 3, 2026", "March 3 2026")],
        "refund#1": [("number", "$200", "$200"), ("quote", "final sale", "final sale")]}


def test_rare_phrases_count_stop_words_and_the_question_do_not() -> None:
    answer = "Send the original receipt with the signed return authorization form."
    record = incident(answer=answer,
                      warranty_2="Claims need the signed return authorization form and a photo.",
                      refund_1="Keep the original receipt.")
    found = followed(record)
    # three rare words in a row follow a chunk; one two-word phrase alone does not
    assert found == {"warranty#2": [("ngram", "signed return authorization form",
                                     "signed return authorization form")]}
    # words of the question ("return", "refund") and stop words make no phrase of their own
    assert followed(incident(answer="You can return it for a refund.",
                             warranty_2="You can return it for a refund.")) == {}


def test_a_question_that_holds_the_documents_does_not_ask_their_words() -> None:
    # a trace that names no question has the last user message as its question: with the
    # documents in it, every phrase of theirs would otherwise be "asked"
    answer = "Send the original receipt with the signed return authorization form."
    record = incident(answer=answer,
                      warranty_2="Claims need the signed return authorization form and a photo.")
    stuffed = dataclasses.replace(record, question="Use the documents.\n" + "\n".join(
        f"[{i + 1}] {c.text}" for i, c in enumerate(record.chunks)) + "\nWhat do I send?")
    assert followed(stuffed) == followed(record) == {"warranty#2": [
        ("ngram", "signed return authorization form", "signed return authorization form")]}


def test_a_phrase_in_most_chunks_is_not_specific() -> None:
    boiler = "Contact support team members for help."
    record = incident(answer="Ask the support team members.",
                      **{f"filler_{i}": boiler for i in (0, 2, 3, 4, 5)})
    assert followed(record) == {}
    one = incident(answer="Ask the support team members.", filler_3=boiler)
    assert list(followed(one)) == ["filler-3"]


def test_chunks_outside_the_prompt_and_missing_texts_are_not_sources() -> None:
    record = incident()
    dropped = dataclasses.replace(record, placements=tuple(
        p for p in record.placements if p.chunk_id != "warranty#2"))
    assert followed(dropped) == {}
    assert answer_sources(dataclasses.replace(record, answer=None)) == []


T1, T2 = "1" * 32, "2" * 32


def span(trace_id: str, record: RagRecord) -> SpanRecord:
    return SpanRecord(trace_id, "a" * 16, "llm", 1_000, 2_000, request_attributes(record))


def source_rows(store: Store) -> list[tuple[object, ...]]:
    return store.conn.execute(
        "SELECT r.trace_id, s.chunk_id, s.ordinal, s.kind, s.answer_start, s.answer_end, "
        "s.chunk_start, s.chunk_end, s.matched, s.matched_hash IS NOT NULL "
        "FROM answer_sources s JOIN requests r USING (request_id) ORDER BY ALL").fetchall()


def test_rows_are_written_by_both_derive_paths_replaced_and_pruned(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        store.write([WriteJob(spans=[span(T1, incident())])])  # the writer derives it
        store.apply([(prepare([span(T2, incident())], keep_text=True), [WriteJob()])])  # a worker
        at = WARRANTY.index("30 days")
        row = ("warranty#2", 1, "number", 25, 32, at, at + 7, "30 days", True)
        assert source_rows(store) == [(T1, *row), (T2, *row)]
        # the same trace sent again with another answer: its rows are replaced, not added
        store.write([WriteJob(spans=[SpanRecord(T1, "b" * 16, "llm", 3_000, 4_000,
                                                request_attributes(incident(
                                                    answer="Within 14 days of delivery.")))])])
        at14 = REFUND.index("14 days")
        assert source_rows(store) == [(T1, "refund#1", 6, "number", 7, 26, at14, at14 + 19,
                                       "14 days of delivery", True),
                                      (T2, *row)]
        store.rederive([T1, T2])
        assert len(source_rows(store)) == 2
        assert prune(store, trace_ids=[T1]).traces == 1
        assert source_rows(store) == [(T2, *row)]
    finally:
        store.close()


def test_without_text_only_offsets_and_hashes_are_kept(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb", keep_text=False)
    try:
        store.write([WriteJob(spans=[span(T1, incident())])])
        store.apply([(prepare([span(T2, incident())], keep_text=False), [WriteJob()])])
        rows = source_rows(store)
        at = WARRANTY.index("30 days")
        assert [r[1:8] for r in rows] == [("warranty#2", 1, "number", 25, 32, at, at + 7)] * 2
        assert [(r[8], r[9]) for r in rows] == [(None, True)] * 2
        assert store.conn.execute("SELECT count(*) FROM answer_sources WHERE contains(matched_hash, "
                                  "'30 days')").fetchone() == (0,)
    finally:
        store.close()


def test_request_evidence_keeps_what_the_answer_follows(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        graded = dataclasses.replace(incident(), outcome=Outcome(
            correct=False, decisive_chunk_ids=("refund#1",)))
        store.write([WriteJob(spans=[span(T1, graded)])])
        got = store.conn.execute("SELECT n_followed, follows_decisive, followed_distractors "
                                 "FROM request_evidence").fetchall()
        assert got == [(1, False, [{"chunk_id": "warranty#2", "slot": 2,
                                    "relative_position": 145 / 800}])]
        assert store.conn.execute("SELECT count(*) FROM (SELECT * FROM request_evidence EXCEPT "
                                  "SELECT * FROM request_evidence_live)").fetchone() == (0,)
    finally:
        store.close()


def test_answered_from_distractor_on_a_planted_set(tmp_path: Path) -> None:
    """Decisive: the refund chunk at slot 7, named by each outcome. Bands over 800 tokens:
    the warranty chunk at slot 2 sits at 145/800 (early), filler-3 at slot 4 at 345/800
    (middle)."""
    def graded(answer: str, correct: bool = False, decisive: str = "refund#1", **texts: str,
               ) -> RagRecord:
        return dataclasses.replace(incident(answer=answer, **texts), outcome=Outcome(
            correct=correct, decisive_chunk_ids=(decisive,)))

    planted = [
        graded("Within 30 days."),                     # a: warranty only
        graded("Either 30 days or 14 days."),          # b: warranty and the decisive chunk
        graded("Returns close after 45 days.", filler_3="All returns close after 45 days."),  # c
        graded("Ask the store."),                      # d: follows nothing
        graded("Within 30 days.", decisive="gone#1"),  # decisive evidence not in the prompt
        graded("Within 30 days.", correct=True),       # right
    ]
    store = Store.open(tmp_path / "t.duckdb")
    try:
        store.write([WriteJob(spans=[span(f"{i:032x}", r) for i, r in enumerate(planted, 1)])])
        table = run_view(store.conn, "answered_from_distractor").to_pylist()
        by_person = run_view(store.conn, "answered_from_distractor", Filters(grader="person"))
        by_week = run_view(store.conn, "answered_from_distractor", group_by=("week",))
    finally:
        store.close()
    # of the 4 wrong answers with the decisive chunk in the prompt (a, b, c, d): a, b, c
    # follow a distractor; a and c follow no decisive chunk at all
    expected = [("any", None, 4, 3, 2), ("early", 2, 4, 2, 1), ("middle", 4, 4, 1, 1)]
    assert [(r["band"], r["slot"], r["wrong"], r["requests"], r["instead_of_decisive"])
            for r in table] == expected
    for r, (_, _, wrong, k, _) in zip(table, expected):
        assert r["share"] == k / wrong
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(wilson(k, wrong))
    assert by_person.to_pylist() == table
    assert [r["requests"] for r in by_week.to_pylist()] == [3, 2, 1]


def test_a_long_questions_words_are_the_words_its_tokenizer_cuts() -> None:
    """``_Words`` looks a word up where it occurs; it must agree with cutting the whole text
    into words, joiners, digits, apostrophes and non-ASCII letters included."""
    rng = random.Random(7)
    alphabet = ["a", "b", "1", "2", "12", ".", ",", ":", "/", "-", "'", "’", "_", " ", "\n",
                "[", "]", "é", "ß", "٣", "$", "%", "plan", "14"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        words = set(_TOKEN.findall(text))
        lazy = _Words(text)
        asked = list(words) + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
                               for _ in range(8)]
        for word in asked:
            assert (word in lazy) == (word in words), (text, word)
