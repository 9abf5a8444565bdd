"""The release gate: judge the filtered traffic against thresholds, one verdict per threshold.

A threshold set to ``None`` is not checked. Too few graded requests (``min_n``) means there is
no data to judge, and that fails the gate like a failed threshold: a gate that passes on no
evidence protects nothing.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from midtrace.collector.query.reads import Filters

if TYPE_CHECKING:  # light to import: the CLI reads Thresholds for its option defaults
    import pandas as pd

    from midtrace.client import Client

Verdict = Literal["pass", "fail", "no data"]


@dataclass(frozen=True)
class Thresholds:
    max_buried_rate: float | None = 0.1
    max_sensitivity_delta: float | None = 0.15
    min_accuracy: float | None = 0.8
    min_n: int = 50


@dataclass(frozen=True)
class Check:
    name: str
    threshold: float | None
    value: float | None
    verdict: Verdict
    detail: str
    compared: str = "threshold"  # what ``threshold`` is: a threshold, or a baseline's value

    def line(self) -> str:
        if self.value is None:
            shown = "–"
        elif float(self.value).is_integer() and self.name == "min_n":
            shown = str(int(self.value))
        else:
            shown = f"{self.value:.4g}"
        against = "–" if self.threshold is None else f"{self.threshold:.4g}"
        return f"{self.verdict.upper():8} {self.name:22} {shown:>8}  ({self.compared} {against}) {self.detail}"


@dataclass(frozen=True)
class GateResult:
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(c.verdict == "pass" for c in self.checks)

    def message(self, filters: dict[str, str]) -> str:
        """The verdict as a chat message (Markdown; ``&``, ``<`` and ``>`` escaped as Slack
        asks): the verdict, what was judged, one line per threshold."""
        def chat(text: str) -> str:
            return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

        judged = ", ".join(f"{k}={v}" for k, v in filters.items()) or "all production traffic"
        lines = [f"*midtrace gate: {'pass' if self.passed else 'FAIL'}* ({chat(judged)})"]
        lines += [f"`{chat(c.line().rstrip())}`" for c in self.checks]
        return "\n".join(lines)


def against_baseline(client: Client, baseline: str, candidate: str, strategy: str) -> GateResult:
    """Judge experiment ``candidate`` against ``baseline`` under ``strategy``
    (midtrace/gate_baseline.py): a check fails when the candidate is worse beyond its 95%
    interval, and when there is nothing to compare (no data)."""
    from midtrace.gate_baseline import compare, read_trials

    changes = compare(read_trials(client, baseline, strategy),
                      read_trials(client, candidate, strategy))
    checks = []
    for c in changes:
        verdict: Verdict = ("no data" if c.low is None else "fail" if c.worse else "pass")
        checks.append(Check(c.name, c.baseline, c.candidate, verdict,
                            f"{candidate} vs {baseline}, {strategy}: {c.detail}", "baseline"))
    return GateResult(checks)


def _value(frame: pd.DataFrame, column: str) -> Any:
    import pandas as pd

    if frame.empty:
        return None
    value = frame.iloc[0][column]
    return None if pd.isna(value) else value


def evaluate(client: Client, filters: Filters = Filters(),
             thresholds: Thresholds = Thresholds()) -> GateResult:
    """Read the overview, buried rate and sweep views and judge each threshold."""
    overview = client.view("overview", filters)
    graded = int(_value(overview, "graded") or 0)
    enough = graded >= thresholds.min_n
    checks = [Check("min_n", thresholds.min_n, graded, "pass" if enough else "no data",
                    f"{graded} graded requests" + ("" if enough else
                                                   f", fewer than {thresholds.min_n}: no data to judge"))]

    def judged(name: str, threshold: float, value: float | None, ok: bool, detail: str) -> Check:
        if not enough:
            return Check(name, threshold, value, "no data", "not judged: too few graded requests")
        return Check(name, threshold, value, "pass" if ok else "fail", detail)

    if thresholds.min_accuracy is not None:
        accuracy = _value(overview, "accuracy")
        checks.append(judged("min_accuracy", thresholds.min_accuracy, accuracy,
                             accuracy is not None and accuracy >= thresholds.min_accuracy,
                             f"{int(_value(overview, 'correct') or 0)} of {graded} correct"))
    if thresholds.max_buried_rate is not None:
        buried = client.view("buried_rate", filters)
        wrong = int(_value(buried, "wrong") or 0)
        rate = _value(buried, "buried_rate")
        rate = 0.0 if rate is None and wrong == 0 else rate
        checks.append(judged("max_buried_rate", thresholds.max_buried_rate, rate,
                             rate is not None and rate <= thresholds.max_buried_rate,
                             f"{int(_value(buried, 'buried') or 0)} buried of {wrong} wrong"))
    if thresholds.max_sensitivity_delta is not None:
        # position sensitivity is an experiment's number: production filters do not hide it
        sweep = client.view("sweep_summary", dataclasses.replace(filters, traffic=None)
                            if filters.traffic == "production" else filters)
        deltas = sweep.dropna(subset=["sensitivity_delta"]) if not sweep.empty else sweep
        if deltas.empty:
            checks.append(Check("max_sensitivity_delta", thresholds.max_sensitivity_delta, None,
                                "no data", "no sweep experiment with two or more placement "
                                "conditions (turn this check off with --max-sensitivity-delta off)"))
        else:
            worst = deltas.loc[deltas["sensitivity_delta"].idxmax()]
            delta = float(worst["sensitivity_delta"])
            checks.append(Check(
                "max_sensitivity_delta", thresholds.max_sensitivity_delta, delta,
                "pass" if delta <= thresholds.max_sensitivity_delta else "fail",
                f"largest in experiment {worst['experiment']}, strategy {worst['strategy']} "
                f"({worst['best_condition']} vs {worst['worst_condition']})"))
    return GateResult(checks)
