"""The findings that open the report and the Overview: called changes, ranked, said plainly."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from midtrace import findings

BEFORE, AFTER = "2026-11-02", "2026-11-09"


def weekly(rows: list[tuple], key: str | None = None) -> pd.DataFrame:
    """weekly_overview rows: (key value,) week, requests, graded, correct, wrong, buried,
    evidence_in_prompt, citations_aligned."""
    cols = ["week", "requests", "graded", "correct", "wrong", "buried", "evidence_in_prompt",
            "citations_aligned"]
    return pd.DataFrame(rows, columns=([key] if key else []) + cols)


def frames(whole: pd.DataFrame, **by_key: pd.DataFrame) -> dict:
    out = {("weekly_overview", None): whole}
    out.update({("weekly_overview", k): f for k, f in by_key.items()})
    return out


def test_a_change_is_called_by_the_z_test_and_said_with_its_numbers() -> None:
    whole = weekly([(BEFORE, 400, 200, 150, 50, 10, 300, 200),
                    (AFTER, 400, 200, 150, 50, 30, 300, 195)])
    review = findings.review(frames(whole), date(2026, 11, 9), min_n=30)
    assert [f.metric for f in review.findings] == ["buried_rate"]  # alignment 66.7 -> 65%: noise
    f = review.findings[0]
    assert (f.before, f.after, f.before_n, f.after_n) == (0.2, 0.6, 50, 50)
    assert f.z > 0 and f.p_value < 0.001 and f.ci_low is not None and 0 < f.ci_low < 0.4 < f.ci_high
    assert f.text.startswith("Buried rate rose from 20.0% to 60.0% (10 of 50 → 30 of 50 wrong "
                             "answers; +40.0 points, 95% CI +")
    assert f.text.endswith("; p < 0.001).")
    record = f.to_json()
    assert record["slice"] == {} and record["before"] == {"n": 50, "value": 0.2, "count": 10}
    assert record["assessment"] == "worse" and record["new_slice"] is False


def test_too_few_in_a_week_is_never_a_finding() -> None:
    whole = weekly([(BEFORE, 40, 20, 15, 5, 0, 30, 20), (AFTER, 40, 20, 5, 15, 15, 30, 20)])
    review = findings.review(frames(whole), date(2026, 11, 9), min_n=30)
    assert review.findings == [] and review.summary.startswith("Nothing moved beyond noise")


def test_no_week_before_says_so() -> None:
    whole = weekly([(AFTER, 400, 200, 150, 50, 30, 300, 195)])
    review = findings.review(frames(whole), date(2026, 11, 9), min_n=30)
    assert review.findings == [] and "Nothing to compare" in review.summary


def test_a_new_slice_is_compared_with_all_traffic_the_week_before() -> None:
    whole = weekly([(BEFORE, 400, 200, 150, 50, 10, 300, 200),
                    (AFTER, 400, 200, 140, 60, 25, 300, 200)])
    by_template = weekly([("v1", BEFORE, 400, 200, 150, 50, 10, 300, 200),
                          ("v1", AFTER, 200, 100, 80, 20, 3, 150, 100),
                          ("<b>v2</b>", BEFORE, 0, 0, 0, 0, 0, 0, 0),
                          ("<b>v2</b>", AFTER, 200, 100, 60, 40, 22, 150, 100)], "template")
    review = findings.review(frames(whole, template=by_template), date(2026, 11, 9), min_n=30)
    new = [f for f in review.findings if f.new_slice and f.metric == "buried_rate"]
    assert len(new) == 1 and new[0].value == "<b>v2</b>"
    assert (new[0].before_count, new[0].before_n) == (10, 50)  # all traffic the week before
    assert new[0].text.startswith("The new template <b>v2</b> (first seen this week): buried rate "
                                  "55.0% (22 of 40 wrong answers), against 20.0% (10 of 50)")
    # findings come strongest first
    assert [abs(f.z) for f in review.findings] == sorted((abs(f.z) for f in review.findings),
                                                         reverse=True)


def test_a_slice_that_moves_with_the_whole_is_not_news() -> None:
    whole = weekly([(BEFORE, 800, 400, 300, 100, 20, 600, 400),
                    (AFTER, 800, 400, 300, 100, 60, 600, 400)])
    by_model = weekly([("a", BEFORE, 400, 200, 150, 50, 10, 300, 200),
                       ("a", AFTER, 400, 200, 150, 50, 30, 300, 200),
                       ("b", BEFORE, 400, 200, 150, 50, 10, 300, 200),
                       ("b", AFTER, 400, 200, 150, 50, 30, 300, 200)], "model")
    found = findings.candidates(frames(whole, model=by_model), date(2026, 11, 9), min_n=30)
    assert {(f.metric, f.value) for f in found} == {("buried_rate", None), ("buried_rate", "a"),
                                                    ("buried_rate", "b")}
    assert [(f.metric, f.value) for f in findings.select(found)] == [("buried_rate", None)]


def test_early_placement_never_reached_by_a_new_slice() -> None:
    bands = pd.DataFrame([(t, w, b, r) for t, w, b, r in [
        ("v1", BEFORE, "early", 60), ("v1", BEFORE, "middle", 20), ("v1", BEFORE, "late", 20),
        ("v1", AFTER, "early", 30), ("v1", AFTER, "middle", 10), ("v1", AFTER, "late", 10),
        ("v2", AFTER, "middle", 40), ("v2", AFTER, "late", 10), ("v2", AFTER, "absent", 5)]],
        columns=["template", "week", "band", "requests"])
    whole_bands = bands.groupby(["week", "band"], as_index=False)["requests"].sum()
    whole = weekly([(BEFORE, 100, 0, 0, 0, 0, 100, 0), (AFTER, 105, 0, 0, 0, 0, 100, 0)])
    by_template = weekly([("v1", BEFORE, 100, 0, 0, 0, 0, 100, 0),
                          ("v1", AFTER, 50, 0, 0, 0, 0, 50, 0),
                          ("v2", AFTER, 55, 0, 0, 0, 0, 50, 0)], "template")
    review = findings.review({**frames(whole, template=by_template),
                              ("accuracy_by_band", None): whole_bands,
                              ("accuracy_by_band", "template"): bands},
                             date(2026, 11, 9), min_n=30)
    texts = [f.text for f in review.findings]
    assert texts[0].startswith("The new template v2 (first seen this week) never put decisive "
                               "evidence early in the prompt (0 of 50 requests with decisive "
                               "evidence in the prompt), against 60.0% (60 of 100)")


def test_the_interval_of_a_change_is_newcombes() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 - 48/80
    lo, hi = findings.change_interval(48, 80, 56, 70)
    assert (lo, hi) == pytest.approx((0.0524, 0.3339), abs=1e-4)


def test_the_reads_cover_every_metric_and_slice() -> None:
    reads = findings.reads()
    assert ("weekly_overview", ("week",)) in reads and ("accuracy_by_band", ("template", "week")) in reads
    assert {v for v, _ in reads} == {m.view for m in findings.METRICS}
