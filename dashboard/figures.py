"""The dashboard's charts: plain functions from a data frame to a Plotly figure.

No Streamlit here and no queries: each function takes the frame a metric view returned (or a
trace's chunk table) and draws it, so it can be tested without a browser. Every string that
comes from the data (chunk ids, sources, model names, ...) passes through :func:`esc` before
it reaches a label or hover text: Plotly renders a subset of HTML there (``<a>``, ``<b>``,
``<br>``, ...), and trace data is untrusted.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from midtrace.dashboard import labels

BANDS = ("early", "middle", "late")
TAXONOMY = ("answered", "ungraded", "missing", "dropped", "buried", "unused", "unlabeled")
LABEL_COLORS = {
    "direct_answer": "#1b9e77",
    "exception_constraint": "#d95f02",
    "supporting_background": "#7570b3",
    "conflicting": "#e7298a",
    "irrelevant": "#a6a6a6",
}
UNLABELED_COLOR = "#d0d0d0"
TAXONOMY_COLORS = {
    "answered": "#4daf4a",
    "ungraded": "#d9d9d9",
    "missing": "#984ea3",
    "dropped": "#ff7f00",
    "buried": "#e41a1c",
    "unused": "#377eb8",
    "unlabeled": "#8c8c8c",
}
AUTHORITY_COLORS = {"canonical": "#1f77b4", "deprecated": "#d62728", "(none)": "#aaaaaa"}
SERIES_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22")
MIDDLE_TINT = "rgba(228, 26, 28, 0.07)"
FONT = dict(family="Inter, 'Source Sans Pro', sans-serif", size=13)


def esc(value: Any) -> str:
    """Text from the data, made inert for Plotly's HTML-like labels and hover text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return html.escape(str(value), quote=False)


def _layout(fig: go.Figure, title: str | None = None, height: int = 380, **kw: Any) -> go.Figure:
    fig.update_layout(
        title=dict(text=esc(title), x=0, xanchor="left", y=1, yanchor="top", yref="container",
                   pad=dict(t=8), font=dict(size=15)) if title else None,
        height=height, margin=dict(l=10, r=10, t=78 if title else 36, b=10), font=FONT,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                    title=None),
        hoverlabel=dict(align="left"), plot_bgcolor="white", **kw)
    fig.update_xaxes(showline=True, linecolor="#bbb", gridcolor="#eee")
    fig.update_yaxes(showline=True, linecolor="#bbb", gridcolor="#eee")
    return fig


