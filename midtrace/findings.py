"""What changed this week: the week-over-week changes that are unlikely to be noise.

The report (midtrace/report.py) and the dashboard's Overview both open with these findings,
and the Overview's slice chart calls its changes with the same test, so the two can never
disagree. A change is *called* when both weeks have at least ``min_n`` (the database's
setting) in its denominator and the pooled two-proportion z-test gives p < 0.05
(midtrace.schemas.stats). Every number comes from a metric view; this module only compares
two weeks of them. Pure functions of data frames, except :func:`collect`, which is handed the
function that reads a view.

A *new slice* (a template, model, packing strategy or context length with no requests the
week before) is compared with all traffic of the week before: what it replaced.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import pandas as pd

from midtrace.schemas.stats import SIGNIFICANCE, two_proportion_test, wilson

MAX_FINDINGS = 5
DIMENSIONS: tuple[str, ...] = ("model", "template", "strategy", "context_bucket")
DIMENSION_NAMES = {"model": "model", "template": "template", "strategy": "packing strategy",
                   "context_bucket": "context length", "service": "service"}
# A slice holding this share of the traffic in both weeks only restates the whole.
RESTATES_THE_WHOLE = 0.9
BANDS = ("early", "middle", "late")


@dataclass(frozen=True)
class Metric:
    """A rate compared week over week: ``count`` of ``total``, summed from ``view``'s rows
    (rows failing ``count_where`` / ``total_where`` count 0)."""

    name: str
    label: str
    view: str
    count: str
    total: str
    noun: str  # what the total counts
    higher_is_better: bool
    count_where: tuple[str, tuple[str, ...]] | None = None
    total_where: tuple[str, tuple[str, ...]] | None = None
    never: str | None = None  # the sentence's verb when a new slice's rate is 0


METRICS: tuple[Metric, ...] = (
    Metric("accuracy", "Accuracy", "weekly_overview", "correct", "graded", "graded answers", True),
    Metric("buried_rate", "Buried rate", "weekly_overview", "buried", "wrong", "wrong answers",
           False),
    Metric("citation_alignment", "Citation alignment", "weekly_overview", "citations_aligned",
           "evidence_in_prompt", "requests with decisive evidence in the prompt", True),
    Metric("evidence_early", "Early placement of decisive evidence", "accuracy_by_band", "requests",
           "requests", "requests with decisive evidence in the prompt", True,
           count_where=("band", ("early",)), total_where=("band", BANDS),
           never="never put decisive evidence early in the prompt"),
    Metric("noncanonical_share", "Citations of deprecated or non-canonical sources", "citation_drift",
           "citing_noncanonical", "citing", "answers that cite", False),
    Metric("constraint_recall", "Constraint recall", "constraint_recall", "recalled", "required",
           "required constraints", True),
)
VIEWS: tuple[str, ...] = tuple(dict.fromkeys(m.view for m in METRICS))


@dataclass(frozen=True)
class Finding:
    metric: str
    dimension: str | None  # None: all traffic
    value: str | None
    before_n: int
    before_count: int
    after_n: int
    after_count: int
    z: float
    p_value: float
    new_slice: bool
    ci_low: float | None
    ci_high: float | None
    text: str

    @property
    def before(self) -> float:
        return self.before_count / self.before_n

    @property
    def after(self) -> float:
        return self.after_count / self.after_n

    @property
    def change(self) -> float:
        return self.after - self.before

    def to_json(self) -> dict[str, Any]:
        """The report's JSON form (docs/report-schema.md, ``findings``)."""
        metric = METRIC_BY_NAME[self.metric]
        return {
            "metric": self.metric,
            "slice": {} if self.dimension is None else {self.dimension: self.value},
            "before": {"n": self.before_n, "value": self.before, "count": self.before_count},
            "after": {"n": self.after_n, "value": self.after, "count": self.after_count},
            "change": self.change,
            "change_ci": [self.ci_low, self.ci_high],
            "z": self.z,
            "p_value": self.p_value,
            "new_slice": self.new_slice,
            "assessment": "better" if (self.change > 0) == metric.higher_is_better else "worse",
            "text": self.text,
        }


