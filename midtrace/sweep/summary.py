"""The end-of-run summary, read from the metric views of the database the sweep wrote to.

Every number comes from a view (docs/metrics.md), filtered to the experiment and model and
read through the same client as the dashboard and the report (a running collector's query
API, or the DuckDB file), so the sweep, the gate and the Experiments page cannot disagree:

- ``sweep_conditions``: accuracy per condition with its Wilson 95% interval, and the slots
  the condition put the first decisive chunk in;
- ``sweep_slots``: accuracy per decisive slot, single-evidence requests;
- ``sweep_summary``: position sensitivity delta (best and worst condition), buried-evidence
  failure rate, answer consistency, constraint recall;
- ``citation_alignment`` grouped by strategy: decisive evidence in the prompt and cited;
- ``cost_summary`` grouped by strategy: tokens and what the calls cost, priced by the
  database's price table (docs/metrics.md, "Cost").

Bands, and so what counts as buried, follow the database's ``settings`` table. This module
only orders the rows and prints them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from midtrace.collector.query.reads import Filters
from midtrace.sweep.conditions import MULTI_PIECE

if TYPE_CHECKING:  # the client pulls in pandas and pyarrow; the runner imports it when it reads
    from midtrace.client import Client

Row = dict[str, Any]


def _number(value: Any) -> float | None:
    """A view's value as a float; None for SQL NULL (None, NaN or pandas' NA in a frame)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _count(value: Any) -> int:
    return int(_number(value) or 0)


@dataclass(frozen=True)
class Rate:
    """A share as a view gives it: ``successes`` of ``n``, the share and its Wilson interval."""

    successes: int
    n: int
    value: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return (self.low, self.high)

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "correct": self.successes, "accuracy": self.value,
                "ci95": [self.low, self.high]}


def _rate(row: Row | None, successes: str, n: str, value: str, low: str, high: str) -> Rate:
    if row is None:
        return Rate(0, 0)
    return Rate(_count(row.get(successes)), _count(row.get(n)), _number(row.get(value)),
                _number(row.get(low)), _number(row.get(high)))


def _accuracy(row: Row) -> Rate:
    return _rate(row, "correct", "n", "accuracy", "ci_low", "ci_high")


@dataclass(frozen=True)
class Cost:
    """What one strategy's calls cost, from ``cost_summary``."""

    requests: int = 0
    priced: int = 0
    example_priced: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    cost_per_correct: float | None = None

    @classmethod
    def of(cls, row: Row | None) -> Cost:
        if row is None:
            return cls()
        return cls(requests=_count(row.get("requests")), priced=_count(row.get("priced")),
                   example_priced=_count(row.get("example_priced")),
                   prompt_tokens=_count(row.get("prompt_tokens")),
                   output_tokens=_count(row.get("output_tokens")),
                   cost_usd=_number(row.get("cost_usd")),
                   cost_per_correct=_number(row.get("cost_per_correct")))

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "cost_usd": self.cost_usd, "cost_per_correct": self.cost_per_correct,
                "priced": self.priced, "requests": self.requests,
                "example_prices": self.example_priced > 0}


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
    buried_rate: float | None
    citation_alignment: Rate
    constraint_recall: Rate
    consistency: Rate
    cost: Cost = Cost()

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
            "cost": self.cost.to_json(),
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


def _slots(value: Any) -> list[int]:
    if value is None or isinstance(value, (str, float)):  # NULL, or NaN in a frame
        return []
    return sorted(int(v) for v in value)


def _of(rows: Iterable[Row], strategy: str) -> list[Row]:
    return [r for r in rows if r.get("strategy") == strategy]


