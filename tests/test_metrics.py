"""The metric views, end to end: hand-built requests sent through the real OTel SDK to a real
collector, read back through the query API. Every expected number is worked out in a comment.

Each scenario sends as its own service, so the scenarios share one collector and stay apart
through the ``service`` filter.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from datetime import date

import pandas as pd
import pytest

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from midtrace.client import Filters, HttpClient, open_client
from midtrace.schemas.model import Chunk, Outcome
from tests.metrics_fixtures import (
    module_collector, ns, post_outcomes, prompt, record, utc, wilson)
from tests.procs import Proc
from tests.sender import Sender

__all__ = ["module_collector"]


@pytest.fixture(scope="module")
def client(module_collector: Proc) -> Iterator[HttpClient]:
    c = open_client(url=module_collector.url, fresh=True)
    assert isinstance(c, HttpClient)
    yield c
    c.close()


def rows(frame: pd.DataFrame, key: str) -> dict[object, dict[str, object]]:
    return {r[key]: r for r in frame.to_dict("records")}


def close(a: object, b: float) -> bool:
    return a is not None and not pd.isna(a) and math.isclose(float(a), b, rel_tol=1e-9)  # type: ignore[arg-type]


# --- failure taxonomy ------------------------------------------------------------------------

GOLD = "direct_answer"


@pytest.fixture(scope="module")
def taxonomy(module_collector: Proc) -> dict[str, str]:
    s = Sender(module_collector.url, service="taxonomy")
    wrong = Outcome(correct=False)
    t: dict[str, str] = {}
    t["ungraded"] = s.send(record([Chunk("g", label=GOLD)], prompt("g")))
    t["answered"] = s.send(record([Chunk("g", label=GOLD)], prompt("g"), outcome=Outcome(correct=True)))
    # the outcome names "gold", which is none of the request's chunks: never retrieved
    t["missing"] = s.send(record([Chunk("x", label="irrelevant")], prompt("x"),
                                 outcome=Outcome(correct=False, decisive_chunk_ids=("gold",))))
    t["dropped"] = s.send(record([Chunk("x"), Chunk("g", stage="dropped", drop_reason="budget",
                                                    label=GOLD)], prompt("x"), outcome=wrong))
    # prompt_tokens=300; g at [80,120): midpoint 100, 100/300 = 1/3 exactly, the first middle value
    t["buried"] = s.send(record(
        [Chunk("x"), Chunk("g", label=GOLD), Chunk("y")],
        prompt("x", "g", "y", spans=[(0, 80), (80, 120), (120, 300)]),
        prompt_tokens=300, outcome=wrong))
    # g at [0,50) of 300: midpoint 25/300 = 0.083, early
    t["unused"] = s.send(record(
        [Chunk("g", label=GOLD), Chunk("x"), Chunk("y")],
        prompt("g", "x", "y", spans=[(0, 50), (50, 200), (200, 300)]),
        prompt_tokens=300, outcome=wrong))
    # no outcome ids, no decisive marks, no direct_answer/exception_constraint label
    t["unlabeled"] = s.send(record([Chunk("x", label="supporting_background"), Chunk("y")],
                                   prompt("x", "y"), outcome=wrong))
    # g placed twice: slot 2 of 4 (middle: (2-0.5)/4 = 0.375) and slot 4 (late: 3.5/4 = 0.875);
    # one occurrence at an edge, so unused and not buried
    t["twice"] = s.send(record([Chunk("x"), Chunk("g", label=GOLD), Chunk("y")],
                               prompt("x", "g", "y", "g"), outcome=wrong))
    # two decisive chunks: a in the middle (slot 2 of 3: 1.5/3 = 0.5), b dropped; every
    # in-prompt occurrence is in the middle: buried, n_decisive = 2
    t["several"] = s.send(record(
        [Chunk("x"), Chunk("a", decisive=True), Chunk("y"),
         Chunk("b", stage="dropped", drop_reason="dedupe", decisive=True)],
        prompt("x", "a", "y"), outcome=wrong))
    return t


def test_each_request_gets_its_taxonomy_class(client: HttpClient, taxonomy: dict[str, str]) -> None:
    expected = {"ungraded": "ungraded", "answered": "answered", "missing": "missing",
                "dropped": "dropped", "buried": "buried", "unused": "unused",
                "unlabeled": "unlabeled", "twice": "unused", "several": "buried"}
    for name, trace_id in taxonomy.items():
        trace = client.trace(trace_id)
        assert trace is not None
        assert trace["taxonomy_class"] == expected[name], name


def test_band_threshold_and_double_placement(client: HttpClient, taxonomy: dict[str, str]) -> None:
    buried = client.trace(taxonomy["buried"])
    assert buried is not None
    g = [p for p in buried["placements"] if p["chunk_id"] == "g"][0]
    assert g["relative_position"] == 1 / 3 and g["band"] == "middle"  # 100 / 300 on the threshold
    assert buried["request"]["decisive_band"] == "middle"
    twice = client.trace(taxonomy["twice"])
    assert twice is not None
    assert [p["band"] for p in twice["placements"] if p["chunk_id"] == "g"] == ["middle", "late"]
    # the decisive position is the first occurrence: slot 2, middle; yet at an edge overall
    assert twice["request"]["decisive_slot"] == 2 and twice["request"]["decisive_band"] == "middle"
    assert twice["request"]["decisive_at_edge"] is True
    several = client.trace(taxonomy["several"])
    assert several is not None
    r = several["request"]
    assert (r["n_decisive"], r["n_decisive_retrieved"], r["n_decisive_in_prompt"]) == (2, 2, 1)
    assert r["decisive_source"] == "marked"


def test_failure_taxonomy_and_buried_rate(client: HttpClient, taxonomy: dict[str, str]) -> None:
    f = Filters(service="taxonomy")
    counts = {r["class"]: r["n"] for r in client.view("failure_taxonomy", f).to_dict("records")}
    # 9 requests: buried = buried + several, unused = unused + twice, one of each other class
    assert counts == {"answered": 1, "unused": 2, "buried": 2, "dropped": 1, "missing": 1,
                      "unlabeled": 1, "ungraded": 1}
    share = rows(client.view("failure_taxonomy", f), "class")
    assert close(share["buried"]["share"], 2 / 9)
    b = client.view("buried_rate", f).iloc[0]
    # graded: 8 (all but ungraded); wrong: 7 (all but answered, ungraded); buried 2 -> 2/7
    assert (b["graded"], b["wrong"], b["buried"]) == (8, 7, 2)
    assert close(b["buried_rate"], 2 / 7)
    lo, hi = wilson(2, 7)
    assert close(b["ci_low"], lo) and close(b["ci_high"], hi)


def test_requests_list_filters_by_class_and_question(client: HttpClient,
                                                     taxonomy: dict[str, str]) -> None:
    f = Filters(service="taxonomy")
    buried = client.requests(f, taxonomy_class="buried")
    assert set(buried["trace_id"]) == {taxonomy["buried"], taxonomy["several"]}
    assert client.last_total == 2
    assert len(client.requests(f, search="REFUND WINDOW", limit=3)) == 3
    assert client.last_total == 9
    assert client.requests(f, search="no such question").empty


# --- accuracy by band and slot ------------------------------------------------------------------


@pytest.fixture(scope="module")
def positions(module_collector: Proc) -> dict[str, str]:
    """No token offsets, so relative position = (slot - 0.5) / k:
    k=3: slot 1 -> 0.167 early, slot 2 -> 0.5 middle, slot 3 -> 0.833 late; k=1: 0.5 middle."""
    s = Sender(module_collector.url, service="position")

    def three(slot: int, correct: bool | None, **kw: object) -> str:
        order = ["x", "y"]
        order.insert(slot - 1, "g")
        chunks = [Chunk("g", label=GOLD), Chunk("x"), Chunk("y")]
        return s.send(record(chunks, prompt(*order),
                             outcome=None if correct is None else Outcome(correct=correct), **kw))

    return {
        "p1": three(1, True), "p2": three(1, False), "p3": three(2, False), "p4": three(3, True),
        "p5": s.send(record([Chunk("g", label=GOLD)], prompt("g"), outcome=Outcome(correct=True))),
        # closed book: no evidence in the prompt at all
        "p6": s.send(record([], (), experiment_id="e-pos", condition="absent",
                            outcome=Outcome(correct=False))),
        "p7": three(1, None),
    }


def test_accuracy_by_band_with_wilson_intervals(client: HttpClient, positions: dict[str, str]) -> None:
    # p6 is a closed-book sweep request: production traffic (the default) has no absent band
    production = rows(client.view("accuracy_by_band", Filters(service="position")), "band")
    assert list(production) == ["early", "middle", "late"]
    band = rows(client.view("accuracy_by_band", Filters(service="position", traffic="all")), "band")
    assert list(band) == ["absent", "early", "middle", "late"]
    assert production["early"] == band["early"]
    # early: p1 (right), p2 (wrong), p7 (ungraded) -> requests 3, n 2, correct 1
    # middle: p3 (wrong), p5 (k=1, right) -> 2, 2, 1; late: p4 -> 1, 1, 1; absent: p6 -> 1, 1, 0
    expected = {"early": (3, 2, 1), "middle": (2, 2, 1), "late": (1, 1, 1), "absent": (1, 1, 0)}
    for name, (requests, n, correct) in expected.items():
        r = band[name]
        assert (r["requests"], r["n"], r["correct"]) == (requests, n, correct), name
        assert close(r["accuracy"], correct / n)
        lo, hi = wilson(correct, n)
        assert close(r["ci_low"], lo) and close(r["ci_high"], hi), name
    # the textbook value: 1 of 2 -> (0.0945, 0.9055)
    assert round(band["early"]["ci_low"], 4) == 0.0945 and round(band["early"]["ci_high"], 4) == 0.9055
    # 0 of 1: lower bound 0, upper z²/(1+z²) = 3.8415/4.8415 = 0.7935
    assert band["absent"]["ci_low"] == 0 and round(band["absent"]["ci_high"], 4) == 0.7935


def test_accuracy_by_slot_is_the_u_curve(client: HttpClient, positions: dict[str, str]) -> None:
    frame = client.view("accuracy_by_slot", Filters(service="position"))
    got = {(r["k"], r["slot"]): (r["requests"], r["n"], r["correct"]) for r in frame.to_dict("records")}
    # k=1 slot 1: p5; k=3 slot 1: p1, p2, p7 (ungraded); slot 2: p3; slot 3: p4; absent has no slot
    assert got == {(1, 1): (1, 1, 1), (3, 1): (3, 2, 1), (3, 2): (1, 1, 0), (3, 3): (1, 1, 1)}


def test_group_by_and_filters_slice_the_same_numbers(client: HttpClient,
                                                     positions: dict[str, str]) -> None:
    both = client.view("accuracy_by_band", Filters(), ["service"])
    position = both[both["service"] == "position"].drop(columns="service").reset_index(drop=True)
    alone = client.view("accuracy_by_band", Filters(service="position"))
    pd.testing.assert_frame_equal(position, alone)
    # a value that looks like SQL is only ever a value: it matches nothing
    assert client.view("accuracy_by_band", Filters(service="position' OR '1'='1")).empty


# --- outcomes merged and superseded --------------------------------------------------------------


def test_posted_outcome_overrides_span_and_newest_time_wins(module_collector: Proc,
                                                            client: HttpClient) -> None:
    s = Sender(module_collector.url, service="merge")
    chunks = [Chunk("a", label=GOLD), Chunk("b"), Chunk("c")]
    # the span says correct, decisive by label: a in slot 1 (early)
    m1 = s.send(record(chunks, prompt("a", "b", "c"), outcome=Outcome(correct=True)))
    before = client.trace(m1)
    assert before is not None and before["taxonomy_class"] == "answered"
    # a posted outcome overrides the span: wrong, and the decisive chunk is b, slot 2 (middle)
    post_outcomes(module_collector.url, {"trace_id": m1, "correct": False, "decisive_chunk_ids": ["b"]})
    after = client.trace(m1)
    assert after is not None
    assert after["outcome"]["correct"] is False
    assert after["request"]["decisive_source"] == "outcome"
    assert after["request"]["decisive_slot"] == 2
    assert after["taxonomy_class"] == "buried"
    assert len(after["outcomes"]) == 2  # every outcome is kept

    m2 = s.send(record(chunks, prompt("a", "b", "c")))
    # posted newest first: the one with the later time wins although it arrived first
    post_outcomes(module_collector.url,
                  {"trace_id": m2, "correct": False, "time": "2026-01-02T00:00:00Z"})
    post_outcomes(module_collector.url,
                  {"trace_id": m2, "correct": True, "time": "2026-01-01T00:00:00Z"})
    merged = client.trace(m2)
    assert merged is not None and merged["outcome"]["correct"] is False
    assert merged["taxonomy_class"] == "unused"  # wrong with a (early) in the prompt

    f = Filters(service="merge")
    assert client.view("overview", f).iloc[0]["graded"] == 2


class _FixedTraceId(RandomIdGenerator):
    def __init__(self, trace_id: int) -> None:
        self.trace_id = trace_id

    def generate_trace_id(self) -> int:
        return self.trace_id


def test_outcome_posted_before_its_trace(module_collector: Proc, client: HttpClient) -> None:
    trace_id = "5eed" * 8
    post_outcomes(module_collector.url, {"trace_id": trace_id, "correct": False})
    s = Sender(module_collector.url, service="early-grade")
    s.tracer.id_generator = _FixedTraceId(int(trace_id, 16))  # type: ignore[attr-defined]
    assert s.send(record([Chunk("g", label=GOLD), Chunk("x")], prompt("g", "x"))) == trace_id
    trace = client.trace(trace_id)
    # the earlier grade applies: wrong, g in slot 1 of 2 ((1 - 0.5) / 2 = 0.25, early): unused
    assert trace is not None and trace["taxonomy_class"] == "unused"


# --- weeks, citations ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weekly(module_collector: Proc) -> dict[str, str]:
    """Week of Mon 2026-10-05: w1a cites the decisive chunk, w1b cites a deprecated chunk instead.
    Week of 2026-10-12: nothing. Week of 2026-10-19: w3 cites the decisive chunk via cited_ids."""
    s = Sender(module_collector.url, service="weekly")
    gold = Chunk("g", label=GOLD, source_id="policy", authority="canonical")
    old = Chunk("o", label="conflicting", source_id="old-policy", authority="deprecated")
    return {
        "w1a": s.send(record([replace(gold, cited=True), old],
                             prompt("g", "o"), outcome=Outcome(correct=True)), ns("2026-10-06")),
        "w1b": s.send(record([gold, replace(old, cited=True)],
                             prompt("g", "o"), outcome=Outcome(correct=False)), ns("2026-10-11")),
        "w3": s.send(record([gold, old], prompt("o", "g"), cited_ids=("g",),
                            outcome=Outcome(correct=True)), ns("2026-10-19")),
    }


def test_weekly_overview_keeps_an_empty_week(client: HttpClient, weekly: dict[str, str]) -> None:
    frame = client.view("weekly_overview", Filters(service="weekly"))
    assert [w.isoformat() if isinstance(w, date) else str(w)[:10] for w in frame["week"]] == [
        "2026-10-05", "2026-10-12", "2026-10-19"]
    w = frame.to_dict("records")
    assert [r["requests"] for r in w] == [2, 0, 1]
    # week 1: 1 of 2 correct; week 2: no graded requests, accuracy unknown; week 3: 1 of 1
    assert close(w[0]["accuracy"], 0.5) and pd.isna(w[1]["accuracy"]) and close(w[2]["accuracy"], 1.0)
    # taxonomy by week has only the weeks with data
    tax = client.view("taxonomy_by_week", Filters(service="weekly"))
    assert sorted({str(x)[:10] for x in tax["week"]}) == ["2026-10-05", "2026-10-19"]


def test_citation_alignment_and_drift(client: HttpClient, weekly: dict[str, str]) -> None:
    f = Filters(service="weekly")
    c = client.view("citation_alignment", f).iloc[0]
    # all 3 have g in the prompt; w1a (cited flag) and w3 (cited_ids) cite it: 2/3
    assert (c["evidence_in_prompt"], c["aligned"], c["citing"]) == (3, 2, 3)
    assert close(c["alignment"], 2 / 3)
    # one of the 3 citing requests cites the deprecated source: 1/3
    assert c["citing_noncanonical"] == 1 and close(c["noncanonical_share"], 1 / 3)
    drift = client.view("citation_drift", f).to_dict("records")
    assert [r["aligned"] for r in drift] == [1, 0, 1]
    assert close(drift[0]["alignment"], 0.5) and pd.isna(drift[1]["alignment"])
    assert close(drift[2]["alignment"], 1.0)
    assert close(drift[0]["noncanonical_share"], 0.5)  # w1b of the 2 citing in week 1
    elsewhere = client.view("cited_sources_elsewhere", f).to_dict("records")
    assert [(r["source_id"], r["authority"], r["requests"], r["instead_of_decisive"])
            for r in elsewhere] == [("old-policy", "deprecated", 1, 1)]


def test_time_filters_are_half_open(client: HttpClient, weekly: dict[str, str]) -> None:
    # [2026-10-06T12:00Z, 2026-10-19) holds w1b only: since is inclusive of w1a's exact time
    f = Filters(service="weekly", since=utc("2026-10-06T12:00:00"), until=utc("2026-10-19"))
    assert client.view("overview", f).iloc[0]["requests"] == 2
    f = Filters(service="weekly", since=utc("2026-10-06T12:00:00.000001"), until=utc("2026-10-19"))
    assert client.view("overview", f).iloc[0]["requests"] == 1
    f = Filters.from_params({"service": "weekly", "since": "2026-10-12", "until": "2026-10-19T12:00:00Z"})
    assert client.view("overview", f).iloc[0]["requests"] == 0  # until excludes w3 at 12:00


# --- constraint recall ------------------------------------------------------------------------------


def test_constraint_recall_by_context_bucket(module_collector: Proc, client: HttpClient) -> None:
    s = Sender(module_collector.url, service="constraints")
    g = [Chunk("g", label=GOLD)]
    s.send(record(g, prompt("g"), prompt_tokens=3000, outcome=Outcome(
        correct=True, required_constraints=("a", "b"), recalled_constraints=("a",))))
    s.send(record(g, prompt("g"), prompt_tokens=20000, outcome=Outcome(
        correct=True, required_constraints=("a",), recalled_constraints=("a",))))
    s.send(record(g, prompt("g"), prompt_tokens=3000, outcome=Outcome(
        correct=True, required_constraints=("a", "b", "c"), recalled_constraints=("a", "b", "c", "x"))))
    s.send(record(g, prompt("g"), prompt_tokens=70000, outcome=Outcome(correct=True)))  # none required
    got = rows(client.view("constraint_recall", Filters(service="constraints")), "context_bucket")
    assert list(got) == ["<4k", "16k-64k"]
    # <4k: required 2 + 3 = 5, recalled 1 + 3 = 4 (x was not required) -> 0.8; 1 of 2 omitted one
    lt4 = got["<4k"]
    assert (lt4["requests"], lt4["required"], lt4["recalled"], lt4["omitting"]) == (2, 5, 4, 1)
    assert close(lt4["recall"], 0.8) and close(lt4["omission_rate"], 0.5)
    lo, hi = wilson(4, 5)
    assert close(lt4["ci_low"], lo) and close(lt4["ci_high"], hi)
    assert close(got["16k-64k"]["recall"], 1.0)
    only = client.view("constraint_recall", Filters(service="constraints", context_bucket="<4k"))
    assert list(only["context_bucket"]) == ["<4k"]


# --- sweeps and unsupported confidence -------------------------------------------------------------


def test_sweep_metrics(module_collector: Proc, client: HttpClient) -> None:
    s = Sender(module_collector.url, service="sweep")

    def run(case: str, condition: str, correct: bool, answer: str, confidence: float = 0.5) -> None:
        chunks = [Chunk("g", decisive=True), Chunk("x"), Chunk("y")]
        order = {"start": ("g", "x", "y"), "middle": ("x", "g", "y"), "end": ("x", "y", "g"),
                 "absent": ()}[condition]
        s.send(record(chunks if order else [], prompt(*order), experiment_id="exp1",
                      strategy="score_order", case_id=case, condition=condition, answer=answer,
                      confidence=confidence, outcome=Outcome(correct=correct)))

    run("c1", "start", True, "14 days")
    run("c1", "middle", False, "30 days", confidence=0.9)  # unsupported: wrong, sure, g in prompt
    run("c1", "end", True, "14 days.")
    run("c1", "absent", False, "I don't know", confidence=0.95)  # sure and wrong, no evidence
    run("c2", "start", True, "14 days")
    run("c2", "middle", True, "14  Days [2]")  # a citation marker does not make it differ
    run("c2", "end", True, " 14 days!")
    run("c2", "absent", False, "30 days")

    f = Filters(service="sweep")
    conditions = rows(client.view("sweep_conditions", f), "condition")
    # start 2/2, middle 1/2, end 2/2, absent 0/2
    assert {k: v["accuracy"] for k, v in conditions.items()} == {
        "absent": 0.0, "end": 1.0, "middle": 0.5, "start": 1.0}
    assert conditions["middle"]["decisive_band"] == "middle"
    assert list(conditions["end"]["decisive_slots"]) == [3]
    assert list(conditions["absent"]["decisive_slots"]) == []
    slots = rows(client.view("sweep_slots", f), "slot")
    # absent has no slot; start, middle, end put g in slots 1, 2, 3
    assert {k: (v["n"], v["correct"]) for k, v in slots.items()} == {1: (2, 2), 2: (2, 1), 3: (2, 2)}
    assert close(slots[2]["ci_low"], wilson(1, 2)[0])
    sweep = client.view("sweep_summary", f).iloc[0]
    # delta: max 1.0 (start, end) - min 0.5 (middle) = 0.5, absent excluded
    assert close(sweep["sensitivity_delta"], 0.5) and sweep["worst_condition"] == "middle"
    assert sweep["conditions"] == 3 and close(sweep["absent_accuracy"], 0.0)
    # n excludes absent: 6 graded, 5 correct
    assert (sweep["n"], sweep["correct"]) == (6, 5)
    # both cases have edge and middle requests; c1 is right at an edge and wrong in every
    # middle request, c2 is right in the middle: 1/2
    assert (sweep["buried_eligible_cases"], sweep["buried_failure_cases"]) == (2, 1)
    assert close(sweep["buried_failure_rate"], 0.5)
    # answers normalised: c1 {"14 days", "30 days"} differ; c2 {"14 days"} agree: 1/2
    assert (sweep["consistency_cases"], sweep["consistent_cases"]) == (2, 1)
    assert close(sweep["answer_consistency"], 0.5)
    assert close(sweep["answer_consistency_ci_high"], wilson(1, 2)[1])
    assert sweep["constraints_required"] == 0 and pd.isna(sweep["constraint_recall"])

    u = client.view("unsupported_confidence", Filters(service="sweep", traffic="experiment")).iloc[0]
    assert client.view("unsupported_confidence", f).iloc[0]["graded"] == 0  # production: none
    # graded with g in the prompt and a confidence: 6 (all but absent); unsupported: c1 middle
    assert (u["graded"], u["graded_with_evidence_and_confidence"], u["unsupported"]) == (8, 6, 1)
    assert u["unsupported_buried"] == 1 and close(u["unsupported_rate"], 1 / 6)


def test_a_case_on_two_models_is_two_cases(module_collector: Proc, client: HttpClient) -> None:
    s = Sender(module_collector.url, service="sweep-models")
    for model, answer in (("model-a", "14 days"), ("model-b", "30 days")):
        for order in (("g", "x", "y"), ("x", "g", "y"), ("x", "y", "g")):
            s.send(record([Chunk("g", decisive=True), Chunk("x"), Chunk("y")], prompt(*order),
                          experiment_id="exp2", strategy="score_order", case_id="c1",
                          condition=f"slot_{order.index('g') + 1}", model=model, answer=answer,
                          outcome=Outcome(correct=answer == "14 days")))
    sweep = client.view("sweep_summary", Filters(service="sweep-models")).iloc[0]
    # Each model gives one answer in all three placements: 2 cases, both consistent, although
    # the two models disagree with each other.
    assert (sweep["cases"], sweep["consistency_cases"], sweep["consistent_cases"]) == (2, 2, 2)
    # model-a is right everywhere, model-b wrong everywhere: neither fails only when buried.
    assert (sweep["buried_eligible_cases"], sweep["buried_failure_cases"]) == (2, 0)


# --- retrieval context ------------------------------------------------------------------------------


def test_retrieval_quality(module_collector: Proc, client: HttpClient) -> None:
    s = Sender(module_collector.url, service="retrieval")
    # g: retrieval rank 2 of 3, first in the prompt of 2
    s.send(record([Chunk("x", retrieval_rank=1), Chunk("g", retrieval_rank=2, label=GOLD),
                   Chunk("y", retrieval_rank=3, stage="dropped", drop_reason="budget")],
                  prompt("g", "x")))
    # the grader's decisive chunk was never retrieved
    t = s.send(record([Chunk("x", retrieval_rank=1)], prompt("x")))
    post_outcomes(module_collector.url, {"trace_id": t, "correct": False, "decisive_chunk_ids": ["zz"]})
    q = client.view("retrieval_quality", Filters(service="retrieval")).iloc[0]
    assert q["requests"] == 2
    # retrieval: hit 1 of 2; RR 1/2 and 0 -> MRR 0.25; NDCG (1/log2(3))/1 and 0 -> 0.315
    assert close(q["retrieval_hit_rate"], 0.5) and close(q["retrieval_mrr"], 0.25)
    assert close(q["retrieval_ndcg"], (1 / math.log2(3)) / 2)
    # prompt: hit 1 of 2; RR 1 and 0 -> 0.5; NDCG 1 and 0 -> 0.5
    assert close(q["prompt_hit_rate"], 0.5) and close(q["prompt_mrr"], 0.5)
    assert close(q["prompt_ndcg"], 0.5)


# --- the list of views, facets, empty results -------------------------------------------------------


def test_views_are_listed_with_descriptions(client: HttpClient) -> None:
    names = {v["name"]: v for v in client.views()}
    for name in ("accuracy_by_band", "accuracy_by_slot", "failure_taxonomy", "buried_rate",
                 "taxonomy_by_week", "citation_alignment", "citation_drift", "constraint_recall",
                 "sweep_summary", "unsupported_confidence", "retrieval_quality", "weekly_overview"):
        assert names[name]["description"], name


def test_facets_and_an_empty_slice(client: HttpClient, taxonomy: dict[str, str]) -> None:
    facets = client.facets()
    assert "taxonomy" in facets["service"] and facets["time"]["min"] is not None
    for view in ("overview", "accuracy_by_band", "failure_taxonomy", "weekly_overview",
                 "sweep_summary", "citation_drift"):
        frame = client.view(view, Filters(service="nobody"), ["week"])
        if view == "overview":
            assert frame.empty or frame.iloc[0]["requests"] == 0
        else:
            assert frame.empty, view