METRIC_BY_NAME = {m.name: m for m in METRICS}


# --- the test ----------------------------------------------------------------------------------


def judge_change(x_before: float, n_before: float, x_after: float, n_after: float,
                 min_n: float) -> tuple[bool, float | None, float | None]:
    """``(called, z, p)`` of the change from ``x_before/n_before`` to ``x_after/n_after``:
    called when both weeks have at least ``min_n`` and p < 0.05; no z or p when either n is 0."""
    z, p = two_proportion_test(x_before, n_before, x_after, n_after)
    called = p is not None and p < SIGNIFICANCE and min(n_before, n_after) >= min_n
    return called, z, p


def change_called(before: float, n_before: int, after: float, n_after: int,
                  min_n: float) -> tuple[bool, float | None]:
    """Whether a week-over-week change of a rate is called (coloured better or worse), and
    its p: both weeks at least ``min_n`` and the two-proportion z-test below 0.05."""
    if min(n_before, n_after) < min_n:
        return False, None
    called, _, p = judge_change(round(before * n_before), n_before, round(after * n_after),
                                n_after, min_n)
    return called, p


def change_interval(x_before: float, n_before: float, x_after: float,
                    n_after: float) -> tuple[float | None, float | None]:
    """The 95% interval of the change ``after - before`` of two proportions: Newcombe's
    hybrid score interval, built from the Wilson intervals the views show."""
    lo1, hi1 = wilson(x_before, n_before)
    lo2, hi2 = wilson(x_after, n_after)
    if lo1 is None or hi1 is None or lo2 is None or hi2 is None:
        return None, None
    p1, p2 = x_before / n_before, x_after / n_after
    d = p2 - p1
    return (d - math.sqrt((p2 - lo2) ** 2 + (hi1 - p1) ** 2),
            d + math.sqrt((hi2 - p2) ** 2 + (p1 - lo1) ** 2))


# --- two weeks of counts -----------------------------------------------------------------------


def newest_week(weekly: pd.DataFrame) -> date | None:
    """The newest week with requests in weekly_overview rows (any grouping)."""
    if weekly.empty or "week" not in weekly:
        return None
    rows = weekly[weekly["requests"] > 0] if "requests" in weekly else weekly
    if rows.empty:
        return None
    return pd.Timestamp(rows["week"].max()).date()


def review_window(newest: date) -> tuple[date, date]:
    """The two ISO weeks compared: (the Monday of the week before, the Monday after ``newest``)."""
    return newest - timedelta(days=7), newest + timedelta(days=7)


def weekly_counts(frame: pd.DataFrame, metric: Metric, keys: Sequence[str]) -> pd.DataFrame:
    """``frame`` (``metric.view`` grouped by ``keys`` and week) summed to one row per slice
    and week: ``keys``, ``week``, ``count``, ``total``."""
    columns = [*keys, "week", "count", "total"]
    if frame.empty or "week" not in frame or any(k not in frame for k in keys):
        return pd.DataFrame(columns=columns)

    def where(rule: tuple[str, tuple[str, ...]] | None) -> pd.Series:
        if rule is None:
            return pd.Series(True, index=frame.index)
        return frame[rule[0]].astype(str).isin(rule[1])

    counts = pd.DataFrame({
        **{k: frame[k] for k in keys},
        "week": pd.to_datetime(frame["week"]).dt.date,
        "count": pd.to_numeric(frame[metric.count], errors="coerce").fillna(0).where(
            where(metric.count_where), 0),
        "total": pd.to_numeric(frame[metric.total], errors="coerce").fillna(0).where(
            where(metric.total_where), 0),
    })
    return counts.groupby([*keys, "week"], as_index=False, dropna=True)[["count", "total"]].sum()


@dataclass(frozen=True)
class SliceWeeks:
    """One slice's counts in the week before and the newest week (0 where it had no row)."""

    value: Any
    before_count: float
    before_total: float
    after_count: float
    after_total: float


