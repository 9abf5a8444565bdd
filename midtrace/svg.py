"""Small SVG charts for the HTML report: pure functions from numbers to an <svg> string.

No browser, no download, no plotting library: the report must render anywhere, offline.
Every text that reaches the SVG is escaped.

A chart is drawn in a ``WIDTH``-wide coordinate system and scales to the width of its page
(``width="100%"``). Nothing is left to chance at the edges: the left margin is as wide as
the longest tick label, category labels that would collide are turned, and the chart grows
down to hold them and its legend. Axes are either shares (``percent``: 0% to 100%) or counts
(``count``: whole numbers with thousands separators, never 1.2e+03).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Literal

WIDTH = 960
PLOT_HEIGHT = 220
TOP = 34
RIGHT = 16
FONT = 12
CHAR = 7.2  # a generous average advance of a FONT-px sans-serif character
PALETTE = ("#3b6ea8", "#d1793b", "#4f9a5a", "#b5484f", "#7d62a8", "#8a6d3b", "#c26aa4", "#6b6b6b")
TURN = 35  # degrees a crowded category label is turned

Axis = Literal["percent", "count", "number"]


def _num(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def text_width(text: str, size: float = FONT) -> float:
    """The width a label needs, estimated on the generous side."""
    return len(text) * CHAR * size / FONT


def nice_ticks(top: float, axis: Axis) -> list[float]:
    """Tick values from 0 to at least ``top``: quarters for shares, 1-2-5 steps for counts
    (whole numbers only)."""
    if axis == "percent":
        return [top * i / 4 for i in range(5)]
    top = top if top > 0 else 1.0
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if axis == "count":
        step = max(1.0, math.ceil(step))
    count = math.ceil(top / step - 1e-9)
    return [step * i for i in range(count + 1)]


def tick_label(value: float, axis: Axis) -> str:
    if axis == "percent":
        return f"{value:.0%}"
    if axis == "count":
        return f"{int(round(value)):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".") if value else "0"


def _legend(names: Sequence[str], x0: float, x1: float) -> list[tuple[float, int, str]]:
    """(x, row, name) of each legend entry, flowing left to right and wrapping."""
    out = []
    x, row = x0, 0
    for name in names:
        width = 18 + text_width(name) + 18
        if x > x0 and x + width > x1:
            x, row = x0, row + 1
        out.append((x, row, name))
        x += width
    return out


class _Frame:
    """The axes of one chart: margins sized to its labels, ticks, gridlines."""

    def __init__(self, title: str, top_value: float, y_label: str, axis: Axis,
                 bottom: float) -> None:
        self.axis = axis
        self.ticks = nice_ticks(top_value, axis)
        self.y_top = self.ticks[-1] or 1.0
        labels = [tick_label(t, axis) for t in self.ticks]
        self.left = 16 + (FONT + 8 if y_label else 0) + max(text_width(s) for s in labels) + 8
        self.x0, self.x1 = self.left, WIDTH - RIGHT
        self.y1, self.y0 = TOP, TOP + PLOT_HEIGHT
        self.height = self.y0 + bottom
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {self.height:.0f}" '
            f'width="100%" role="img" aria-label="{escape(title)}" font-family="sans-serif" '
            f'font-size="{FONT}" style="height:auto;display:block">',
            f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14" '
            f'font-weight="bold">{escape(title)}</text>',
        ]
        for value, label in zip(self.ticks, labels, strict=True):
            y = self.y(value)
            self.parts.append(f'<line x1="{self.x0:.1f}" x2="{self.x1}" y1="{y:.1f}" '
                              f'y2="{y:.1f}" stroke="#e3e3e3"/>')
            self.parts.append(f'<text class="tick" x="{self.x0 - 6:.1f}" y="{y + 4:.1f}" '
                              f'text-anchor="end">{escape(label)}</text>')
        if y_label:
            mid = (self.y0 + self.y1) / 2
            self.parts.append(f'<text x="{8 + FONT}" y="{mid:.1f}" text-anchor="middle" '
                              f'transform="rotate(-90 {8 + FONT} {mid:.1f})">'
                              f'{escape(y_label)}</text>')
        self.parts.append(f'<line x1="{self.x0:.1f}" x2="{self.x1}" y1="{self.y0}" '
                          f'y2="{self.y0}" stroke="#555"/>')

    def y(self, value: float) -> float:
        return self.y0 - (self.y0 - self.y1) * max(0.0, min(value, self.y_top)) / self.y_top

    def value(self, value: float) -> str:
        return tick_label(value, self.axis) if self.axis != "percent" else f"{value:.1%}"

    def end(self) -> str:
        return "".join([*self.parts, "</svg>"])


def _category_labels(labels: Sequence[str], slot: float) -> tuple[bool, float]:
    """Whether labels must be turned to fit their slots, and the height they need."""
    widest = max((text_width(s) for s in labels), default=0)
    if widest <= slot * 0.92:
        return False, FONT + 8
    return True, widest * math.sin(math.radians(TURN)) + FONT + 12


def _empty(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} 60" width="100%" '
            f'style="height:auto;display:block" font-family="sans-serif" '
            f'font-size="{FONT}"><text x="10" y="34">{escape(title)}: no data</text></svg>')


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float | None],
              lows: Sequence[float | None] | None = None,
              highs: Sequence[float | None] | None = None,
              notes: Sequence[str] | None = None, y_label: str = "",
              y_max: float | None = None, axis: Axis = "percent") -> str:
    """Vertical bars, optionally with interval whiskers and a note (e.g. ``n=12``) under each."""
    if not labels or not any(_num(v) for v in values):
        return _empty(title)
    top_value = max([v for v in [*values, *(highs or [])] if _num(v)] or [1.0])  # type: ignore[type-var]
    top_value = y_max if y_max is not None else (top_value or 1.0)
    slot_guess = (WIDTH - RIGHT - 90) / len(labels)
    shown = [f"{label} · {notes[i]}" if notes else label for i, label in enumerate(labels)]
    turned, label_height = _category_labels(shown if notes else labels, slot_guess)
    if not turned:
        shown = list(labels)
    bottom = label_height + (FONT + 6 if notes and not turned else 0) + 8
    f = _Frame(title, top_value, y_label, axis, bottom)
    slot = (f.x1 - f.x0) / len(labels)
    for i, label in enumerate(labels):
        cx = f.x0 + slot * (i + 0.5)
        v = values[i]
        if _num(v):
            f.parts.append(f'<rect x="{cx - slot * 0.35:.1f}" y="{f.y(v):.1f}" '  # type: ignore[arg-type]
                           f'width="{slot * 0.7:.1f}" height="{f.y0 - f.y(v):.1f}" '  # type: ignore[arg-type]
                           f'fill="{PALETTE[0]}"><title>{escape(label)}: '
                           f'{escape(f.value(v))}</title></rect>')  # type: ignore[arg-type]
        lo = lows[i] if lows else None
        hi = highs[i] if highs else None
        if _num(lo) and _num(hi):
            f.parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{f.y(lo):.1f}" '  # type: ignore[arg-type]
                           f'y2="{f.y(hi):.1f}" stroke="#222" stroke-width="1.5"/>')  # type: ignore[arg-type]
            for end in (lo, hi):
                f.parts.append(f'<line x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{f.y(end):.1f}" '  # type: ignore[arg-type]
                               f'y2="{f.y(end):.1f}" stroke="#222" stroke-width="1.5"/>')  # type: ignore[arg-type]
        ly = f.y0 + FONT + 4
        if turned:
            f.parts.append(f'<text class="category" x="{cx:.1f}" y="{ly}" text-anchor="end" '
                           f'transform="rotate(-{TURN} {cx:.1f} {ly})">{escape(shown[i])}</text>')
        else:
            f.parts.append(f'<text class="category" x="{cx:.1f}" y="{ly}" '
                           f'text-anchor="middle">{escape(label)}</text>')
            if notes:
                f.parts.append(f'<text class="note" x="{cx:.1f}" y="{ly + FONT + 4}" '
                               f'text-anchor="middle" fill="#555">{escape(notes[i])}</text>')
    return f.end()


def line_chart(title: str, x_labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
               y_label: str = "", y_max: float | None = None, axis: Axis = "percent") -> str:
    """One line per series over shared x labels; a missing value breaks its line."""
    values = [v for s in series.values() for v in s if _num(v)]
    if not x_labels or not values:
        return _empty(title)
    top_value = y_max if y_max is not None else (max(values) or 1.0)  # type: ignore[type-var]
    legend = _legend(list(series), 60, WIDTH - RIGHT)
    rows = (legend[-1][1] + 1) if len(series) > 1 else 0
    bottom = FONT + 12 + rows * (FONT + 8) + 6
    f = _Frame(title, top_value, y_label, axis, bottom)
    # every x label sits in the middle of its own slot, so the first and last fit
    slot = (f.x1 - f.x0) / len(x_labels)

    def xy(i: int, v: float) -> tuple[float, float]:
        return f.x0 + slot * (i + 0.5), f.y(v)

    every = max(1, math.ceil(max(text_width(s) for s in x_labels) * 1.15 / slot))
    for i, label in enumerate(x_labels):
        if i % every == 0:
            x, _ = xy(i, 0)
            f.parts.append(f'<text class="category" x="{x:.1f}" y="{f.y0 + FONT + 4}" '
                           f'text-anchor="middle">{escape(label)}</text>')
    for n, (name, ys) in enumerate(series.items()):
        colour = PALETTE[n % len(PALETTE)]
        segment: list[str] = []
        runs: list[list[str]] = []
        for i, v in enumerate(ys):
            if _num(v):
                x, yy = xy(i, v)  # type: ignore[arg-type]
                segment.append(f"{x:.1f},{yy:.1f}")
                f.parts.append(f'<circle cx="{x:.1f}" cy="{yy:.1f}" r="3.5" fill="{colour}">'
                               f'<title>{escape(name)} {escape(x_labels[i])}: '
                               f'{escape(f.value(v))}</title></circle>')  # type: ignore[arg-type]
            elif segment:
                runs.append(segment)
                segment = []
        if segment:
            runs.append(segment)
        for run in runs:
            f.parts.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                           'stroke-width="2"/>')
    if rows:
        for n, (lx, row, name) in enumerate(legend):
            ly = f.y0 + FONT + 16 + row * (FONT + 8) + FONT
            f.parts.append(f'<rect x="{lx:.1f}" y="{ly - FONT + 2}" width="11" height="11" '
                           f'fill="{PALETTE[n % len(PALETTE)]}"/><text class="legend" '
                           f'x="{lx + 16:.1f}" y="{ly}">{escape(name)}</text>')
    return f.end()
