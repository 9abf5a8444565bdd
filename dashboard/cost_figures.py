"""The Overview's cost charts: plain functions from the cost views' frames to Plotly figures.

Like dashboard/figures.py: no Streamlit, no queries, every string from the data through
``esc`` (template and strategy names are an app's own ids, untrusted).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from midtrace.dashboard.figures import SERIES_COLORS, _layout, _week_axis, empty, esc

COST_COLOR = SERIES_COLORS[0]
PER_CORRECT_COLOR = SERIES_COLORS[1]
NONE = "(none)"


def _float(value: Any) -> float | None:
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return None if number != number else number


def cost_by_week(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """``cost_by_week`` rows: the week's cost as bars, cost per correct answer as a line on a
    second axis. A week with nothing priced has no bar, not a zero one."""
    if df.empty or int(df["priced"].sum()) == 0:
        return empty("No request in this range has a cost: none reported one, and no "
                     "model is in the price table")
    part = df.sort_values("week")
    weeks = pd.to_datetime(part["week"])
    custom = [[int(r["requests"]), int(r["priced"]), int(r["reported"]), int(r["estimated"]),
               int(r["correct"])] for _, r in part.iterrows()]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(
        x=weeks, y=[_float(v) for v in part["cost_usd"]], name="cost", marker_color=COST_COLOR,
        customdata=custom,
        hovertemplate=("week of %{x|%d %b %Y}<br>cost $%{y:,.4f}<br>%{customdata[1]} of "
                       "%{customdata[0]} requests priced (%{customdata[2]} reported, "
                       "%{customdata[3]} estimated)<extra></extra>")), secondary_y=False)
    fig.add_trace(go.Scatter(
        x=weeks, y=[_float(v) for v in part["cost_per_correct"]], name="cost per correct answer",
        mode="lines+markers", line=dict(color=PER_CORRECT_COLOR, width=2), customdata=custom,
        hovertemplate=("week of %{x|%d %b %Y}<br>cost per correct answer $%{y:,.4f}<br>"
                       "%{customdata[4]} correct answers<extra></extra>")), secondary_y=True)
    _week_axis(fig, part)
    fig.update_yaxes(title="cost (USD)", tickprefix="$", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="per correct answer (USD)", tickprefix="$", rangemode="tozero",
                     showgrid=False, secondary_y=True)
    return _layout(fig, title)


def slice_name(template: Any, strategy: Any) -> str:
    """One template and strategy as a label: "support-v2 · edge"; missing ones as (none)."""
    def name(value: Any) -> str:
        return NONE if value is None or value != value else str(value)
    return f"{name(template)} · {name(strategy)}"


def cost_by_slice(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """``cost_summary`` rows grouped by template and strategy: cost per correct answer as
    horizontal bars, the most expensive first; the total cost in the hover. A slice with no
    cost or no correct answer is listed without a bar."""
    rows = df[df["requests"] > 0] if not df.empty else df
    if rows.empty or int(rows["priced"].sum()) == 0:
        return empty("No template or strategy in this range has a cost")
    rows = rows.assign(_name=[slice_name(t, s) for t, s in zip(rows["template"], rows["strategy"])],
                       _value=[_float(v) for v in rows["cost_per_correct"]])
    rows = rows.sort_values("_value", ascending=True, na_position="first")
    fig = go.Figure(go.Bar(
        y=[esc(n) for n in rows["_name"]], x=[_float(v) for v in rows["_value"]], orientation="h",
        marker_color=PER_CORRECT_COLOR,
        customdata=[[_float(r["cost_usd"]), int(r["correct"]), int(r["requests"]),
                     int(r["priced"])] for _, r in rows.iterrows()],
        hovertemplate=("%{y}<br>cost per correct answer $%{x:,.4f}<br>cost $%{customdata[0]:,.4f} "
                       "for %{customdata[1]} correct answers<br>%{customdata[3]} of "
                       "%{customdata[2]} requests priced<extra></extra>")))
    fig.update_xaxes(title="cost per correct answer (USD)", tickprefix="$", rangemode="tozero")
    fig.update_yaxes(type="category")
    return _layout(fig, title, height=max(240, 60 + 34 * len(rows)))
