"""The end-of-run summary, computed from the runner's own results (no database needed).

Per packing strategy:
- accuracy per condition (the retrieval rank the evidence had) and per slot (where the
  first decisive chunk sat in the prompt), each with a Wilson 95% interval;
- position sensitivity delta: highest minus lowest accuracy across placement conditions
  (the ``rank_*`` conditions, or the multi-piece ones when there are no single-piece cases);
- buried-evidence failure rate: among cases with at least one placement in the middle band
  and one at an edge, the share that fail only when every decisive chunk sits in the
  middle band (wrong there at least once, never wrong at an edge);
- citation alignment (decisive evidence in the prompt and cited), constraint recall, answer
  consistency (a case gave the same normalised answer in every placement) and closed-book
  accuracy (``absent``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from midtrace.sweep.conditions import ABSENT, MULTI_PIECE
from midtrace.sweep.results import TrialResult

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


@dataclass(frozen=True)
class Rate:
    successes: int
    n: int

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.n)

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {"n": self.n, "correct": self.successes, "accuracy": self.value,
                "ci95": [lo, hi]}


def rate(flags: Iterable[bool]) -> Rate:
    values = list(flags)
    return Rate(sum(values), len(values))


@dataclass
class StrategySummary:
    strategy: str
    trials: int
    by_condition: dict[str, Rate]
    condition_slots: dict[str, list[int]]
    by_slot: dict[int, Rate]
    sensitivity_delta: float | None
    delta_between: tuple[str, str] | None  # (best, worst) condition
    buried_cases: int
    buried_eligible: int
    citation_alignment: Rate
    constraint_recall: Rate
    consistency: Rate

    @property
    def buried_rate(self) -> float | None:
        return self.buried_cases / self.buried_eligible if self.buried_eligible else None

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "trials": self.trials,
            "by_condition": {c: {**r.to_json(), "slots": self.condition_slots.get(c, [])}
                             for c, r in self.by_condition.items()},
            "by_slot": {str(s): r.to_json() for s, r in self.by_slot.items()},
            "sensitivity_delta": self.sensitivity_delta,
            "sensitivity_between": list(self.delta_between) if self.delta_between else None,
            "buried_failure_rate": self.buried_rate,
            "buried_cases": self.buried_cases, "buried_eligible_cases": self.buried_eligible,
            "citation_alignment": self.citation_alignment.to_json(),
            "constraint_recall": self.constraint_recall.to_json(),
            "answer_consistency": self.consistency.to_json(),
        }


@dataclass
class Summary:
    experiment: str
    model: str
    strategies: list[StrategySummary] = field(default_factory=list)
    recorded: int = 0
    failed: int = 0
    skipped: int = 0
    bad_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "model": self.model, "recorded": self.recorded,
                "failed": self.failed, "resumed": self.skipped, "bad_lines": self.bad_lines,
                "notes": self.notes, "strategies": [s.to_json() for s in self.strategies]}


def _condition_order(name: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"rank_(\d+)", name)
    if m:
        return (0, int(m[1]), name)
    if name in MULTI_PIECE:
        return (1, MULTI_PIECE.index(name), name)
    return (2, 0, name)


def summarise_strategy(strategy: str, results: Sequence[TrialResult]) -> StrategySummary:
    by_cond: dict[str, list[TrialResult]] = defaultdict(list)
    for r in results:
        by_cond[r.condition].append(r)
    conditions = sorted(by_cond, key=_condition_order)
    by_condition = {c: rate(r.correct for r in by_cond[c]) for c in conditions}
    condition_slots = {c: sorted({r.slot for r in by_cond[c] if r.slot is not None})
                       for c in conditions}

    single = [r for r in results if r.condition.startswith("rank_")]
    slots: dict[int, list[bool]] = defaultdict(list)
    for r in single:
        if r.slot is not None:
            slots[r.slot].append(r.correct)
    by_slot = {s: rate(slots[s]) for s in sorted(slots)}

    placements = [c for c in conditions if c.startswith("rank_")] or \
        [c for c in conditions if c in MULTI_PIECE]
    delta, between = None, None
    if placements:
        best = max(placements, key=lambda c: by_condition[c].value or 0.0)
        worst = min(placements, key=lambda c: by_condition[c].value or 0.0)
        delta = (by_condition[best].value or 0.0) - (by_condition[worst].value or 0.0)
        between = (best, worst)

    placed = [r for r in results if r.condition != ABSENT]
    per_case: dict[str, list[TrialResult]] = defaultdict(list)
    for r in placed:
        per_case[r.case].append(r)
    eligible = buried = 0
    consistent: list[bool] = []
    for trials in per_case.values():
        middle = [r for r in trials if r.buried is True]
        edge = [r for r in trials if r.buried is False]
        if middle and edge:
            eligible += 1
            if any(not r.correct for r in middle) and all(r.correct for r in edge):
                buried += 1
        if len(trials) > 1:
            consistent.append(len({r.answer for r in trials}) == 1)

    recall_n = sum(r.required for r in placed)
    return StrategySummary(
        strategy=strategy, trials=len(results), by_condition=by_condition,
        condition_slots=condition_slots, by_slot=by_slot, sensitivity_delta=delta,
        delta_between=between, buried_cases=buried, buried_eligible=eligible,
        citation_alignment=rate(bool(r.cited_decisive) for r in placed
                                if r.cited_decisive is not None),
        constraint_recall=Rate(sum(r.recalled for r in placed), recall_n),
        consistency=rate(consistent),
    )


def summarise(experiment: str, model: str, strategies: Sequence[str],
              results: Iterable[TrialResult]) -> Summary:
    by_strategy: dict[str, list[TrialResult]] = defaultdict(list)
    for r in results:
        by_strategy[r.strategy].append(r)
    out = Summary(experiment=experiment, model=model)
    out.strategies = [summarise_strategy(s, by_strategy[s]) for s in strategies
                      if by_strategy.get(s)]
    return out


# --- text -----------------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "   -" if x is None else f"{100 * x:3.0f}%"


def _row(label: str, r: Rate, extra: str = "") -> str:
    lo, hi = r.interval
    return f"  {label:<14} {r.n:>5} {_pct(r.value):>6}  [{_pct(lo)}, {_pct(hi)}]{extra}"


def _slots(values: list[int]) -> str:
    if not values:
        return "  (not in prompt)"
    if len(values) == 1:
        return f"  slot {values[0]}"
    return f"  slots {values[0]}-{values[-1]}"


def _share(r: Rate) -> str:
    return "-" if r.n == 0 else f"{_pct(r.value).strip()} of {r.n}"


def to_text(summary: Summary) -> str:
    lines = [f"experiment {summary.experiment} · model {summary.model} · "
             f"{summary.recorded} calls recorded now, {summary.skipped} from earlier runs"
             + (f", {summary.failed} failed" if summary.failed else "")]
    for s in summary.strategies:
        lines += ["", f"strategy {s.strategy} ({s.trials} calls)",
                  f"  {'condition':<14} {'n':>5} {'acc':>6}  95% CI"]
        lines += [_row(c, r, _slots(s.condition_slots.get(c, [])))
                  for c, r in s.by_condition.items()]
        if s.by_slot:
            lines += [f"  {'slot':<14} {'n':>5} {'acc':>6}  95% CI"]
            lines += [_row(str(slot), r) for slot, r in s.by_slot.items()]
        if s.sensitivity_delta is not None and s.delta_between:
            best, worst = s.delta_between
            lines.append(f"  sensitivity delta {100 * s.sensitivity_delta:.0f} points "
                         f"({best} best, {worst} worst)")
        buried = (f"{_pct(s.buried_rate).strip()} ({s.buried_cases} of {s.buried_eligible} cases)"
                  if s.buried_eligible else "- (no case placed both in the middle and at an edge)")
        lines.append(f"  buried-evidence failure rate {buried}")
        lines.append(f"  citation alignment {_share(s.citation_alignment)}; constraint recall "
                     f"{_share(s.constraint_recall)}; answer consistency {_share(s.consistency)}")
    return "\n".join(lines)


def to_json(summary: Summary) -> dict[str, Any]:
    return summary.to_json()