def slice_weeks(counts: pd.DataFrame, key: str | None, newest: date) -> list[SliceWeeks]:
    """Per slice of ``key`` (one row for all traffic when None), the counts of the week before
    ``newest`` and of ``newest`` (weekly_counts rows)."""
    if counts.empty:
        return []
    before = newest - timedelta(days=7)
    groups: Iterable[tuple[Any, pd.DataFrame]] = (
        [(None, counts)] if key is None else counts.groupby(key, dropna=True))
    out = []
    for value, part in groups:
        if isinstance(value, tuple):
            value = value[0]
        b = part[part["week"] == before]
        a = part[part["week"] == newest]
        out.append(SliceWeeks(value, float(b["count"].sum()), float(b["total"].sum()),
                              float(a["count"].sum()), float(a["total"].sum())))
    return out


# --- sentences ---------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _counts(count: float, total: float) -> str:
    return f"{int(count):,} of {int(total):,}"


def sentence(metric: Metric, dimension: str | None, value: Any, x_before: float,
             n_before: float, x_after: float, n_after: float, p: float,
             ci: tuple[float | None, float | None], new_slice: bool) -> str:
    """The finding as one plain sentence with its numbers and interval."""
    before, after = x_before / n_before, x_after / n_after
    points = (after - before) * 100
    lo, hi = ci
    interval = (f"{points:+.1f} points, 95% CI {lo * 100:+.1f} to {hi * 100:+.1f}"
                if lo is not None and hi is not None else f"{points:+.1f} points")
    tail = f"{interval}; {_p(p)}"
    if new_slice:
        name = f"{DIMENSION_NAMES.get(str(dimension), dimension)} {value}"
        against = (f"against {_pct(before)} ({_counts(x_before, n_before)}) in all traffic "
                   "the week before")
        if metric.never and x_after == 0:
            return (f"The new {name} (first seen this week) {metric.never} "
                    f"(0 of {int(n_after):,} {metric.noun}), {against}; {tail}.")
        return (f"The new {name} (first seen this week): {metric.label.lower()} "
                f"{_pct(after)} ({_counts(x_after, n_after)} {metric.noun}), {against}; {tail}.")
    verb = "rose" if after > before else "fell"
    subject = metric.label if dimension is None else (
        f"For {DIMENSION_NAMES.get(dimension, dimension)} {value}, {metric.label.lower()}")
    return (f"{subject} {verb} from {_pct(before)} to {_pct(after)} "
            f"({_counts(x_before, n_before)} → {_counts(x_after, n_after)} {metric.noun}; "
            f"{tail}).")


# --- the findings ------------------------------------------------------------------------------


def candidates(frames: dict[tuple[str, str | None], pd.DataFrame], newest: date,
               min_n: float) -> list[Finding]:
    """Every called change of every metric, for all traffic and per slice, strongest first.

    ``frames[(view, key)]`` is ``view`` grouped by ``(key, week)`` (by ``week`` alone for key
    None), as :func:`reads` lists them; weekly_overview's ``requests`` tells new slices.
    """
    out: list[Finding] = []
    keys: list[str | None] = [None, *DIMENSIONS]
    for metric in METRICS:
        whole = {s.value: s for s in slice_weeks(
            weekly_counts(frames.get((metric.view, None), pd.DataFrame()), metric, []),
            None, newest)}.get(None)
        if whole is None:
            continue
        for key in keys:
            if key is None:
                slices = [whole]
                traffic: dict[Any, SliceWeeks] = {}
            else:
                frame = frames.get((metric.view, key), pd.DataFrame())
                slices = slice_weeks(weekly_counts(frame, metric, [key]), key, newest)
                traffic = {s.value: s for s in slice_weeks(weekly_counts(
                    frames.get(("weekly_overview", key), pd.DataFrame()),
                    Metric("requests", "", "", "requests", "requests", "", True), [key]),
                    key, newest)}
            for s in slices:
                seen = traffic.get(s.value)
                new = key is not None and seen is not None and seen.before_total == 0 \
                    and seen.after_total > 0
                xb, nb = s.before_count, s.before_total
                if new:
                    xb, nb = whole.before_count, whole.before_total
                elif key is not None and s.before_total >= RESTATES_THE_WHOLE * whole.before_total \
                        and s.after_total >= RESTATES_THE_WHOLE * whole.after_total:
                    continue
                called, z, p = judge_change(xb, nb, s.after_count, s.after_total, min_n)
                if not called or z is None or p is None:
                    continue
                ci = change_interval(xb, nb, s.after_count, s.after_total)
                out.append(Finding(
                    metric.name, key, None if key is None else str(s.value), int(nb), int(xb),
                    int(s.after_total), int(s.after_count), z, p, new, ci[0], ci[1],
                    sentence(metric, key, s.value, xb, nb, s.after_count, s.after_total, p, ci,
                             new)))
    return sorted(out, key=lambda f: -abs(f.z))


