"""The layout decision's frames and figures (dashboard/compare.py, figures.rank_*), checked
against frames built by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from midtrace.dashboard import compare, figures
from midtrace.schemas.stats import paired_difference, unpaired_difference


def production(**requests: int) -> pd.DataFrame:
    return pd.DataFrame({"strategy": list(requests), "requests": list(requests.values())})


def test_the_baseline_is_what_production_uses() -> None:
    used = production(edge=30, score_order=70)
    assert compare.baseline(used, ["edge", "score_order", "reverse"]) == (
        "score_order", "Baseline: score_order, the packing strategy production uses now (70 of "
        "100 production requests with a strategy in this range).")
    # production packs with edge: edge is the baseline even though score_order ran too
    assert compare.baseline(production(edge=70, score_order=30), ["edge", "score_order"])[0] \
        == "edge"
    # a tie goes to the name first in text order; requests without a strategy do not count
    tied = pd.concat([production(reverse=5, edge=5),
                      pd.DataFrame({"strategy": [None], "requests": [90]})])
    assert compare.baseline(tied, ["reverse", "edge"])[0] == "edge"


def test_without_production_s_strategy_the_baseline_is_score_order() -> None:
    name, why = compare.baseline(production(custom=50), ["edge", "score_order"])
    assert name == "score_order"
    assert "production uses custom (50 of 50" in why and "did not run" in why
    name, why = compare.baseline(production(), ["edge", "score_order"])
    assert name == "score_order" and "no production request" in why
    assert compare.baseline(production(), ["reverse", "edge"])[0] == "edge"
    assert compare.baseline(production(), [])[0] is None


def summary() -> pd.DataFrame:
    return pd.DataFrame({"strategy": ["score_order", "edge", "reverse"],
                         "n": [100, 100, 80], "correct": [60, 75, 40],
                         "accuracy": [0.6, 0.75, 0.5], "cases": [10, 10, 8]})


def pairs(strategy: str = "edge", versus: str = "score_order", both: int = 55,
          only_s: int = 20, only_v: int = 5, neither: int = 20) -> pd.DataFrame:
    n = both + only_s + only_v + neither
    return pd.DataFrame([
        {"strategy": strategy, "versus": versus, "pairs": n, "cases": 10, "both_right": both,
         "only_strategy_right": only_s, "only_versus_right": only_v, "both_wrong": neither,
         "strategy_n": 100, "versus_n": 100},
        {"strategy": versus, "versus": strategy, "pairs": n, "cases": 10, "both_right": both,
         "only_strategy_right": only_v, "only_versus_right": only_s, "both_wrong": neither,
         "strategy_n": 100, "versus_n": 100}])


def test_the_default_candidate_is_the_most_accurate_other_strategy() -> None:
    assert compare.best_other(summary(), "score_order") == "edge"
    assert compare.best_other(summary(), "edge") == "score_order"


def test_paired_when_the_cases_are_the_same() -> None:
    c = compare.compare(summary(), pairs(), "edge", "score_order")
    assert c is not None and c.method == "paired" and c.n == 100 and c.cases == 10
    # edge alone right in 20 pairs, score_order alone in 5: +15 pts, McNemar z = 15 / 5 = 3
    assert c.difference == pytest.approx(0.15) and c.z == pytest.approx(3.0)
    assert c.p_value == pytest.approx(math.erfc(3 / math.sqrt(2)))
    assert (c.ci_low, c.ci_high) == paired_difference(5, 20, 100)[1:]
    assert c.verdict == "better" and c.more_cases is None and c.unpaired == 0
    assert (c.accuracy, c.versus_accuracy) == (0.75, 0.6)
    back = compare.compare(summary(), pairs(), "score_order", "edge")
    assert back is not None and back.verdict == "worse"
    assert back.difference == pytest.approx(-0.15)


def test_not_distinguishable_says_how_many_more_cases_would_decide_it() -> None:
    c = compare.compare(summary(), pairs(only_s=12, only_v=8, both=60), "edge", "score_order")
    assert c is not None and c.verdict == "not distinguishable at this n"
    # psi = 0.2, d = 0.04: (1.959964 * 0.447214 + 0.841621 * sqrt(0.1984))^2 / 0.0016
    # = (0.876522 + 0.374876)^2 / 0.0016 = 978.7 pairs: 979 - 100 = 879 more, at 10 pairs a
    # case 88 more cases
    assert c.more_requests == 879 and c.more_cases == 88
    assert compare.sentence(c) == (
        "edge against score_order: +4.0 pts (95% interval "
        f"{c.ci_low * 100:+.1f} pts to {c.ci_high * 100:+.1f} pts; paired over 100 requests "
        "of 10 cases; McNemar p = 0.371) → not distinguishable at this n; about 88 more cases "
        "(879 pairs) would decide it with 80% power if the difference is as large as seen.")
    # more than 20 times the pairs already run is out of a sweep's reach, and says so
    tiny = compare.compare(summary(), pairs(only_s=41, only_v=40, both=0, neither=19), "edge",
                           "score_order")
    assert tiny is not None and "beyond a practical sweep" in compare.sentence(tiny)
    same = compare.compare(summary(), pairs(only_s=10, only_v=10, both=60), "edge", "score_order")
    assert same is not None and same.more_cases is None
    assert "no difference seen" in compare.sentence(same)


def test_unpaired_when_no_case_is_shared() -> None:
    c = compare.compare(summary(), pairs().iloc[0:0], "reverse", "score_order")
    assert c is not None and c.method == "unpaired" and c.n == 80
    assert (c.difference, c.ci_low, c.ci_high) == unpaired_difference(60, 100, 40, 80)
    assert c.verdict == "not distinguishable at this n"  # z = -1.36, p = 0.17
    # 0.6 -> 0.5: (1.959964 sqrt(2 * 0.55 * 0.45) + 0.841621 sqrt(0.24 + 0.25))^2 / 0.01
    # = 387.34 per strategy: 388 - 80 = 308 more requests, 10 requests a case: 31 more cases
    assert c.more_requests == 308 and c.more_cases == 31
    assert "unpaired, at least 80 graded requests each; two-proportion z-test" \
        in compare.sentence(c)
    assert compare.compare(summary(), pairs(), "missing", "score_order") is None


def test_against_lists_every_other_strategy_once() -> None:
    frame = compare.against(summary(), pairs(), "score_order")
    assert list(frame["strategy"]) == ["edge", "reverse"]
    assert list(frame["method"]) == ["paired", "unpaired"]
    shown = compare.table(frame)
    assert list(shown["B − A (pts)"]) == ["+15.0", "-10.0"]
    assert shown["verdict"].tolist() == ["better", "not distinguishable at this n"]


def ranks() -> pd.DataFrame:
    return pd.DataFrame({
        "strategy": ["edge"] * 3 + ["score_order"] * 3,
        "retrieval_rank": [1, 2, 3] * 2,
        "n": [10, 10, 10] * 2, "correct": [9, 9, 5, 9, 5, 5],
        "accuracy": [0.9, 0.9, 0.5, 0.9, 0.5, 0.5],
        "ci_low": [0.6] * 6, "ci_high": [0.98] * 6,
        "slot": [1, 3, 2, 1, 2, 3], "slots": [[1], [3], [2], [1], [2], [3]],
        "band": ["early", "late", "middle", "early", "middle", "late"],
        "middle_share": [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]})


def test_rank_averages_uniform_and_weighted_by_production() -> None:
    weights = pd.DataFrame({"retrieval_rank": [1, 2, 3, 12], "requests": [60, 20, 10, 10],
                            "share": [0.6, 0.2, 0.1, 0.1]})
    out = compare.rank_averages(ranks(), weights).set_index("strategy")
    # uniform: every tested rank alike; weighted: 0.6, 0.2, 0.1 renormalised over 0.9
    assert out.loc["edge", "uniform"] == pytest.approx((0.9 + 0.9 + 0.5) / 3)
    assert out.loc["score_order", "uniform"] == pytest.approx((0.9 + 0.5 + 0.5) / 3)
    assert out.loc["edge", "weighted"] == pytest.approx((0.54 + 0.18 + 0.05) / 0.9)
    assert out.loc["score_order", "weighted"] == pytest.approx((0.54 + 0.1 + 0.05) / 0.9)
    assert out.loc["edge", "covered"] == pytest.approx(0.9)
    assert out.loc["edge", "weighted_low"] < out.loc["edge", "weighted"] \
        < out.loc["edge", "weighted_high"]
    alone = compare.rank_averages(ranks(), weights.iloc[0:0]).set_index("strategy")
    assert alone.loc["edge", "weighted"] is None and alone.loc["edge", "covered"] is None
    shown = compare.averages_table(out.reset_index())
    assert shown.iloc[0]["uniform over ranks"] == "76.7%"


def test_rank_accuracy_labels_its_axis_and_draws_production_behind() -> None:
    weights = pd.DataFrame({"retrieval_rank": [1, 2, 3, 12], "requests": [60, 20, 10, 10],
                            "share": [0.6, 0.2, 0.1, 0.1]})
    fig = figures.rank_accuracy(ranks(), weights)
    assert fig.layout.xaxis.title.text == figures.RANK_AXIS
    behind, *lines = fig.data
    assert list(behind.x) == [1, 2, 3] and behind.yaxis == "y2"  # rank 12 was not tested
    assert fig.layout.yaxis2.title.text == "share of production requests"
    assert fig.layout.yaxis.title.text == "accuracy"
    assert [t.name for t in lines] == ["edge", "score_order"]
    assert list(lines[0].y) == [0.9, 0.9, 0.5]


def test_rank_landing_shows_each_rank_s_slot_and_band_with_names_escaped() -> None:
    frame = ranks()
    frame.loc[frame["strategy"] == "edge", "strategy"] = "<b>edge</b>"
    fig = figures.rank_landing(frame)
    grid = fig.data[0]
    assert list(grid.y) == ["&lt;b&gt;edge&lt;/b&gt;", "score_order"]
    assert [list(r) for r in grid.text] == [["slot 1", "slot 3", "slot 2"],
                                            ["slot 1", "slot 2", "slot 3"]]
    assert [list(r) for r in grid.z] == [[0, 2, 1], [0, 1, 2]]  # early, late, middle ...
    assert "<b>edge" not in str(grid.hovertext)
    assert fig.layout.xaxis.title.text == figures.RANK_AXIS
