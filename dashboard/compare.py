"""The layout decision on the Experiments page: pure pandas over the sweep views' frames.

Which strategy is the baseline (the one production uses), each other strategy against it
(the difference in accuracy with its interval, a verdict, and how many more cases would
decide it), and accuracy averaged over retrieval ranks, uniformly and weighted as production
traffic spreads its decisive chunks over the ranks. The statistics are
midtrace.schemas.stats; docs/metrics.md ("Comparing two strategies") gives the formulas.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from midtrace.schemas.stats import (SIGNIFICANCE, mcnemar_test, paired_difference,
                                    paired_sample_size, two_proportion_test,
                                    unpaired_difference, unpaired_sample_size, weighted_accuracy)

FALLBACK_BASELINE = "score_order"
BETTER, WORSE, UNDECIDED = "better", "worse", "not distinguishable at this n"
IMPRACTICAL = 20  # more than this many times the cases already run: say it is out of reach


def baseline(production: pd.DataFrame, strategies: Iterable[str]) -> tuple[str | None, str]:
    """The strategy the others are compared against, and why it is the one.

    ``production`` is the ``overview`` view grouped by strategy over production traffic
    (``strategy``, ``requests``). The baseline is the strategy most production requests were
    packed with (a tie goes to the name first in text order), when the experiment ran it;
    else ``score_order``; else the experiment's first strategy by name.
    """
    ran = sorted({str(s) for s in strategies})
    if not ran:
        return None, "The experiment recorded no packing strategy."
    used = production.dropna(subset=["strategy"]) if not production.empty else production
    used = used[used["requests"] > 0] if not used.empty else used
    if not used.empty:
        used = used.assign(_s=used["strategy"].astype(str)).sort_values(
            ["requests", "_s"], ascending=[False, True])
        top = used.iloc[0]
        name, count, total = str(top["_s"]), int(top["requests"]), int(used["requests"].sum())
        share = f"{count:,} of {total:,} production requests with a strategy in this range"
        if name in ran:
            return name, f"Baseline: {name}, the packing strategy production uses now ({share})."
        why = f"production uses {name} ({share}), which this experiment did not run"
    else:
        why = "no production request in this range records its packing strategy"
    if FALLBACK_BASELINE in ran:
        return FALLBACK_BASELINE, f"Baseline: {FALLBACK_BASELINE}, since {why}."
    return ran[0], f"Baseline: {ran[0]}, the first strategy by name, since {why} and the " \
                   f"experiment did not run {FALLBACK_BASELINE}."


def best_other(summary: pd.DataFrame, reference: str) -> str | None:
    """The non-baseline strategy with the highest accuracy (ties by name): the default
    candidate, so the page opens on the comparison that decides what to ship."""
    others = summary[(summary["strategy"].astype(str) != reference)
                     & summary["accuracy"].notna()] if not summary.empty else summary
    if others.empty:
        rest = sorted({str(s) for s in summary.get("strategy", [])} - {reference})
        return rest[0] if rest else None
    ranked = others.assign(_s=others["strategy"].astype(str)).sort_values(
        ["accuracy", "_s"], ascending=[False, True])
    return str(ranked.iloc[0]["_s"])


@dataclass(frozen=True)
class Comparison:
    """Candidate ``strategy`` against ``versus``: accuracies, their difference (strategy minus
    versus) with its 95% interval, the test behind the verdict, and what would decide it."""

    strategy: str
    versus: str
    method: str  # "paired" (same cases under both) or "unpaired"
    n: int  # pairs, or the smaller side's graded requests
    cases: int | None
    accuracy: float | None
    versus_accuracy: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    z: float | None
    p_value: float | None
    verdict: str
    more_cases: int | None  # None: no difference seen, or already decided
    more_requests: int | None  # pairs (paired) or graded requests per strategy (unpaired)
    unpaired: int  # eligible graded requests of either side left without a pair


def _row(frame: pd.DataFrame, **match: str) -> Mapping[str, Any] | None:
    if frame.empty:
        return None
    keep = pd.Series(True, index=frame.index)
    for col, value in match.items():
        keep &= frame[col].astype(str) == value
    rows = frame[keep]
    return rows.iloc[0].to_dict() if not rows.empty else None


def _int(value: Any) -> int:
    try:
        return 0 if value is None or pd.isna(value) else int(value)
    except (TypeError, ValueError):
        return 0


def _verdict(difference: float | None, p: float | None) -> str:
    if difference is None or p is None or p >= SIGNIFICANCE:
        return UNDECIDED
    return BETTER if difference > 0 else WORSE


def compare(summary: pd.DataFrame, pairs: pd.DataFrame, strategy: str,
            versus: str) -> Comparison | None:
    """``strategy`` against ``versus``: paired by case (sweep_pairs) when the two share any
    case, else as two independent samples (sweep_summary's graded requests). None when
    either has no graded request."""
    pair = _row(pairs, strategy=strategy, versus=versus)
    if pair is not None and _int(pair.get("pairs")) > 0:
        n = _int(pair["pairs"])
        only_a, only_b = _int(pair["only_versus_right"]), _int(pair["only_strategy_right"])
        both = _int(pair["both_right"])
        difference, low, high = paired_difference(only_a, only_b, n)
        z, p = mcnemar_test(only_a, only_b)
        verdict = _verdict(difference, p)
        cases = _int(pair.get("cases")) or None
        more_cases = more = None
        needed = paired_sample_size(only_a, only_b, n) if verdict == UNDECIDED else None
        if needed is not None:
            more = max(1, math.ceil(needed) - n)
            per_case = n / cases if cases else 1.0
            more_cases = max(1, math.ceil(more / per_case))
        unpaired = (_int(pair.get("strategy_n")) - n) + (_int(pair.get("versus_n")) - n)
        return Comparison(strategy, versus, "paired", n, cases, (both + only_b) / n,
                          (both + only_a) / n, difference, low, high, z, p, verdict,
                          more_cases, more, max(0, unpaired))
    a, b = _row(summary, strategy=versus), _row(summary, strategy=strategy)
    if a is None or b is None or not _int(a.get("n")) or not _int(b.get("n")):
        return None
    n_a, x_a, n_b, x_b = _int(a["n"]), _int(a["correct"]), _int(b["n"]), _int(b["correct"])
    difference, low, high = unpaired_difference(x_a, n_a, x_b, n_b)
    z, p = two_proportion_test(x_a, n_a, x_b, n_b)
    verdict = _verdict(difference, p)
    more_cases = more = None
    needed = unpaired_sample_size(x_a / n_a, x_b / n_b) if verdict == UNDECIDED else None
    if needed is not None:
        more = max(1, math.ceil(needed) - min(n_a, n_b))
        cases = min(_int(a.get("cases")), _int(b.get("cases")))
        if cases:
            more_cases = max(1, math.ceil(more / (min(n_a, n_b) / cases)))
    return Comparison(strategy, versus, "unpaired", min(n_a, n_b), None, x_b / n_b, x_a / n_a,
                      difference, low, high, z, p, verdict, more_cases, more, 0)


def against(summary: pd.DataFrame, pairs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Every other strategy of the experiment against ``reference``, one row each."""
    names = sorted({str(s) for s in summary.get("strategy", pd.Series(dtype=str)).dropna()})
    rows = [compare(summary, pairs, s, reference) for s in names if s != reference]
    cols = list(Comparison.__dataclass_fields__)
    return pd.DataFrame([asdict(r) for r in rows if r is not None], columns=cols)


def points(value: float | None) -> str:
    """A difference of two rates in percentage points, signed."""
    return "—" if value is None or pd.isna(value) else f"{value * 100:+.1f} pts"


def sentence(c: Comparison) -> str:
    """The verdict in one line (strategy names are trace data: show it as text, not Markdown)."""
    how = (f"paired over {c.n:,} requests of {c.cases:,} cases" if c.method == "paired"
           and c.cases else f"paired over {c.n:,} requests" if c.method == "paired"
           else f"unpaired, at least {c.n:,} graded requests each")
    test = "McNemar" if c.method == "paired" else "two-proportion z-test"
    line = (f"{c.strategy} against {c.versus}: {points(c.difference)} "
            f"(95% interval {points(c.ci_low)} to {points(c.ci_high)}; {how}; {test} "
            f"p = {c.p_value:.3f}) → {c.verdict}")
    if c.verdict == UNDECIDED:
        if c.more_requests is None:
            line += "; no difference seen, so no number of cases would decide it"
        else:
            unit = "pairs" if c.method == "paired" else "graded requests per strategy"
            cases = f"about {c.more_cases:,} more cases ({c.more_requests:,} {unit})" \
                if c.more_cases else f"about {c.more_requests:,} more {unit}"
            if c.more_requests > IMPRACTICAL * c.n:
                line += (f"; a difference this small is beyond a practical sweep: {cases} "
                         "would decide it with 80% power")
            else:
                line += (f"; {cases} would decide it with 80% power if the difference is as "
                         "large as seen")
    return line + "."


def rank_averages(ranks: pd.DataFrame, weights: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, accuracy averaged over the decisive chunk's retrieval ranks: uniformly
    (every rank the sweep tested counts the same; any reordering of the same prompt has the
    same uniform average in expectation) and weighted by the share of production requests
    whose decisive chunk sat at that rank (what production would see). ``ranks`` is
    sweep_ranks, ``weights`` decisive_ranks; ``covered`` is the production share at ranks the
    sweep tested (the weights are renormalised over them)."""
    cols = ["strategy", "ranks", "uniform", "uniform_low", "uniform_high", "weighted",
            "weighted_low", "weighted_high", "covered"]
    if ranks.empty:
        return pd.DataFrame(columns=cols)
    share = ({int(r): float(s) for r, s in zip(weights["retrieval_rank"], weights["share"],
                                                 strict=True)}
             if not weights.empty else {})
    rows = []
    for name, part in ranks.groupby(ranks["strategy"].astype(str), sort=True):
        graded = part[part["n"] > 0]
        strata = [(int(r), float(x), float(m)) for r, x, m in
                  zip(graded["retrieval_rank"], graded["correct"], graded["n"], strict=True)]
        uniform = weighted_accuracy((1.0, x, m) for _, x, m in strata)
        weighted = weighted_accuracy((share.get(r, 0.0), x, m) for r, x, m in strata)
        covered = sum(share.get(r, 0.0) for r, _, _ in strata) if share else None
        rows.append([name, len(strata), *uniform, *weighted, covered])
    return pd.DataFrame(rows, columns=cols)


def _rate(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else f"{float(value):.1%}"


def _interval(low: Any, high: Any, fmt: Any) -> str:
    return "—" if low is None or pd.isna(low) else f"{fmt(low)} to {fmt(high)}"


def table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """:func:`against`'s rows as the page lists them (A being the baseline, named above the
    table): human column names, rates as percentages, differences in percentage points."""
    def pts(v: Any) -> str:
        return points(v).removesuffix(" pts")

    rows = [{"strategy (B)": r.strategy, "method": r.method, "n": r.n,
             "accuracy B": _rate(r.accuracy), "accuracy A": _rate(r.versus_accuracy),
             "B − A (pts)": pts(r.difference),
             "95% (pts)": _interval(r.ci_low, r.ci_high, pts),
             "p": "—" if r.p_value is None or pd.isna(r.p_value) else f"{r.p_value:.3f}",
             "verdict": r.verdict,
             "more cases": "—" if r.more_cases is None or pd.isna(r.more_cases)
             else f"{int(r.more_cases):,}"}
            for r in comparisons.itertuples()]
    return pd.DataFrame(rows, columns=["strategy (B)", "method", "n", "accuracy B",
                                       "accuracy A", "B − A (pts)", "95% (pts)", "p",
                                       "verdict", "more cases"])


def averages_table(averages: pd.DataFrame) -> pd.DataFrame:
    """:func:`rank_averages` as the page lists it: each average beside its interval."""
    rows = [{"strategy": r.strategy, "ranks tested": r.ranks,
             "uniform over ranks": _rate(r.uniform),
             "95% interval": _interval(r.uniform_low, r.uniform_high, _rate),
             "production-weighted": _rate(r.weighted),
             "95% interval (weighted)": _interval(r.weighted_low, r.weighted_high, _rate),
             "production at these ranks": _rate(r.covered)}
            for r in averages.itertuples()]
    return pd.DataFrame(rows, columns=["strategy", "ranks tested", "uniform over ranks",
                                       "95% interval", "production-weighted",
                                       "95% interval (weighted)", "production at these ranks"])