def _strategy(strategy: str, head: Row, conditions: list[Row], slots: list[Row],
              citations: Row | None, cost: Row | None) -> StrategySummary:
    conditions = sorted(conditions, key=lambda r: _condition_order(str(r["condition"])))
    delta = _number(head.get("sensitivity_delta"))
    best, worst = head.get("best_condition"), head.get("worst_condition")
    return StrategySummary(
        strategy=strategy, trials=_count(head.get("requests")),
        by_condition={str(r["condition"]): _accuracy(r) for r in conditions},
        condition_slots={str(r["condition"]): _slots(r.get("decisive_slots")) for r in conditions},
        by_slot={int(r["slot"]): _accuracy(r) for r in sorted(slots, key=lambda r: int(r["slot"]))},
        sensitivity_delta=delta,
        delta_between=(str(best), str(worst)) if delta is not None and best and worst else None,
        buried_cases=_count(head.get("buried_failure_cases")),
        buried_eligible=_count(head.get("buried_eligible_cases")),
        buried_rate=_number(head.get("buried_failure_rate")),
        citation_alignment=_rate(citations, "aligned", "evidence_in_prompt", "alignment",
                                 "ci_low", "ci_high"),
        constraint_recall=_rate(head, "constraints_recalled", "constraints_required",
                                "constraint_recall", "constraint_recall_ci_low",
                                "constraint_recall_ci_high"),
        consistency=_rate(head, "consistent_cases", "consistency_cases", "answer_consistency",
                          "answer_consistency_ci_low", "answer_consistency_ci_high"),
        cost=Cost.of(cost),
    )


def summarise(client: Client, experiment: str, model: str,
              strategies: Iterable[str]) -> Summary:
    """The summary of every request the database holds for ``experiment`` answered by
    ``model``, per strategy in ``strategies`` (in that order; a strategy without requests is
    left out)."""
    filters = Filters(experiment=experiment, model=model)

    def rows(view: str, group_by: tuple[str, ...] = ()) -> list[Row]:
        frame = client.view(view, filters, group_by)
        return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]

    heads = rows("sweep_summary")
    conditions = rows("sweep_conditions")
    slots = rows("sweep_slots")
    citations = rows("citation_alignment", ("strategy",))
    costs = rows("cost_summary", ("strategy",))
    out = Summary(experiment=experiment, model=model)
    for strategy in strategies:
        head = _of(heads, strategy)
        if not head:
            continue
        cited = _of(citations, strategy)
        cost = _of(costs, strategy)
        out.strategies.append(_strategy(strategy, head[0], _of(conditions, strategy),
                                        _of(slots, strategy), cited[0] if cited else None,
                                        cost[0] if cost else None))
    return out


# --- text -----------------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "   -" if x is None else f"{100 * x:3.0f}%"


def _row(label: str, r: Rate, extra: str = "") -> str:
    lo, hi = r.interval
    return f"  {label:<14} {r.n:>5} {_pct(r.value):>6}  [{_pct(lo)}, {_pct(hi)}]{extra}"


def _slot_note(values: list[int]) -> str:
    if not values:
        return "  (not in prompt)"
    if len(values) == 1:
        return f"  slot {values[0]}"
    return f"  slots {values[0]}-{values[-1]}"


def _share(r: Rate) -> str:
    return "-" if r.n == 0 else f"{_pct(r.value).strip()} of {r.n}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _cost(c: Cost) -> str:
    """One line: tokens, then the cost as far as the database's price table knows it."""
    tokens = f"{c.prompt_tokens} prompt + {c.output_tokens} answer tokens"
    if c.priced == 0:
        return (f"  {tokens}; cost unknown (no call reported its cost and the model is not in "
                "the price table, or the endpoint reported no usage)")
    line = f"  {tokens}; cost {_money(c.cost_usd)}"
    if c.priced < c.requests:
        line += f" for {c.priced} of {c.requests} calls"
    line += f", {_money(c.cost_per_correct)} per correct answer"
    if c.example_priced:
        line += " (example prices: check them)"
    return line


def to_text(summary: Summary) -> str:
    """The summary as the lines ``midtrace sweep`` prints (docs/sweep.md, "The summary")."""
    lines = [f"experiment {summary.experiment} · model {summary.model} · "
             f"{summary.recorded} calls recorded now, {summary.skipped} from earlier runs"
             + (f", {summary.failed} failed" if summary.failed else "")]
    for s in summary.strategies:
        lines += ["", f"strategy {s.strategy} ({s.trials} calls)",
                  f"  {'condition':<14} {'n':>5} {'acc':>6}  95% CI"]
        lines += [_row(c, r, _slot_note(s.condition_slots.get(c, [])))
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
        lines.append(_cost(s.cost))
    return "\n".join(lines)


def to_json(summary: Summary) -> dict[str, Any]:
    """The summary as the object ``midtrace sweep --format json`` prints."""
    return summary.to_json()
