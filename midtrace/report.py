"""The weekly review as a document: JSON (schema in docs/report-schema.md), Markdown or HTML.

``build_report`` reads the metric views through a client and returns a plain dict; the
renderers turn that dict into text. The HTML embeds its charts as inline SVG (midtrace/svg.py)
and escapes every value, since questions, sources and answers are untrusted text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

import pandas as pd

from midtrace import svg
from midtrace.client import Client, Filters
from midtrace.collector.query.reads import BANDS, json_value

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
                 group_by: Sequence[str] = ()) -> dict[str, Any]:
    """Every section of the weekly review, as JSON-safe data (docs/report-schema.md)."""
    group_by = list(group_by)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "filters": filters.to_params(),
        "traffic": filters.effective_traffic(),
        "group_by": group_by,
    }
    overall = client.view("overview", filters)
    report["requests"] = int(overall.iloc[0]["requests"]) if not overall.empty else 0
    for section, (view, columns) in SECTIONS.items():
        # a view's own keys are never group keys too (weekly views are already by week)
        frame = client.view(view, filters, group_by)
        keys = [g for g in group_by if g in frame.columns and g not in columns]
        report[section] = _records(frame, keys, columns)
    return report


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# --- Markdown ----------------------------------------------------------------------------------

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
}


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _table_rows(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    if not rows:
        return [], []
    groups = list(rows[0]["group"])
    columns = [c for c in rows[0] if c != "group"]
    header = groups + columns
    body = [[_cell(r["group"].get(g)) for g in groups] + [_cell(r.get(c)) for c in columns]
            for r in rows]
    return header, body


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def traffic_sentence(traffic: str) -> str:
    """What the report counts, said once at the top."""
    return {"production": "Counts production traffic (requests of no experiment); the sweep "
                          "sections count the experiments.",
            "experiment": "Counts experiment traffic only (sweeps and replays).",
            "all": "Counts all traffic, production and experiments together."}[traffic]


def render_markdown(report: dict[str, Any]) -> str:
    lines = ["# midtrace report", ""]
    filters = report["filters"]
    lines.append("Filters: " + (", ".join(f"`{k}={v}`" for k, v in filters.items()) or "none")
                 + (f"; grouped by {', '.join(report['group_by'])}" if report["group_by"] else "")
                 + f"; {report['requests']} requests; generated {report['generated_at']}.")
    lines += ["", traffic_sentence(report["traffic"])]
    for section, title in TITLES.items():
        lines += ["", f"## {title}", ""]
        header, body = _table_rows(report[section])
        if not header:
            lines.append("No data.")
            continue
        lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in body:
            lines.append("| " + " | ".join(_md_escape(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


# --- HTML ----------------------------------------------------------------------------------------


def _label(group: dict[str, Any], *extra: Any) -> str:
    return " / ".join(str(v) for v in [*group.values(), *extra] if v is not None) or "all"


def charts(report: dict[str, Any]) -> list[str]:
    """The report's charts as SVG strings: bands, slots, taxonomy, weekly trends."""
    out = []
    band_rows = sorted(report["accuracy_by_band"], key=lambda r: (
        _label(r["group"]), ["absent", *BANDS].index(r["band"]) if r["band"] in ["absent", *BANDS] else 9))
    out.append(svg.bar_chart(
        "Accuracy by decisive-evidence band (Wilson 95%)",
        [_label(r["group"], r["band"]) for r in band_rows], [r["accuracy"] for r in band_rows],
        [r["ci_low"] for r in band_rows], [r["ci_high"] for r in band_rows],
        [f"n={r['n']}" for r in band_rows], y_label="accuracy", y_max=1.0))
    slots = report["accuracy_by_slot"]
    if slots:
        ks: dict[Any, int] = {}
        for r in slots:
            ks[r["k"]] = ks.get(r["k"], 0) + (r["n"] or 0)
        k = max(ks, key=lambda key: ks[key])  # the U-curve of the most common prompt size
        series: dict[str, list[float | None]] = {}
        for r in slots:
            if r["k"] == k:
                series.setdefault(_label(r["group"]), [None] * int(k))[int(r["slot"]) - 1] = r["accuracy"]
        out.append(svg.line_chart(f"Accuracy by decisive slot, k={k}",
                                  [str(i) for i in range(1, int(k) + 1)], series,
                                  y_label="accuracy", y_max=1.0))
    tax = report["taxonomy"]
    out.append(svg.bar_chart("Failure taxonomy", [_label(r["group"], r["class"]) for r in tax],
                             [r["n"] for r in tax], y_label="requests"))
    weekly = report["weekly"]
    weeks = sorted({r["week"] for r in weekly})
    for metric, title in (("accuracy", "Accuracy by week"), ("buried_rate", "Buried rate by week"),
                          ("citation_alignment", "Citation alignment by week")):
        series = {}
        for r in weekly:
            series.setdefault(_label(r["group"]), [None] * len(weeks))[weeks.index(r["week"])] = r[metric]
        out.append(svg.line_chart(title, weeks, series, y_label=metric.replace("_", " "), y_max=1.0))
    return out


def render_html(report: dict[str, Any]) -> str:
    parts = [
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<title>midtrace report</title><style>body{font-family:sans-serif;max-width:1100px;"
        "margin:2em auto;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
        "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
        "figure{margin:1em 0}</style></head><body>",
        "<h1>midtrace report</h1>",
        f"<p>Filters: {escape(', '.join(f'{k}={v}' for k, v in report['filters'].items()) or 'none')}"
        f"{escape('; grouped by ' + ', '.join(report['group_by'])) if report['group_by'] else ''}"
        f"; {report['requests']} requests; generated {escape(report['generated_at'])}.</p>",
        f"<p>{escape(traffic_sentence(report['traffic']))}</p>",
    ]
    parts += [f"<figure>{chart}</figure>" for chart in charts(report)]
    for section, title in TITLES.items():
        parts.append(f"<h2>{escape(title)}</h2>")
        header, body = _table_rows(report[section])
        if not header:
            parts.append("<p>No data.</p>")
            continue
        parts.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header)
                     + "</tr></thead><tbody>")
        for row in body:
            parts.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>\n")
    return "".join(parts)


RENDERERS = {"json": render_json, "md": render_markdown, "html": render_html}


def render(report: dict[str, Any], fmt: str) -> str:
    return RENDERERS[fmt](report)
