"""The report's tables as a reader sees them: titles, human column names, formatted cells.

Shared by the Markdown and HTML renderers. Shares show as percentages, changes of a share in
points, counts as whole numbers with thousands separators. Text from traces (template ids,
sources, questions) is untrusted: a cell that a spreadsheet would run as a formula is
neutralized (midtrace/spreadsheet.py), since readers paste these tables into one.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from midtrace.spreadsheet import neutralize

TITLES = {
    "overview": "Overview", "accuracy_by_band": "Accuracy by decisive-evidence band",
    "accuracy_by_slot": "Accuracy by decisive slot (the U-curve)",
    "taxonomy": "Failure taxonomy", "buried_rate": "Buried rate", "weekly": "Week by week",
    "taxonomy_by_week": "Failure taxonomy by week", "citations": "Citation alignment",
    "citation_drift": "Citation drift by week",
    "cited_sources_elsewhere": "Sources cited beside the decisive evidence",
    "constraint_recall": "Constraint recall by context length", "sweep": "Sweep experiments",
    "sweep_conditions": "Sweep conditions", "unsupported_confidence": "Unsupported confidence",
    "retrieval": "Retrieval context",
    "judge_agreement": "Judge calibration: a person and the LLM judge on the same requests",
}

COLUMN_NAMES = {
    "service": "Service", "model": "Model", "template": "Template",
    "strategy": "Packing strategy", "experiment": "Experiment",
    "context_bucket": "Context length", "week": "Week",
    "requests": "Requests", "graded": "Graded", "correct": "Correct", "accuracy": "Accuracy",
    "ci_low": "95% CI low", "ci_high": "95% CI high", "wrong": "Wrong", "buried": "Buried",
    "buried_rate": "Buried rate", "evidence_in_prompt": "Decisive evidence in prompt",
    "citations_aligned": "Cited decisive evidence", "citation_alignment": "Citation alignment",
    "unsupported_confidence": "Confident, wrong, evidence in prompt",
    "first_time": "First request", "last_time": "Last request",
    "band": "Decisive evidence band", "n": "Graded", "k": "Chunks in prompt",
    "slot": "Decisive slot", "class": "Class", "share": "Share",
    "accuracy_change": "Accuracy change", "buried_rate_change": "Buried rate change",
    "citation_alignment_change": "Citation alignment change",
    "citing": "Citing answers", "aligned": "Cited decisive evidence",
    "alignment": "Citation alignment", "citing_noncanonical": "Citing non-canonical",
    "noncanonical_share": "Non-canonical share", "alignment_change": "Alignment change",
    "noncanonical_share_change": "Non-canonical share change", "source_id": "Source",
    "authority": "Authority", "instead_of_decisive": "Instead of decisive evidence",
    "required": "Required constraints", "recalled": "Recalled", "recall": "Constraint recall",
    "omitting": "Omitting one or more", "omission_rate": "Omission rate",
    "absent_n": "Closed-book graded", "absent_accuracy": "Closed-book accuracy",
    "conditions": "Placements", "sensitivity_delta": "Position sensitivity",
    "best_condition": "Best placement", "worst_condition": "Worst placement", "cases": "Cases",
    "buried_eligible_cases": "Cases placed in the middle",
    "buried_failure_cases": "Cases failing only in the middle",
    "buried_failure_rate": "Buried-evidence failure rate",
    "consistency_cases": "Cases permuted", "consistent_cases": "Consistent cases",
    "answer_consistency": "Answer consistency", "condition": "Placement",
    "decisive_band": "Decisive evidence band",
    "graded_with_evidence_and_confidence": "Graded, evidence in prompt, confidence given",
    "unsupported": "Unsupported confidence", "unsupported_buried": "Unsupported, buried",
    "unsupported_rate": "Unsupported confidence rate",
    "retrieval_hit_rate": "Retrieval hit rate", "retrieval_mrr": "Retrieval MRR",
    "retrieval_ndcg": "Retrieval nDCG", "prompt_hit_rate": "Prompt hit rate",
    "prompt_mrr": "Prompt MRR", "prompt_ndcg": "Prompt nDCG",
    "both_correct": "Both say correct", "person_only_correct": "Only the person says correct",
    "judge_only_correct": "Only the judge says correct", "both_wrong": "Both say wrong",
    "agree": "Agree", "agreement": "Agreement", "agreement_ci_low": "Agreement 95% CI low",
    "agreement_ci_high": "Agreement 95% CI high", "kappa": "Cohen's kappa",
    "kappa_ci_low": "Kappa 95% CI low", "kappa_ci_high": "Kappa 95% CI high",
}

SHARES = {"accuracy", "ci_low", "ci_high", "buried_rate", "citation_alignment", "share",
          "alignment", "noncanonical_share", "recall", "omission_rate", "absent_accuracy",
          "buried_failure_rate", "answer_consistency", "unsupported_rate", "retrieval_hit_rate",
          "prompt_hit_rate", "agreement", "agreement_ci_low", "agreement_ci_high"}
POINTS = {"accuracy_change", "buried_rate_change", "citation_alignment_change",
          "alignment_change", "noncanonical_share_change", "sensitivity_delta"}
SCORES = {"retrieval_mrr", "retrieval_ndcg", "prompt_mrr", "prompt_ndcg", "kappa",
          "kappa_ci_low", "kappa_ci_high"}
TIMES = {"first_time", "last_time"}
MINUS = "\u2212"  # a real minus sign: "−3.0 pts" is a number to a reader, text to a spreadsheet


def column_name(column: str) -> str:
    return COLUMN_NAMES.get(column, column.replace("_", " ").capitalize())


def percent(value: float) -> str:
    return f"{value:.1%}"


def points(value: float) -> str:
    text = f"{value * 100:+.1f} pts"
    return text.replace("-", MINUS)


def count(value: float) -> str:
    return f"{int(value):,}"


def cell(column: str, value: Any) -> str:
    """One value of ``column`` as the tables show it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if column in SHARES:
            return percent(value)
        if column in POINTS:
            return points(value)
        if column in SCORES:
            return f"{value:.3f}"
        if float(value).is_integer():
            return count(value)
        return f"{value:,.3f}"
    text = str(value)
    if column in TIMES:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime(
                "%Y-%m-%d %H:%M UTC")
        except ValueError:
            pass
    return str(neutralize(text))


