"""The gate against a baseline experiment: is a candidate sweep worse than the baseline by
more than chance allows?

Both experiments are sweeps of the same case set under one packing strategy (the candidate
usually with a changed prompt template, model or pipeline). Two checks, each a difference
with its 95% interval; a check fails only when the whole interval lies on the worse side, so
noise never fails a build and a real regression does (docs/report-and-gate.md):

- ``accuracy_vs_baseline``: candidate minus baseline accuracy, paired by case, placement
  condition and repeat (the i-th graded request of a case and condition under one
  experiment with the i-th under the other, in time order, as ``sweep_pairs`` pairs two
  strategies): Tango's score interval, McNemar's test. Without a single pair (different
  cases), the two accuracies as independent samples: Mee's interval, the pooled z-test.
- ``sensitivity_vs_baseline``: candidate minus baseline position sensitivity (max minus min
  accuracy across placement conditions, 'absent' excluded: ``sweep_summary``'s
  ``sensitivity_delta``), its interval from a paired bootstrap over the cases both
  experiments answered (``BOOTSTRAP_ROUNDS`` resamples, fixed seed: reruns agree).

Pure functions over the request lists; reading them is the caller's (``read_trials``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from midtrace.collector.query.reads import Filters
from midtrace.schemas.stats import (
    mcnemar_test, paired_difference, two_proportion_test, unpaired_difference)

if TYPE_CHECKING:
    import pandas as pd

    from midtrace.client import Client

BOOTSTRAP_ROUNDS = 2000
PAGE = 1000


@dataclass(frozen=True)
class Trial:
    case_id: str
    condition: str
    repeat: int
    correct: bool


@dataclass(frozen=True)
class Change:
    """Candidate minus baseline for one metric, with its 95% interval."""

    name: str
    baseline: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    worse: bool  # the whole interval on the worse side
    detail: str


def trials(frame: pd.DataFrame) -> list[Trial]:
    """The graded placement trials of a request list (one experiment, one strategy): 'absent'
    and ungraded requests left out, repeats numbered in time order per case and condition."""
    out: list[Trial] = []
    if frame.empty:
        return out
    rows = frame[frame["correct"].notna() & frame["case_id"].notna()
                 & (frame["condition"].fillna("") != "absent")]
    rows = rows.sort_values(["time", "trace_id"])
    seen: dict[tuple[str, str], int] = {}
    for case_id, condition, correct in zip(rows["case_id"], rows["condition"].fillna(""),
                                           rows["correct"]):
        key = (str(case_id), str(condition))
        seen[key] = seen.get(key, 0) + 1
        out.append(Trial(key[0], key[1], seen[key], bool(correct)))
    return out


def read_trials(client: Client, experiment: str, strategy: str) -> list[Trial]:
    """Every graded trial of ``experiment`` under ``strategy``, page by page."""
    import pandas as pd

    filters = Filters(experiment=experiment, strategy=strategy)
    pages = []
    while True:
        page = client.requests(filters, limit=PAGE, offset=PAGE * len(pages))
        pages.append(page)
        if len(page) < PAGE:
            break
    return trials(pd.concat(pages, ignore_index=True))


def _points(difference: float | None) -> str:
    return "–" if difference is None else f"{difference * 100:+.1f} pts"


def accuracy_change(baseline: Sequence[Trial], candidate: Sequence[Trial]) -> Change:
    base = {(t.case_id, t.condition, t.repeat): t.correct for t in baseline}
    cand = {(t.case_id, t.condition, t.repeat): t.correct for t in candidate}
    acc_b = sum(base.values()) / len(base) if base else None
    acc_c = sum(cand.values()) / len(cand) if cand else None
    pairs = [(base[k], cand[k]) for k in base.keys() & cand.keys()]
    if pairs:
        only_b = sum(1 for b, c in pairs if b and not c)
        only_c = sum(1 for b, c in pairs if c and not b)
        difference, low, high = paired_difference(only_b, only_c, len(pairs))
        _, p = mcnemar_test(only_b, only_c)
        how = (f"paired over {len(pairs)} trials: {only_b} right only in the baseline, "
               f"{only_c} only in the candidate")
    elif base and cand:
        x_b, x_c = sum(base.values()), sum(cand.values())
        difference, low, high = unpaired_difference(x_b, len(base), x_c, len(cand))
        _, p = two_proportion_test(x_b, len(base), x_c, len(cand))
        how = f"unpaired (no common trial): {x_b}/{len(base)} vs {x_c}/{len(cand)}"
    else:
        return Change("accuracy_vs_baseline", acc_b, acc_c, None, None, None, False,
                      "no graded trial in " + ("either experiment" if not base and not cand
                                               else "the baseline" if not base else "the candidate"))
    worse = high is not None and high < 0
    detail = (f"{_points(difference)} (95% {_points(low)} to {_points(high)}, "
              f"p = {p:.3g}), {how}" if p is not None else how)
    return Change("accuracy_vs_baseline", acc_b, acc_c, difference, low, high, worse, detail)


def _sensitivities(right: np.ndarray, graded: np.ndarray) -> np.ndarray:
    """Max minus min accuracy across conditions, per row of case weights already applied:
    ``right`` and ``graded`` are (rounds, conditions); NaN with fewer than two conditions."""
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(graded > 0, right / np.where(graded > 0, graded, 1), np.nan)
    present = (graded > 0).sum(axis=1)
    spread = np.nanmax(np.where(np.isnan(accuracy), -np.inf, accuracy), axis=1) - \
        np.nanmin(np.where(np.isnan(accuracy), np.inf, accuracy), axis=1)
    return np.where(present >= 2, spread, np.nan)


def _counts(trials_: Sequence[Trial], cases: list[str], conditions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    ci = {c: i for i, c in enumerate(cases)}
    ki = {k: i for i, k in enumerate(conditions)}
    right = np.zeros((len(cases), len(conditions)))
    graded = np.zeros((len(cases), len(conditions)))
    for t in trials_:
        if t.case_id in ci:
            graded[ci[t.case_id], ki[t.condition]] += 1
            right[ci[t.case_id], ki[t.condition]] += t.correct
    return right, graded


def sensitivity(trials_: Sequence[Trial]) -> float | None:
    """Position sensitivity of a set of trials, as ``sweep_summary`` defines it."""
    cases = sorted({t.case_id for t in trials_})
    conditions = sorted({t.condition for t in trials_})
    right, graded = _counts(trials_, cases, conditions)
    value = _sensitivities(right.sum(axis=0)[None, :], graded.sum(axis=0)[None, :])[0]
    return None if np.isnan(value) else float(value)


def sensitivity_change(baseline: Sequence[Trial], candidate: Sequence[Trial],
                       rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> Change:
    sens_b, sens_c = sensitivity(baseline), sensitivity(candidate)
    cases = sorted({t.case_id for t in baseline} & {t.case_id for t in candidate})
    if sens_b is None or sens_c is None or not cases:
        missing = ("no case answered by both experiments" if not cases else
                   "fewer than two placement conditions graded in "
                   + ("the baseline" if sens_b is None else "the candidate"))
        return Change("sensitivity_vs_baseline", sens_b, sens_c, None, None, None, False, missing)
    conditions = sorted({t.condition for t in baseline} | {t.condition for t in candidate})
    right_b, graded_b = _counts(baseline, cases, conditions)
    right_c, graded_c = _counts(candidate, cases, conditions)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(cases), [1 / len(cases)] * len(cases), size=rounds)
    differences = (_sensitivities(weights @ right_c, weights @ graded_c)
                   - _sensitivities(weights @ right_b, weights @ graded_b))
    differences = differences[~np.isnan(differences)]
    difference = sens_c - sens_b
    if len(differences) < rounds // 2:  # most resamples lost a condition: no interval
        return Change("sensitivity_vs_baseline", sens_b, sens_c, difference, None, None, False,
                      f"{_points(difference)}; too few cases for an interval ({len(cases)})")
    low, high = (float(v) for v in np.quantile(differences, [0.025, 0.975]))
    worse = low > 0
    detail = (f"{_points(difference)} (95% {_points(low)} to {_points(high)}, bootstrap over "
              f"{len(cases)} cases, {len(conditions)} conditions)")
    return Change("sensitivity_vs_baseline", sens_b, sens_c, difference, low, high, worse, detail)


def compare(baseline: Sequence[Trial], candidate: Sequence[Trial]) -> list[Change]:
    return [accuracy_change(baseline, candidate), sensitivity_change(baseline, candidate)]


def describe(change: Change) -> dict[str, Any]:
    return {"name": change.name, "baseline": change.baseline, "candidate": change.candidate,
            "difference": change.difference, "low": change.low, "high": change.high,
            "worse": change.worse, "detail": change.detail}
