"""The report as Markdown: findings, incidents, the weeks, then every table in an appendix.

Text from traces is escaped so that it shows as the text it is: no emphasis, link, image or
HTML tag can come from a question or a template id. ``chat_findings`` is the short form
posted to a chat webhook (midtrace/webhook.py).
"""

from __future__ import annotations

import re
from typing import Any

from midtrace.report_cells import (
    INCIDENT_HEADER, TITLES, WEEKLY_COLUMNS, incident_row, incidents_sentence, table,
    calibration_sentence, graders_sentence, traffic_sentence)

# what can start emphasis, code, a link or image, strikethrough or a table cell anywhere in a
# line (the text is always written after a prefix of ours, so line-start syntax cannot apply)
_MARKDOWN = re.compile(r"([\\`*_\[\]~|])")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # an HTML tag, comment or autolink would start here
_ENTITY = re.compile(r"&(?=[A-Za-z#])")


def md_text(text: Any) -> str:
    """``text`` as literal Markdown: on one line, HTML and Markdown syntax escaped."""
    plain = _TAG.sub("&lt;", _ENTITY.sub("&amp;", " ".join(str(text).split())))
    return _MARKDOWN.sub(r"\\\1", plain)


def chat_text(text: Any) -> str:
    """``text`` for a Slack- or Teams-style message: on one line, ``&``, ``<`` and ``>``
    escaped (Slack's rule; nothing else there forms a link or a mention)."""
    plain = " ".join(str(text).split())
    return plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str) -> str:
    return url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")


def title(report: dict[str, Any]) -> str:
    week = report.get("review", {}).get("week")
    return f"midtrace weekly review: week of {week}" if week else "midtrace report"


def scope(report: dict[str, Any]) -> str:
    filters = report["filters"]
    shown = ", ".join(f"{k}={v}" for k, v in filters.items()) or "none"
    grouped = f"; grouped by {', '.join(report['group_by'])}" if report["group_by"] else ""
    return (f"Filters: {shown}{grouped}; {report['requests']:,} requests; generated "
            f"{report['generated_at']}.")


def method(report: dict[str, Any]) -> str:
    review = report.get("review") or {}
    if not review.get("compared_with"):
        return ""
    return (f"The week of {review['week']} against the week of {review['compared_with']}. "
            "A finding is a change unlikely to be noise: a two-proportion z-test with p < 0.05, "
            f"at least {review['min_n']:,} in each week; strongest first. A new slice (first "
            "seen this week) is compared with all traffic of the week before.")


def finding_lines(report: dict[str, Any], escape: Any = md_text) -> list[str]:
    findings = report.get("findings") or []
    if not findings:
        return [escape((report.get("review") or {}).get("summary") or "No findings.")]
    return [f"{i}. {escape(f['text'])}" for i, f in enumerate(findings, start=1)]


def chat_findings(report: dict[str, Any], dashboard_url: str | None = None) -> str:
    """The findings as a chat message (Markdown, escaped as Slack asks)."""
    lines = [f"*{chat_text(title(report))}* ({chat_text(traffic_sentence(report['traffic']))})",
             *finding_lines(report, chat_text)]
    incidents = report.get("incidents") or []
    if incidents:
        wrong = sum(q["requests"] for q in incidents)
        lines.append(f"Incidents: {wrong:,} wrong answers with the evidence in the prompt, "
                     f"across {len(incidents):,} questions.")
    if dashboard_url:
        lines.append(f"Dashboard: {chat_text(dashboard_url)}")
    return "\n".join(lines)


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_text(h) for h in header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in body]
    return lines


def incident_lines(report: dict[str, Any]) -> list[str]:
    questions = report.get("incidents") or []
    if not questions:
        return ["No wrong answers with the decisive evidence in the prompt this week."]
    lines = ["Wrong answers whose decisive evidence was in the prompt and still lost: *buried* "
             "(only in the middle of the prompt) or *unused* (at an edge). "
             + incidents_sentence(report)]
    for i, q in enumerate(questions, start=1):
        classes = ", ".join(f"{n:,} {c}" for c, n in q["classes"].items() if n)
        lines += ["", f"### {i}. {md_text(q['question'] or '(no question recorded)')}", "",
                  f"{q['requests']:,} wrong answers ({classes}).", ""]
        lines += _incident_table(INCIDENT_HEADER, [incident_row(t) for t in q["traces"]],
                                 q["traces"])
    return lines


def _incident_table(header: list[str], body: list[list[str]],
                    traces: list[dict[str, Any]]) -> list[str]:
    lines = _md_table(header, [])
    for row, t in zip(body, traces, strict=True):
        cells = [md_text(c) for c in row]
        if t.get("inspector_url"):
            cells[-1] = f"[{cells[-1]}]({_link(t['inspector_url'])})"
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# {title(report)}", "", md_text(scope(report)), "",
             traffic_sentence(report["traffic"]) + " "
             + graders_sentence(report.get("graders", "all"))]
    if calibration_sentence(report.get("judge_agreement") or []):
        lines += ["", calibration_sentence(report["judge_agreement"])]
    if method(report):
        lines += ["", method(report)]
    lines += ["", "## Findings", "", *finding_lines(report)]
    lines += ["", "## Incidents of the week", "", *incident_lines(report)]
    lines += ["", "## Week by week", ""]
    _, header, body = table(report["weekly"], WEEKLY_COLUMNS)
    lines += _md_table(header, body) if header else ["No data."]
    lines += ["", "## Appendix: every table", "", "<details><summary>The metric views behind "
              "this report, one table each</summary>"]
    for section, name in TITLES.items():
        lines += ["", f"### {name}", ""]
        _, header, body = table(report[section])
        lines += _md_table(header, body) if header else ["No data."]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
