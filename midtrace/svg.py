"""Small SVG charts for the HTML report: pure functions from numbers to an <svg> string.

No browser, no download, no plotting library: the report must render anywhere, offline.
Every text that reaches the SVG is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

WIDTH = 640
HEIGHT = 260
MARGIN = (30, 20, 60, 50)  # top, right, bottom, left
PALETTE = ("#3b6ea8", "#d1793b", "#4f9a5a", "#b5484f", "#7d62a8", "#8a6d3b", "#c26aa4", "#6b6b6b")


def _num(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _frame(title: str, y_max: float, y_label: str) -> tuple[list[str], float, float, float, float]:
    top, right, bottom, left = MARGIN
    x0, x1, y0, y1 = left, WIDTH - right, HEIGHT - bottom, top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for i in range(5):
        value = y_max * i / 4
        y = y0 - (y0 - y1) * i / 4
        parts.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.2g}</text>')
    parts.append(f'<text x="12" y="{(y0 + y1) / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {(y0 + y1) / 2:.1f})">{escape(y_label)}</text>')
    parts.append(f'<line x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}" stroke="#555"/>')
    return parts, x0, x1, y0, y1


def _empty(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} 60" width="{WIDTH}" '
            f'height="60" font-family="sans-serif" font-size="12"><text x="10" y="34">'
            f'{escape(title)}: no data</text></svg>')


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float | None],
              lows: Sequence[float | None] | None = None,
              highs: Sequence[float | None] | None = None,
              notes: Sequence[str] | None = None, y_label: str = "",
              y_max: float | None = None) -> str:
    """Vertical bars, optionally with interval whiskers and a note (e.g. ``n=12``) under each."""
    if not labels or not any(_num(v) for v in values):
        return _empty(title)
    top_value = max([v for v in [*values, *(highs or [])] if _num(v)] or [1.0])  # type: ignore[type-var]
    y_top = y_max if y_max is not None else (top_value or 1.0)
    parts, x0, x1, y0, y1 = _frame(title, y_top, y_label)

    def y(v: float) -> float:
        return y0 - (y0 - y1) * min(v, y_top) / y_top

    slot = (x1 - x0) / len(labels)
    for i, label in enumerate(labels):
        cx = x0 + slot * (i + 0.5)
        v = values[i]
        if _num(v):
            parts.append(f'<rect x="{cx - slot * 0.35:.1f}" y="{y(v):.1f}" width="{slot * 0.7:.1f}" '  # type: ignore[arg-type]
                         f'height="{y0 - y(v):.1f}" fill="{PALETTE[0]}"><title>{escape(label)}: '  # type: ignore[arg-type]
                         f'{v:.3g}</title></rect>')
        lo = lows[i] if lows else None
        hi = highs[i] if highs else None
        if _num(lo) and _num(hi):
            parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" '  # type: ignore[arg-type]
                         'stroke="#222" stroke-width="1.5"/>')
            for end in (lo, hi):
                parts.append(f'<line x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{y(end):.1f}" '  # type: ignore[arg-type]
                             f'y2="{y(end):.1f}" stroke="#222" stroke-width="1.5"/>')  # type: ignore[arg-type]
        parts.append(f'<text x="{cx:.1f}" y="{y0 + 16}" text-anchor="middle">{escape(label)}</text>')
        if notes:
            parts.append(f'<text x="{cx:.1f}" y="{y0 + 30}" text-anchor="middle" fill="#666">'
                         f'{escape(notes[i])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def line_chart(title: str, x_labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
               y_label: str = "", y_max: float | None = None) -> str:
    """One line per series over shared x labels; a missing value breaks its line."""
    values = [v for s in series.values() for v in s if _num(v)]
    if not x_labels or not values:
        return _empty(title)
    y_top = y_max if y_max is not None else (max(values) or 1.0)  # type: ignore[type-var]
    parts, x0, x1, y0, y1 = _frame(title, y_top, y_label)
    step = (x1 - x0) / max(len(x_labels) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = x0 + step * i if len(x_labels) > 1 else (x0 + x1) / 2
        return x, y0 - (y0 - y1) * min(v, y_top) / y_top

    every = max(1, math.ceil(len(x_labels) / 8))
    for i, label in enumerate(x_labels):
        if i % every == 0:
            x, _ = xy(i, 0)
            parts.append(f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">{escape(label)}</text>')
    for n, (name, ys) in enumerate(series.items()):
        colour = PALETTE[n % len(PALETTE)]
        segment: list[str] = []
        runs: list[list[str]] = []
        for i, v in enumerate(ys):
            if _num(v):
                x, yy = xy(i, v)  # type: ignore[arg-type]
                segment.append(f"{x:.1f},{yy:.1f}")
                parts.append(f'<circle cx="{x:.1f}" cy="{yy:.1f}" r="3" fill="{colour}">'
                             f'<title>{escape(name)} {escape(x_labels[i])}: {v:.3g}</title></circle>')
            elif segment:
                runs.append(segment)
                segment = []
        if segment:
            runs.append(segment)
        for run in runs:
            parts.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                         'stroke-width="2"/>')
        lx = x0 + 10 + (n % 4) * 145
        ly = HEIGHT - 14 - (n // 4) * 14
        parts.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{lx + 14}" y="{ly + 1}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
