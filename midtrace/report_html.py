"""The report as one self-contained HTML page: findings, incidents, charts, appendix.

No script, no stylesheet or font from elsewhere, no image but inline SVG (midtrace/svg.py):
the file opens the same offline, in a mail client's preview or in a browser. Every value is
escaped, since questions, sources, answers and template ids are untrusted text.
"""

from __future__ import annotations

from html import escape
from typing import Any

from midtrace import svg
from midtrace.collector.query.reads import BANDS
from midtrace.report_cells import (
    INCIDENT_HEADER, TITLES, WEEKLY_COLUMNS, incident_row, incidents_sentence, numeric, table,
    calibration_sentence, graders_sentence, traffic_sentence)
from midtrace.report_markdown import method, scope, title

WRONG_CLASSES = ("missing", "dropped", "buried", "unused", "unlabeled")
INCIDENT_WIDTHS = (12, 12, 10, 8, 22, 22, 14)  # percent of the page, per INCIDENT_HEADER column

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;
padding:0 1.5em;color:#222;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;
padding-bottom:.2em}h3{font-size:1.05em;margin:1.4em 0 .3em}
p,li,h1,h2,h3,summary,figcaption{overflow-wrap:anywhere}
.meta{color:#555;font-size:.92em;margin:.2em 0}
ol.findings{padding-left:1.6em}ol.findings li{margin:.5em 0;padding:.35em .6em;
border-left:4px solid #999;background:#fafafa}
ol.findings li.worse{border-color:#b5484f}ol.findings li.better{border-color:#4f9a5a}
p.quiet{padding:.5em .7em;background:#f4f6f8;border-left:4px solid #8aa}
figure{margin:1.6em 0}figcaption{color:#555;font-size:.9em;margin-top:.3em}
table{border-collapse:collapse;width:100%;margin:.4em 0 1.2em;font-size:13px}
td,th{border:1px solid #d6d6d6;padding:3px 6px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:#f3f3f3;font-weight:600}td.num,th.num{text-align:right}
div.wide{overflow-x:auto;max-width:100%}div.wide table{font-size:12px}
table.incidents{table-layout:fixed}table.incidents td:last-child{word-break:break-all}
details{margin:2em 0}summary{cursor:pointer;font-weight:600;font-size:1.15em}
"""


def _label(group: dict[str, Any], *extra: Any) -> str:
    return " / ".join(str(v) for v in [*group.values(), *extra] if v is not None) or "all"


def _weekly_series(rows: list[dict[str, Any]], value: str,
                   split: str | None = None) -> tuple[list[str], dict[str, list[Any]]]:
    weeks = sorted({r["week"] for r in rows})
    series: dict[str, list[Any]] = {}
    for r in rows:
        name = _label(r["group"], r.get(split) if split else None)
        series.setdefault(name, [None] * len(weeks))[weeks.index(r["week"])] = r[value]
    return weeks, series


def charts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's charts, each an SVG string with its caption."""
    out = []
    weekly = report["weekly"]
    for metric, name, caption in (
            ("accuracy", "Accuracy by week",
             "Graded requests answered correctly, per ISO week."),
            ("buried_rate", "Buried rate by week",
             "Wrong answers whose decisive evidence sat only in the middle of the prompt, as a "
             "share of all wrong answers."),
            ("citation_alignment", "Citation alignment by week",
             "Requests with decisive evidence in the prompt whose answer cited it.")):
        weeks, series = _weekly_series(weekly, metric)
        out.append((svg.line_chart(name, weeks, series, y_label=name.split(" by ")[0],
                                   y_max=1.0), caption))
    wrong = [r for r in report["taxonomy_by_week"] if r["class"] in WRONG_CLASSES]
    weeks, series = _weekly_series(wrong, "n", "class")
    out.append((svg.line_chart("Wrong answers by failure class and week", weeks, series,
                               y_label="wrong answers", axis="count"),
                "Each wrong answer has one class, by the furthest stage its decisive evidence "
                "reached: missing, dropped, buried (only in the middle), unused (at an edge), "
                "unlabeled (no decisive chunk known)."))
    order = ["absent", *BANDS]
    band_rows = sorted(report["accuracy_by_band"], key=lambda r: (
        _label(r["group"]), order.index(r["band"]) if r["band"] in order else len(order)))
    out.append((svg.bar_chart(
        "Accuracy by where the decisive evidence sat",
        [_label(r["group"], r["band"]) for r in band_rows], [r["accuracy"] for r in band_rows],
        [r["ci_low"] for r in band_rows], [r["ci_high"] for r in band_rows],
        [f"n={r['n']:,}" for r in band_rows], y_label="accuracy", y_max=1.0),
        "Whiskers: Wilson 95% intervals; n: graded requests. 'absent' is the closed-book "
        "baseline."))
    slots = report["accuracy_by_slot"]
    if slots:
        ks: dict[Any, int] = {}
        for r in slots:
            ks[r["k"]] = ks.get(r["k"], 0) + (r["n"] or 0)
        k = max(ks, key=lambda key: ks[key])  # the U-curve of the most common prompt size
        series = {}
        for r in slots:
            if r["k"] == k:
                series.setdefault(_label(r["group"]), [None] * int(k))[int(r["slot"]) - 1] = \
                    r["accuracy"]
        out.append((svg.line_chart(f"Accuracy by decisive slot, prompts of {k} chunks",
                                   [str(i) for i in range(1, int(k) + 1)], series,
                                   y_label="accuracy", y_max=1.0),
                    "The slot of the first decisive chunk in prompt order; the most common "
                    "prompt size. A U shape is evidence lost in the middle."))
    tax = report["taxonomy"]
    out.append((svg.bar_chart("Requests by failure class",
                              [_label(r["group"], r["class"]) for r in tax],
                              [r["n"] for r in tax], y_label="requests", axis="count"),
                "Every request in range by class, answered and ungraded included."))
    return out


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    keys, header, body = table(rows, columns)
    if not header:
        return "<p>No data.</p>"
    cls = [' class="num"' if numeric(k) else "" for k in keys]
    out = ["<table><thead><tr>", *(f"<th{c}>{escape(h)}</th>" for c, h in zip(cls, header)),
           "</tr></thead><tbody>"]
    for row in body:
        out.append("<tr>" + "".join(f"<td{c}>{escape(v)}</td>" for c, v in zip(cls, row))
                   + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _findings(report: dict[str, Any]) -> str:
    found = report.get("findings") or []
    if not found:
        summary = (report.get("review") or {}).get("summary") or "No findings."
        return f'<p class="quiet" id="no-findings">{escape(summary)}</p>'
    items = "".join(f'<li class="{escape(f.get("assessment", ""))}">{escape(f["text"])}</li>'
                    for f in found)
    return f'<ol class="findings" id="findings">{items}</ol>'


def _incidents(report: dict[str, Any]) -> str:
    questions = report.get("incidents") or []
    if not questions:
        return "<p>No wrong answers with the decisive evidence in the prompt this week.</p>"
    out = ["<p>Wrong answers whose decisive evidence was in the prompt and still lost: "
           "<em>buried</em> (only in the middle of the prompt) or <em>unused</em> (at an edge). "
           f"{escape(incidents_sentence(report))}</p>"]
    for i, q in enumerate(questions, start=1):
        classes = ", ".join(f"{n:,} {c}" for c, n in q["classes"].items() if n)
        out.append(f"<h3>{i}. {escape(q['question'] or '(no question recorded)')}</h3>"
                   f'<p class="meta">{q["requests"]:,} wrong answers ({escape(classes)}).</p>')
        out.append('<table class="incidents"><colgroup>'
                   + "".join(f'<col style="width:{w}%">' for w in INCIDENT_WIDTHS)
                   + "</colgroup><thead><tr>"
                   + "".join(f"<th>{escape(h)}</th>" for h in INCIDENT_HEADER)
                   + "</tr></thead><tbody>")
        for t in q["traces"]:
            cells = [escape(c) for c in incident_row(t)]
            if t.get("inspector_url"):
                cells[-1] = (f'<a href="{escape(t["inspector_url"], quote=True)}">'
                             f"{cells[-1]}</a>")
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        out.append("</tbody></table>")
    return "".join(out)


def render_html(report: dict[str, Any]) -> str:
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title(report))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title(report))}</h1>",
        f'<p class="meta">{escape(scope(report))}</p>',
        f'<p class="meta">{escape(traffic_sentence(report["traffic"]))} '
        f'{escape(graders_sentence(report.get("graders", "all")))}</p>',
    ]
    if calibration_sentence(report.get("judge_agreement") or []):
        parts.append(f'<p class="meta">'
                     f'{escape(calibration_sentence(report["judge_agreement"]))}</p>')
    if method(report):
        parts.append(f'<p class="meta">{escape(method(report))}</p>')
    parts += ["<h2>Findings</h2>", _findings(report),
              '<h2 id="incidents">Incidents of the week</h2>', _incidents(report),
              "<h2>The evidence</h2>", "<h3>Week by week</h3>",
              _table(report["weekly"], WEEKLY_COLUMNS)]
    parts += [f"<figure>{chart}<figcaption>{escape(caption)}</figcaption></figure>"
              for chart, caption in charts(report)]
    parts.append('<details id="appendix"><summary>Appendix: every table behind this report'
                 "</summary>")
    for section, name in TITLES.items():
        # a table of many columns scrolls within the page on a narrow screen, never past it
        parts.append(f'<h3>{escape(name)}</h3><div class="wide">{_table(report[section])}</div>')
    parts.append("</details></body></html>\n")
    return "".join(parts)