def numeric(column: str) -> bool:
    """Whether a column holds numbers (aligned right)."""
    return column in SHARES | POINTS | SCORES or column in {
        "requests", "graded", "correct", "wrong", "buried", "evidence_in_prompt",
        "citations_aligned", "unsupported_confidence", "n", "k", "slot", "citing", "aligned",
        "citing_noncanonical", "instead_of_decisive", "required", "recalled", "omitting",
        "absent_n", "conditions", "cases", "buried_eligible_cases", "buried_failure_cases",
        "consistency_cases", "consistent_cases", "graded_with_evidence_and_confidence",
        "unsupported", "unsupported_buried", "both_correct", "person_only_correct",
        "judge_only_correct", "both_wrong", "agree"}


def table(rows: list[dict[str, Any]], columns: list[str] | None = None
          ) -> tuple[list[str], list[str], list[list[str]]]:
    """(column keys, header names, formatted rows) of a report section: its group keys first."""
    if not rows:
        return [], [], []
    groups = list(rows[0]["group"])
    keys = columns or [c for c in rows[0] if c != "group"]
    header = [column_name(k) for k in [*groups, *keys]]
    body = [[cell(g, r["group"].get(g)) for g in groups] + [cell(k, r.get(k)) for k in keys]
            for r in rows]
    return [*groups, *keys], header, body