def select(found: Sequence[Finding], limit: int = MAX_FINDINGS) -> list[Finding]:
    """At most ``limit`` findings, strongest |z| first. A slice that moved a metric the way
    all traffic moved it is part of that story, not news of its own, unless it is new; and
    one slice per metric and dimension is enough."""
    whole = {(f.metric, f.change > 0) for f in found if f.dimension is None}
    taken: list[Finding] = []
    seen: set[tuple[str, str | None, bool]] = set()
    for f in found:
        if f.dimension is not None and not f.new_slice and (f.metric, f.change > 0) in whole:
            continue
        if (f.metric, f.dimension, f.new_slice) in seen:
            continue
        seen.add((f.metric, f.dimension, f.new_slice))
        taken.append(f)
        if len(taken) == limit:
            break
    return taken


def reads() -> list[tuple[str, tuple[str, ...]]]:
    """The (view, group-by) reads the findings are computed from."""
    return [(view, (*(() if key is None else (key,)), "week"))
            for view in VIEWS for key in (None, *DIMENSIONS)]


Reader = Callable[[str, tuple[str, ...]], pd.DataFrame]


@dataclass(frozen=True)
class Review:
    """The findings of one week against the week before."""

    week: date | None
    compared_with: date | None
    findings: list[Finding]
    summary: str  # the sentence that stands in for findings when there are none


def collect(read: Reader, min_n: float) -> Review:
    """The findings of the newest week that ``read(view, group_by)`` returns, against the week
    before it. ``read`` returns a metric view grouped by ``group_by`` (the caller's filters
    applied); it must cover both weeks."""
    frames: dict[tuple[str, str | None], pd.DataFrame] = {}
    for view, group_by in reads():
        frames[(view, group_by[0] if len(group_by) == 2 else None)] = read(view, group_by)
    newest = newest_week(frames[("weekly_overview", None)])
    if newest is None:
        return Review(None, None, [], "No requests to review.")
    return review(frames, newest, min_n)


def review(frames: dict[tuple[str, str | None], pd.DataFrame], newest: date,
           min_n: float) -> Review:
    """The findings of week ``newest`` against the week before, from frames as :func:`reads`
    lists them."""
    before = newest - timedelta(days=7)
    weekly = frames.get(("weekly_overview", None), pd.DataFrame())
    had = weekly_counts(weekly, Metric("requests", "", "", "requests", "requests", "", True), [])
    if float(had[had["week"] == before]["total"].sum()) == 0:
        return Review(newest, before, [], f"Nothing to compare: no requests in the week of "
                      f"{before:%Y-%m-%d}, the week before {newest:%Y-%m-%d}.")
    found = select(candidates(frames, newest, min_n))
    summary = ("" if found else
               f"Nothing moved beyond noise: no change from the week of {before:%Y-%m-%d} to "
               f"the week of {newest:%Y-%m-%d} passed the two-proportion z-test (p < "
               f"{SIGNIFICANCE}) with at least {int(min_n):,} in each week.")
    return Review(newest, before, found, summary)
