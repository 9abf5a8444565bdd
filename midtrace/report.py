"""The weekly review as a document: JSON (schema in docs/report-schema.md), Markdown or HTML.

``build_report`` reads the findings (midtrace/findings.py), the incidents of the week
(midtrace/incidents.py) and the metric views through a client and returns a plain dict; the
renderers (midtrace/report_markdown.py, midtrace/report_html.py) turn that dict into text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

import pandas as pd

from midtrace import findings, incidents
from midtrace.client import Client, Filters
from midtrace.collector.query.reads import json_value

SCHEMA_VERSION = "1"

# report section -> (view, columns kept besides "group")
SECTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "overview": ("overview", (
        "requests", "graded", "correct", "accuracy", "ci_low", "ci_high", "wrong", "buried",
        "buried_rate", "evidence_in_prompt", "citations_aligned", "citation_alignment",
        "unsupported_confidence", "first_time", "last_time")),
    "accuracy_by_band": ("accuracy_by_band", (
        "band", "requests", "n", "correct", "accuracy", "ci_low", "ci_high")),
    "accuracy_by_slot": ("accuracy_by_slot", (
        "k", "slot", "requests", "n", "correct", "accuracy", "ci_low", "ci_high")),
    "taxonomy": ("failure_taxonomy", ("class", "n", "share")),
    "buried_rate": ("buried_rate", (
        "graded", "wrong", "buried", "buried_rate", "ci_low", "ci_high")),
    "weekly": ("weekly_overview", (
        "week", "requests", "graded", "correct", "accuracy", "ci_low", "ci_high", "wrong",
        "buried", "buried_rate", "evidence_in_prompt", "citations_aligned",
        "citation_alignment", "accuracy_change", "buried_rate_change",
        "citation_alignment_change")),
    "taxonomy_by_week": ("taxonomy_by_week", ("week", "class", "n", "share")),
    "citations": ("citation_alignment", (
        "requests", "citing", "evidence_in_prompt", "aligned", "alignment", "ci_low", "ci_high",
        "citing_noncanonical", "noncanonical_share")),
    "citation_drift": ("citation_drift", (
        "week", "requests", "citing", "evidence_in_prompt", "aligned", "alignment", "ci_low",
        "ci_high", "citing_noncanonical", "noncanonical_share", "alignment_change",
        "noncanonical_share_change")),
    "cited_sources_elsewhere": ("cited_sources_elsewhere", (
        "source_id", "authority", "requests", "instead_of_decisive")),
    "constraint_recall": ("constraint_recall", (
        "context_bucket", "requests", "required", "recalled", "recall", "ci_low", "ci_high",
        "omitting", "omission_rate")),
    "sweep": ("sweep_summary", (
        "experiment", "strategy", "requests", "n", "correct", "accuracy", "absent_n",
        "absent_accuracy", "conditions", "sensitivity_delta", "best_condition",
        "worst_condition", "cases", "buried_eligible_cases", "buried_failure_cases",
        "buried_failure_rate", "consistency_cases", "consistent_cases", "answer_consistency")),
    "sweep_conditions": ("sweep_conditions", (
        "experiment", "strategy", "condition", "requests", "cases", "n", "correct", "accuracy",
        "ci_low", "ci_high", "decisive_band")),
    "unsupported_confidence": ("unsupported_confidence", (
        "graded", "graded_with_evidence_and_confidence", "unsupported", "unsupported_buried",
        "unsupported_rate")),
    "judge_agreement": ("judge_agreement", (
        "n", "both_correct", "person_only_correct", "judge_only_correct", "both_wrong", "agree",
        "agreement", "agreement_ci_low", "agreement_ci_high", "kappa", "kappa_ci_low",
        "kappa_ci_high")),
    "retrieval": ("retrieval_quality", (
        "requests", "retrieval_hit_rate", "retrieval_mrr", "retrieval_ndcg", "prompt_hit_rate",
        "prompt_mrr", "prompt_ndcg")),
}


def _records(frame: pd.DataFrame, group_by: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for row in frame.to_dict("records"):
        # only the columns the schema names: a view may carry more (sweep_conditions'
        # decisive_slots is a list) that the report does not show
        out.append({"group": {g: _plain(row.get(g)) for g in group_by},
                    **{c: _plain(row[c]) for c in columns if c in row}})
    return out


def _plain(value: Any) -> Any:
    if value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return json_value(value)


def build_report(client: Client, filters: Filters = Filters(),
                 group_by: Sequence[str] = (), dashboard_url: str | None = None) -> dict[str, Any]:
    """Every section of the weekly review, as JSON-safe data (docs/report-schema.md): the
    findings and incidents of the newest week in range first, then the metric views."""
    group_by = list(group_by)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "filters": filters.to_params(),
        "traffic": filters.effective_traffic(),
        "graders": filters.grader or "all",
        "group_by": group_by,
    }
    overall = client.view("overview", filters)
    report["requests"] = int(overall.iloc[0]["requests"]) if not overall.empty else 0
    for section, (view, columns) in SECTIONS.items():
        # a view's own keys are never group keys too (weekly views are already by week)
        frame = client.view(view, filters, group_by)
        keys = [g for g in group_by if g in frame.columns and g not in columns]
        report[section] = _records(frame, keys, columns)
    review = read_review(client, filters)
    shown, totals = (incidents.read_incidents(client, filters, review.week, dashboard_url)
                     if review.week else ([], {"questions": 0, "requests": 0}))
    report["review"] = {
        "week": review.week.isoformat() if review.week else None,
        "compared_with": review.compared_with.isoformat() if review.compared_with else None,
        "min_n": review.min_n,
        "summary": review.summary,
        "incidents": totals,
    }
    report["findings"] = [json_value(f.to_json()) for f in review.findings]
    report["incidents"] = json_value(shown)
    return report


@dataclass(frozen=True)
class ReadReview:
    week: date | None
    compared_with: date | None
    min_n: int
    summary: str
    findings: list[findings.Finding]


def read_review(client: Client, filters: Filters) -> ReadReview:
    """The findings of the newest week in ``filters``' range against the week before it (read
    even when it lies before ``since``: a weekly review compares whole ISO weeks)."""
    min_n = int(client.settings().get("min_n", 30))
    newest = findings.newest_week(client.view("weekly_overview", filters))
    if newest is None:
        return ReadReview(None, None, min_n, "No requests in range: nothing to review.", [])
    before, after = findings.review_window(newest)
    start = datetime.combine(before, time(0), tzinfo=UTC)
    end = datetime.combine(after, time(0), tzinfo=UTC)
    window = dataclasses.replace(filters, since=start,
                                 until=min(end, filters.until) if filters.until else end)
    review = findings.collect(lambda view, group_by: client.view(view, window, group_by), min_n)
    return ReadReview(review.week, review.compared_with, min_n, review.summary, review.findings)


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render(report: dict[str, Any], fmt: str) -> str:
    """The report as ``json``, ``md`` (Markdown) or ``html``."""
    if fmt == "json":
        return render_json(report)
    if fmt == "md":
        from midtrace.report_markdown import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from midtrace.report_html import render_html

        return render_html(report)
    raise ValueError(f"unknown report format {fmt!r}")