def traffic_sentence(traffic: str) -> str:
    """What the report counts, said once at the top."""
    return {"production": "Counts production traffic (requests of no experiment); the sweep "
                          "sections count the experiments.",
            "experiment": "Counts experiment traffic only (sweeps and replays).",
            "all": "Counts all traffic, production and experiments together."}[traffic]


def graders_sentence(graders: str) -> str:
    """Whose grades the report counts (docs/grading.md, "Whose grades count"), said once."""
    return {"all": "Counts every grade: a person's over the references' over the judge's.",
            "person": "Counts a person's grades only (grader=person).",
            "references": "Counts the reference answers' grades only (grader=references).",
            "judge": "Counts the LLM judge's grades only (grader=judge)."}[graders]


def calibration_sentence(rows: list[dict[str, Any]]) -> str:
    """The judge's calibration in one sentence (docs/grading.md, "Judge calibration"); empty
    when no request has both a person's and the judge's grade."""
    row = rows[0] if len(rows) == 1 else None
    if not row or not row.get("n"):
        return ""
    kappa = ("Cohen's kappa undefined (every grade the same)" if row.get("kappa") is None else
             f"Cohen's kappa {row['kappa']:.2f} ({row['kappa_ci_low']:.2f} to "
             f"{row['kappa_ci_high']:.2f})").replace("-", MINUS)
    return (f"Judge calibration: on the {row['n']:,} requests both a person and the LLM judge "
            f"graded, they agree on {percent(row['agreement'])} (95% CI "
            f"{percent(row['agreement_ci_low'])} to {percent(row['agreement_ci_high'])}); "
            f"{kappa}.")


def where(position: dict[str, Any], k: Any = None) -> str:
    """``slot 5 of 10, middle`` for an incident's chunk (``not in the prompt`` without a slot)."""
    if position.get("slot") is None:
        return "not in the prompt"
    return (f"slot {position['slot']}" + (f" of {k}" if k else "")
            + (f", {position['band']}" if position.get("band") else ""))


def incident_row(trace: dict[str, Any]) -> list[str]:
    """An incident request as table cells: time, model, template, class, where the decisive
    evidence sat, what the answer cited, trace id (text neutralized for spreadsheets)."""
    k = trace.get("k")
    decisive = "; ".join(f"{chunk_words(d)} at {where(d, k)}" for d in trace["decisive"]) or "–"
    cited = "; ".join(f"{chunk_words(c)} at {where(c, k)}" for c in trace["cited"]) or "nothing"
    when = str(trace.get("time") or "–")[:16].replace("T", " ")
    return [str(neutralize(v)) for v in (when, trace.get("model") or "–",
                                         trace.get("template") or "–", trace.get("class") or "–",
                                         decisive, cited, str(trace.get("trace_id")))]


INCIDENT_HEADER = ["Time (UTC)", "Model", "Template", "Class", "Decisive evidence",
                   "Answer cited", "Trace"]


def chunk_words(position: dict[str, Any]) -> str:
    """A cited or decisive chunk in words: its id, source, authority and label."""
    facts = [str(v) for v in (position.get("source_id"), position.get("authority"),
                              position.get("label")) if v]
    return f"{position.get('chunk_id')}" + (f" ({', '.join(facts)})" if facts else "")


WEEKLY_COLUMNS = ["week", "requests", "graded", "accuracy", "wrong", "buried", "buried_rate",
                  "citation_alignment", "accuracy_change", "buried_rate_change"]


def incidents_sentence(report: dict[str, Any]) -> str:
    """How many incidents there were and how many questions the report shows."""
    totals = (report.get("review") or {}).get("incidents") or {}
    shown = len(report.get("incidents") or [])
    questions, wrong = totals.get("questions", shown), totals.get("requests", 0)
    more = (f"; the {shown:,} most frequent are shown" if questions > shown else "")
    return (f"{wrong:,} such wrong answers to {questions:,} questions{more}, each with its "
            "newest requests.")