def empty(message: str, height: int = 240) -> go.Figure:
    """A blank chart carrying one sentence, for a view that returned no rows."""
    fig = go.Figure()
    fig.add_annotation(text=esc(message), showarrow=False, x=0.5, y=0.5, xref="paper",
                       yref="paper", font=dict(size=14, color="#777"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, height=height)


def _pct_axis(fig: go.Figure, axis: str = "y", title: str | None = None) -> None:
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(tickformat=".0%", rangemode="tozero", title=title)


def _groups(df: pd.DataFrame, split: str | None) -> Iterable[tuple[str, pd.DataFrame]]:
    if split is None or split not in df.columns:
        yield "all", df
        return
    for key, part in df.groupby(df[split].astype("string").fillna("(none)"), sort=True,
                                dropna=False):
        yield str(key), part


def _error(part: pd.DataFrame, value: str, lo: str, hi: str) -> dict[str, Any] | None:
    if lo not in part.columns or hi not in part.columns:
        return None
    v = part[value].astype(float)
    return dict(type="data", symmetric=False, array=(part[hi].astype(float) - v).clip(lower=0),
                arrayminus=(v - part[lo].astype(float)).clip(lower=0), thickness=1.2, width=4)


def _rate_hover(name: str, key: str, value: str) -> str:
    return (f"{name}<br>{key} %{{x}}<br>{value} %{{y:.1%}}"
            "<br>95%% interval %{customdata[0]:.1%}–%{customdata[1]:.1%}"
            "<br>n = %{customdata[2]:,}<extra></extra>").replace("%%", "%")


def _custom(part: pd.DataFrame, lo: str, hi: str, n: str) -> list[list[Any]]:
    cols = [part[c] if c in part.columns else pd.Series([math.nan] * len(part), index=part.index)
            for c in (lo, hi, n)]
    return [list(row) for row in zip(*cols, strict=True)]


def rate_bars(df: pd.DataFrame, x: str, value: str = "accuracy", split: str | None = None,
              order: Sequence[str] | None = None, title: str | None = None,
              value_title: str = "accuracy", lo: str = "ci_low", hi: str = "ci_high",
              n: str = "n") -> go.Figure:
    """A rate per category with its 95% interval as error bars, one bar group per split value."""
    if df.empty:
        return empty("No rows for these filters" if split is None else
                     "Every split point has fewer than min_n graded requests: widen the "
                     "range or drop the split")
    fig = go.Figure()
    n_groups = len(list(_groups(df, split)))
    for i, (name, part) in enumerate(_groups(df, split)):
        if order is not None:
            part = part.set_index(x).reindex([o for o in order if o in set(part[x])]).reset_index()
        fig.add_trace(go.Bar(
            x=[esc(v) for v in part[x]], y=part[value].astype(float), name=esc(name),
            marker_color=SERIES_COLORS[i % len(SERIES_COLORS)], error_y=_error(part, value, lo, hi),
            customdata=_custom(part, lo, hi, n),
            text=[f"n={int(v):,}" if pd.notna(v) else "" for v in part[n]]
            if n in part and len(part) * n_groups <= 12 else None,
            textposition="inside", insidetextanchor="start",
            hovertemplate=_rate_hover(esc(name), esc(x), esc(value_title))))
    fig.update_layout(barmode="group", showlegend=split is not None)
    fig.update_xaxes(type="category", title=esc(x),
                     categoryorder="array", categoryarray=[esc(o) for o in order] if order else None)
    _pct_axis(fig, title=value_title)
    return _layout(fig, title)


def accuracy_by_band(df: pd.DataFrame, split: str | None = None, title: str | None = None,
                     baseline: pd.DataFrame | None = None) -> go.Figure:
    """Accuracy by the decisive chunk's band (early/middle/late) with intervals and n.

    ``baseline`` (rows with ``accuracy`` and optionally the split column) is drawn as a dashed
    line: accuracy when the decisive evidence was absent from the prompt.
    """
    fig = rate_bars(df, "band", split=split, order=BANDS, title=title)
    if baseline is not None and not baseline.empty:
        for i, (name, part) in enumerate(_groups(baseline, split)):
            acc = float(part["accuracy"].iloc[0])
            nb = int(part["n"].iloc[0]) if "n" in part else 0
            fig.add_hline(y=acc, line_dash="dash", line_color=SERIES_COLORS[i % len(SERIES_COLORS)],
                          annotation_text=esc(f"closed book ({name}): {acc:.0%}, n = {nb:,}"
                                              if split else
                                              f"closed book (no evidence in the prompt): "
                                              f"{acc:.0%}, n = {nb:,}"),
                          annotation_position="top right", annotation_font_size=11)
    return fig


def accuracy_by_slot(df: pd.DataFrame, split: str | None = None, title: str | None = None,
                     baseline: pd.DataFrame | None = None) -> go.Figure:
    """The slot U-curve: accuracy by the decisive chunk's 1-based slot, with 95% intervals."""
    if df.empty:
        return empty("No rows for these filters")
    fig = go.Figure()
    for i, (name, part) in enumerate(_groups(df, split)):
        part = part.sort_values("slot")
        fig.add_trace(go.Scatter(
            x=part["slot"].astype(int), y=part["accuracy"].astype(float), name=esc(name),
            mode="lines+markers", line=dict(color=SERIES_COLORS[i % len(SERIES_COLORS)], width=2),
            error_y=_error(part, "accuracy", "ci_low", "ci_high"),
            customdata=_custom(part, "ci_low", "ci_high", "n"),
            hovertemplate=_rate_hover(esc(name), "slot", "accuracy")))
    if baseline is not None and not baseline.empty:
        acc = float(baseline["accuracy"].iloc[0])
        fig.add_hline(y=acc, line_dash="dash", line_color="#777",
                      annotation_text=esc(f"closed book (no evidence in the prompt): "
                                          f"{acc:.0%}"),
                      annotation_position="bottom right", annotation_font_size=11)
    fig.update_layout(showlegend=split is not None)
    fig.update_xaxes(title="slot of the decisive chunk (1 = first in the prompt)", dtick=1)
    _pct_axis(fig, title="accuracy")
    return _layout(fig, title)


def rate_by_week(df: pd.DataFrame, value: str, title: str | None = None,
                 value_title: str | None = None, split: str | None = None, lo: str = "ci_low",
                 hi: str = "ci_high", n: str = "n") -> go.Figure:
    """A weekly rate as a line with its 95% interval as a shaded band."""
    if df.empty:
        return empty("No rows for these filters")
    fig = go.Figure()
    for i, (name, part) in enumerate(_groups(df, split)):
        part = part.sort_values("week")
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        weeks = pd.to_datetime(part["week"])
        if lo in part.columns and hi in part.columns:
            fig.add_trace(go.Scatter(
                x=list(weeks) + list(weeks[::-1]),
                y=list(part[hi].astype(float)) + list(part[lo].astype(float)[::-1]),
                fill="toself", fillcolor=_tint(color), line=dict(width=0), mode="lines",
                hoverinfo="skip",
                showlegend=False, name=esc(f"{name} interval")))
        fig.add_trace(go.Scatter(
            x=weeks, y=part[value].astype(float), name=esc(name), mode="lines+markers",
            line=dict(color=color, width=2), customdata=_custom(part, lo, hi, n),
            hovertemplate=_rate_hover(esc(name), "week of", esc(value_title or value))))
    fig.update_layout(showlegend=split is not None)
    _week_axis(fig, df)
    _pct_axis(fig, title=value_title or value)
    return _layout(fig, title)


def _week_axis(fig: go.Figure, df: pd.DataFrame) -> None:
    """Ticks on the Mondays that label ISO weeks (every week while there are few)."""
    weeks = pd.to_datetime(df["week"]).dropna() if "week" in df else pd.Series([], dtype=object)
    if weeks.empty:
        return
    step = max(1, -(-weeks.nunique() // 10))
    fig.update_xaxes(title="ISO week (Monday, UTC)", tickformat="%d %b %Y", tick0=weeks.min(),
                     dtick=7 * 24 * 3600 * 1000 * step)


def _tint(hex_color: str, alpha: float = 0.15) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def taxonomy_by_week(df: pd.DataFrame, title: str | None = None,
                     share: bool = False) -> go.Figure:
    """Requests per failure class, stacked by ISO week (``week``, ``class``, ``n``)."""
    if df.empty:
        return empty("No rows for these filters")
    frame = df.copy()
    frame["week"] = pd.to_datetime(frame["week"])
    totals = frame.groupby("week")["n"].transform("sum")
    frame["share"] = frame["n"] / totals
    fig = go.Figure()
    for cls in _class_order(frame["class"]):
        part = frame[frame["class"] == cls].sort_values("week")
        fig.add_trace(go.Bar(
            x=part["week"], y=part["share"] if share else part["n"], name=esc(cls),
            marker_color=TAXONOMY_COLORS.get(cls, "#bbb"), customdata=part[["n", "share"]].values,
            hovertemplate=f"{esc(cls)}<br>week of %{{x|%d %b %Y}}<br>%{{customdata[0]:,}} requests"
                          "<br>%{customdata[1]:.1%} of the week<extra></extra>"))
    fig.update_layout(barmode="stack")
    _week_axis(fig, frame)
    if share:
        _pct_axis(fig, title="share of requests")
    else:
        fig.update_yaxes(title="requests")
    return _layout(fig, title)


def _class_order(values: Iterable[Any]) -> list[str]:
    present = {str(v) for v in values if v is not None}
    return [c for c in TAXONOMY if c in present] + sorted(present - set(TAXONOMY))


def taxonomy_by_slice(df: pd.DataFrame, dim: str, title: str | None = None,
                      exclude: Sequence[str] = ("answered", "ungraded")) -> go.Figure:
    """Failure classes per slice as shares of its graded-wrong requests (horizontal stacks)."""
    frame = df[~df["class"].isin(exclude)] if not df.empty else df
    if frame.empty:
        return empty("No graded-wrong requests for these filters")
    frame = frame.copy()
    shown = labels.template if dim in ("template", "template_id") else \
        labels.model if dim == "model" else (lambda v: "(none)" if pd.isna(v) else str(v))
    frame[dim] = frame[dim].map(shown)
    totals = frame.groupby(dim)["n"].transform("sum")
    frame["share"] = frame["n"] / totals
    # each slice says how many wrong answers its shares are of
    frame[dim] = [f"{v} (n {int(t):,})" for v, t in zip(frame[dim], totals, strict=True)]
    fig = go.Figure()
    for cls in _class_order(frame["class"]):
        part = frame[frame["class"] == cls]
        fig.add_trace(go.Bar(
            y=[esc(v) for v in part[dim]], x=part["share"], orientation="h", name=esc(cls),
            marker_color=TAXONOMY_COLORS.get(cls, "#bbb"), customdata=part[["n"]].values,
            hovertemplate=f"{esc(cls)}<br>%{{y}}<br>%{{x:.1%}} of its failures"
                          "<br>%{customdata[0]:,} requests<extra></extra>"))
    fig.update_layout(barmode="stack")
    _pct_axis(fig, axis="x", title="share of graded-wrong requests")
    fig.update_yaxes(title=esc(dim), type="category")
    fig = _layout(fig, title, height=max(300, 150 + 34 * frame[dim].nunique()))
    fig.update_layout(legend=dict(y=-0.5, yanchor="top", x=0, xanchor="left"),
                      margin=dict(t=48 if title else 16))
    return fig


def slice_moves(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Week-over-week change per slice (frames.slice_moves rows of kind ``moved``, and
    ``new`` ones against all traffic the week before): coloured better or worse only when the
    change is called (z-test, p < 0.05), grey otherwise; each bar says the two values and
    both n."""
    frame = df[df["kind"].isin(("moved", "new")) & df["delta"].notna()] if "kind" in df else df
    if frame.empty:
        return empty("No slice has data in both of the last two weeks")
    frame = frame.loc[frame["delta"].abs().sort_values().index]  # biggest change on top
    called = frame["called"] if "called" in frame else pd.Series(True, index=frame.index)
    colors = ["#bbbbbb" if not c else ("#d62728" if d < 0 else "#2ca02c")
              for d, c in zip(frame["delta"], called, strict=True)]
    p_values = frame["p_value"] if "p_value" in frame else pd.Series(math.nan, index=frame.index)
    kinds = frame["kind"] if "kind" in frame else pd.Series("moved", index=frame.index)
    fig = go.Figure(go.Bar(
        y=[esc(s) for s in frame["slice"]], x=frame["delta"].astype(float), orientation="h",
        marker_color=colors,
        customdata=list(zip(frame["before"], frame["after"], frame["n"], frame["n_before"],
                            p_values.astype(float), strict=True)),
        text=[(f"new: {a:.0%} (n {na:,}) vs all {b:.0%} the week before (n {nb:,})"
               if k == "new" else f"{b:.0%} → {a:.0%} (n {nb:,} → {na:,})")
              + ("" if c else ", not called")
              for b, a, nb, na, c, k in zip(frame["before"], frame["after"], frame["n_before"],
                                            frame["n"], called, kinds, strict=True)],
        textposition="none",  # said under each slice's name instead: a bar's label can
        # run past the plot's edge, a tick label cannot (the margin grows to fit it)
        hovertemplate="%{y}<br>%{customdata[0]:.1%} → %{customdata[1]:.1%}"
                      "<br>change %{x:+.1%}, p = %{customdata[4]:.3f}"
                      "<br>n = %{customdata[3]:,} → %{customdata[2]:,}<extra></extra>"))
    fig.update_xaxes(tickformat="+.0%", title="change in accuracy, last week vs the week before",
                     zeroline=True, zerolinecolor="#888")
    ys = list(fig.data[0].y)
    fig.update_yaxes(type="category", automargin=True, tickvals=ys,
                     ticktext=[f"<b>{y}</b><br>{esc(t)}" for y, t in zip(
                         ys, fig.data[0].text, strict=True)])
    return _layout(fig, title, height=max(220, 70 + 44 * len(frame)))


# What surrounds the chunks: light and hatched, so no section reads as a (grey) chunk.
SECTION_STYLES = {"instructions": ("#ececec", "/"), "history": ("#ececec", "\\"),
                  "question": ("#d4d4d4", "x"), "format": ("#ececec", "."),
                  "unrecorded": ("#f6f6f6", "")}


def prompt_strip(chunks: pd.DataFrame, prompt_tokens: int | None, early_end: float,
                 late_start: float, title: str | None = None,
                 segments: pd.DataFrame | None = None) -> go.Figure:
    """One prompt drawn along its token axis: a block per placement, in prompt order.

    ``chunks`` has one row per placement: ``chunk_id``, ``prompt_index``, ``token_start``,
    ``token_end``, ``label``, ``decisive``, ``cited`` and optionally ``source_id``,
    ``retrieval_rank``, ``retrieval_score``, ``rerank_rank``, ``rerank_score``, ``authority``.
    Blocks are coloured by label, decisive chunks outlined in black, cited chunks marked with
    a triangle above the block; dashed lines mark the band boundaries. ``segments``
    (frames.prompt_segments) are the rest of the prompt, drawn as labelled grey blocks.
    """
    if chunks.empty:
        return empty("No chunk of this request reached the prompt", height=200)
    frame = chunks.sort_values("prompt_index").reset_index(drop=True)
    start = frame["token_start"].astype("Float64")
    end = frame["token_end"].astype("Float64")
    if start.isna().any() or end.isna().any():  # no offsets at all: equal widths, prompt order
        start = pd.Series(range(len(frame)), dtype="Float64") * 100
        end = start + 100
        total = float(end.max())
        axis_title = "prompt order (no token offsets recorded)"
    else:
        total = float(max(prompt_tokens or 0, end.max()))
        axis_title = "prompt tokens"
    frame["_start"], frame["_end"] = start.astype(float), end.astype(float)
    frame["_slot"] = range(1, len(frame) + 1)
    fig = go.Figure()
    fig.add_vrect(x0=early_end * total, x1=late_start * total, fillcolor=MIDDLE_TINT, line_width=0,
                  layer="below")
    if segments is not None and not segments.empty and axis_title == "prompt tokens":
        for kind, part in segments.groupby("kind", sort=False):
            wide = (part["tokens"] >= 0.06 * total).tolist()
            fig.add_trace(go.Bar(
                base=part["token_start"], x=part["tokens"], y=[0] * len(part), orientation="h",
                width=0.6, name=esc(part["name"].iloc[0]) if kind != "unrecorded"
                else "not a chunk (not recorded)",
                marker=dict(color=SECTION_STYLES.get(str(kind), ("#eee", ""))[0],
                            pattern=dict(shape=SECTION_STYLES.get(str(kind), ("", ""))[1],
                                         fgcolor="#9a9a9a", size=6, solidity=0.15),
                            line=dict(color="#bbb", width=1)),
                text=[esc(n) if w else "" for n, w in zip(part["name"], wide, strict=True)],
                textposition="inside", insidetextanchor="middle",
                textfont=dict(color="#333", size=11),
                hovertext=[f"{esc(r['name'])}<br>tokens {r['token_start']:,.0f}–"
                           f"{r['token_end']:,.0f} ({r['tokens']:,.0f} tokens)"
                           for r in part.to_dict("records")], hoverinfo="text"))
    chunk_labels = frame["label"].astype("string").fillna("(no label)")
    for label in [lab for lab in LABEL_COLORS if lab in set(chunk_labels)] + sorted(
            set(chunk_labels) - set(LABEL_COLORS)):
        part = frame[chunk_labels == label]
        decisive = part["decisive"].fillna(False).astype(bool)
        fig.add_trace(go.Bar(
            base=part["_start"], x=part["_end"] - part["_start"], y=[0] * len(part),
            orientation="h", width=0.6, name=esc(label),
            marker=dict(color=LABEL_COLORS.get(label, UNLABELED_COLOR),
                        line=dict(color=["#000" if d else "#fff" for d in decisive],
                                  width=[3.5 if d else 1 for d in decisive])),
            text=[f"{s}" for s in part["_slot"]], textposition="inside", insidetextanchor="middle",
            textfont=dict(color="white", size=12), customdata=part["prompt_index"],
            hovertext=[_chunk_hover(row) for row in part.to_dict("records")], hoverinfo="text"))
    cited = frame[frame["cited"].fillna(False).astype(bool)]
    if not cited.empty:
        fig.add_trace(go.Scatter(
            x=(cited["_start"] + cited["_end"]) / 2, y=[0.48] * len(cited), mode="markers",
            name="cited", marker=dict(symbol="triangle-down", size=13, color="#222"),
            hovertext=[f"cited: {esc(c)}" for c in cited["chunk_id"]], hoverinfo="text"))
    if frame["decisive"].fillna(False).astype(bool).any():
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="decisive (outlined)",
                                 marker=dict(symbol="square-open", size=14, color="#000",
                                             line=dict(width=3, color="#000"))))
    for x in (early_end * total, late_start * total):
        fig.add_vline(x=x, line_dash="dash", line_color="#888", line_width=1)
    for name, (a, b) in zip(BANDS, ((0, early_end), (early_end, late_start), (late_start, 1)),
                            strict=True):
        fig.add_annotation(x=(a + b) / 2 * total, y=0.75, text=name, showarrow=False,
                           font=dict(size=12, color="#b22" if name == "middle" else "#666"))
    fig.update_layout(barmode="overlay", bargap=0)
    fig.update_xaxes(range=[0, total], title=axis_title, showgrid=False)
    fig.update_yaxes(visible=False, range=[-0.45, 0.9])
    fig = _layout(fig, title, height=280)
    fig.update_layout(legend=dict(y=-0.42, yanchor="top", x=0, xanchor="left"),
                      margin=dict(b=40))
    return fig


def _chunk_hover(row: dict[str, Any]) -> str:
    def num(v: Any, fmt: str = "{:.3f}") -> str:
        return "—" if v is None or pd.isna(v) else fmt.format(v)

    lines = [
        f"<b>slot {row['_slot']}</b> · {esc(row.get('chunk_id'))}",
        f"label: {esc(row.get('label'))}" + (" · <b>decisive</b>" if row.get("decisive") else "")
        + (" · cited" if row.get("cited") else ""),
        f"source: {esc(row.get('source_id'))} · authority: {esc(row.get('authority'))}",
        f"retrieval rank {num(row.get('retrieval_rank'), '{:.0f}')} "
        f"(score {num(row.get('retrieval_score'))}) · rerank rank "
        f"{num(row.get('rerank_rank'), '{:.0f}')} (score {num(row.get('rerank_score'))})",
        f"tokens {num(row.get('token_start'), '{:.0f}')}–{num(row.get('token_end'), '{:.0f}')}",
    ]
    return "<br>".join(lines)


def band_heatmap(df: pd.DataFrame, row: str, col: str, value: str = "n",
                 title: str | None = None, row_title: str | None = None,
                 col_title: str | None = None) -> go.Figure:
    """Counts in a band × band grid (e.g. where the decisive chunk sat × where citations sat)."""
    if df.empty:
        return empty("No rows for these filters")
    grid = df.pivot_table(index=row, columns=col, values=value, aggfunc="sum", fill_value=0)
    rows = [b for b in (*BANDS, "absent", "none") if b in grid.index] + sorted(
        set(map(str, grid.index)) - {*BANDS, "absent", "none"})
    cols = [b for b in (*BANDS, "absent", "none") if b in grid.columns] + sorted(
        set(map(str, grid.columns)) - {*BANDS, "absent", "none"})
    grid = grid.reindex(index=rows, columns=cols, fill_value=0)
    fig = go.Figure(go.Heatmap(
        z=grid.values, x=[esc(c) for c in cols], y=[esc(r) for r in rows], colorscale="Blues",
        text=grid.values, texttemplate="%{text:,}", showscale=False,
        hovertemplate=f"{esc(row_title or row)}: %{{y}}<br>{esc(col_title or col)}: %{{x}}"
                      "<br>%{z:,} requests<extra></extra>"))
    fig.update_xaxes(title=esc(col_title or col), type="category", side="bottom")
    fig.update_yaxes(title=esc(row_title or row), type="category", autorange="reversed")
    return _layout(fig, title, height=320)


def count_bars(df: pd.DataFrame, category: str, value: str = "n", color: str | None = None,
               title: str | None = None, value_title: str = "requests",
               top: int = 15) -> go.Figure:
    """Horizontal bars of a count per category, biggest first, optionally coloured by a column."""
    if df.empty:
        return empty("No rows for these filters")
    frame = df.sort_values(value, ascending=False).head(top).iloc[::-1]
    fig = go.Figure()
    groups = _groups(frame, color) if color else [("all", frame)]
    for i, (name, part) in enumerate(groups):
        fig.add_trace(go.Bar(
            y=[esc(v) for v in part[category]], x=part[value], orientation="h", name=esc(name),
            marker_color=AUTHORITY_COLORS.get(name, SERIES_COLORS[i % len(SERIES_COLORS)])
            if color == "authority" else SERIES_COLORS[i % len(SERIES_COLORS)],
            hovertemplate=f"%{{y}}<br>{esc(name)}<br>%{{x:,}} {esc(value_title)}<extra></extra>"))
    fig.update_layout(barmode="stack", showlegend=color is not None)
    fig.update_xaxes(title=value_title)
    fig.update_yaxes(type="category", title=esc(category))
    return _layout(fig, title, height=max(220, 60 + 28 * len(frame)))


def layout_difference(df: pd.DataFrame, a: str, b: str, x: str = "condition",
                      title: str | None = None) -> go.Figure:
    """Accuracy of layout B minus layout A per placement (``x``, ``difference``, counts)."""
    if df.empty:
        return empty("The two layouts share no placement")
    diff = df["difference"].astype(float)
    fig = go.Figure(go.Bar(
        x=[esc(v) for v in df[x]], y=diff,
        marker_color=["#bbbbbb" if pd.isna(d) else ("#2ca02c" if d >= 0 else "#d62728")
                      for d in diff],
        text=[f"{d:+.0%}" if pd.notna(d) else "" for d in diff], textposition="outside",
        customdata=df[["accuracy_a", "accuracy_b", "n_a", "n_b"]].values,
        hovertemplate=f"%{{x}}<br>{esc(a)}: %{{customdata[0]:.1%}} (n=%{{customdata[2]}})"
                      f"<br>{esc(b)}: %{{customdata[1]:.1%}} (n=%{{customdata[3]}})"
                      "<br>difference %{y:+.1%}<extra></extra>"))
    fig.update_yaxes(tickformat="+.0%", title=esc(f"{b} − {a}"), zeroline=True,
                     zerolinecolor="#888", range=[-1.1, 1.1])
    fig.update_xaxes(type="category", title=esc(x))
    return _layout(fig, title, height=320)


def citation_drift(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Citation alignment by week (with its interval) beside the non-canonical citation share."""
    fig = rate_by_week(df, "alignment", title=title, value_title="share", n="evidence_in_prompt")
    if df.empty:
        return fig
    fig.data[-1].name = "citation alignment"
    fig.data[-1].hovertemplate = fig.data[-1].hovertemplate.replace("all<br>", "alignment<br>")
    part = df.sort_values("week")
    fig.add_trace(go.Scatter(
        x=pd.to_datetime(part["week"]), y=part["noncanonical_share"].astype(float),
        name="citing a non-canonical source", mode="lines+markers",
        line=dict(color="#d62728", width=2, dash="dot"), customdata=part[["citing"]].values,
        hovertemplate="citing a non-canonical source<br>week of %{x|%d %b %Y}<br>%{y:.1%} of "
                      "%{customdata[0]:,} citing answers<extra></extra>"))
    fig.update_layout(showlegend=True)
    return fig


RANK_AXIS = "retrieval rank of the decisive chunk (1 = ranked first, before packing)"
BAND_TINTS = {"early": "#d9ead3", "middle": "#f4c7c3", "late": "#cfe2f3"}


def rank_accuracy(ranks: pd.DataFrame, weights: pd.DataFrame | None = None,
                  title: str | None = None) -> go.Figure:
    """Sweep accuracy by the decisive chunk's retrieval rank, one line per strategy with 95%
    intervals (sweep_ranks); grey bars behind: the share of production requests whose
    decisive chunk sat at each rank (decisive_ranks), the weights of the weighted average."""
    if ranks.empty:
        return empty("No single-piece request with a ranked decisive chunk")
    fig = go.Figure()
    tested = sorted({int(r) for r in ranks["retrieval_rank"]})
    if weights is not None and not weights.empty:
        shown = weights[weights["retrieval_rank"].isin(tested)]
        fig.add_trace(go.Bar(
            x=shown["retrieval_rank"].astype(int), y=shown["share"].astype(float), yaxis="y2",
            name="production requests at this rank", marker_color="rgba(120, 120, 120, 0.22)",
            customdata=shown[["requests"]].values,
            hovertemplate="rank %{x}<br>%{y:.1%} of production requests "
                          "(%{customdata[0]:,})<extra></extra>"))
    for i, (name, part) in enumerate(_groups(ranks, "strategy")):
        part = part.sort_values("retrieval_rank")
        fig.add_trace(go.Scatter(
            x=part["retrieval_rank"].astype(int), y=part["accuracy"].astype(float),
            name=esc(name), mode="lines+markers",
            line=dict(color=SERIES_COLORS[i % len(SERIES_COLORS)], width=2),
            error_y=_error(part, "accuracy", "ci_low", "ci_high"),
            customdata=_custom(part, "ci_low", "ci_high", "n"),
            hovertemplate=_rate_hover(esc(name), "rank", "accuracy")))
    fig.update_xaxes(title=RANK_AXIS, dtick=1)
    _pct_axis(fig, title="accuracy")
    fig = _layout(fig, title, height=420)
    if weights is not None and not weights.empty:  # after the shared axis styling
        fig.update_layout(yaxis2=dict(overlaying="y", side="right", tickformat=".0%",
                                      title=dict(text="share of production requests"),
                                      showgrid=False, rangemode="tozero", showline=False))
    return fig


def rank_landing(ranks: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Where each strategy put each retrieval rank in the prompt (sweep_ranks): a grid of
    strategy × rank, each cell its slot, coloured by band (middle in red)."""
    if ranks.empty:
        return empty("No single-piece request with a ranked decisive chunk")
    frame = ranks.assign(strategy=ranks["strategy"].astype("string").fillna("(none)"))
    names = sorted(frame["strategy"].unique())
    tested = sorted({int(r) for r in frame["retrieval_rank"]})
    level = {"early": 0, "middle": 1, "late": 2}
    z, text, hover = [], [], []
    for name in names:
        row = frame[frame["strategy"] == name].set_index("retrieval_rank")
        z.append([level.get(row.at[r, "band"], None) if r in row.index else None
                  for r in tested])
        text.append([f"slot {_slot(row.at[r, 'slot'])}" if r in row.index else ""
                     for r in tested])
        hover.append([f"{esc(name)}<br>retrieval rank {r} → prompt slot "
                      f"{', '.join(_slot(s) for s in row.at[r, 'slots'])}"
                      f"<br>band {esc(row.at[r, 'band'])}"
                      f"<br>{row.at[r, 'middle_share']:.0%} of requests in the middle band"
                      if r in row.index else "" for r in tested])
    scale = [[0, BAND_TINTS["early"]], [0.5, BAND_TINTS["middle"]], [1, BAND_TINTS["late"]]]
    fig = go.Figure(go.Heatmap(
        z=z, x=tested, y=[esc(n) for n in names], zmin=0, zmax=2, colorscale=scale,
        showscale=False, text=text, texttemplate="%{text}", hovertext=hover,
        hoverinfo="text", xgap=2, ygap=2))
    for band, color in BAND_TINTS.items():  # a legend for the colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"{band} band",
                                 marker=dict(symbol="square", size=12, color=color)))
    fig.update_xaxes(title=RANK_AXIS, dtick=1, showgrid=False)
    fig.update_yaxes(title="packing strategy", type="category", showgrid=False,
                     autorange="reversed")
    return _layout(fig, title, height=max(220, 130 + 44 * len(names)))


def _slot(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else str(int(value))
