"""Pieces every page uses: a chart with its CSV, the empty state, headline figures, the gate.

Only our own fixed text is ever passed to Markdown here; text from traces goes through
st.text, st.code or st.dataframe (see the pages).
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from midtrace import spreadsheet
from midtrace.dashboard import data, filters, frames, labels

PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def chart(fig: go.Figure, frame: pd.DataFrame, name: str, key: str | None = None,
          caption: str | None = None, **kw: Any) -> Any:
    """Draw ``fig`` and offer the frame it was drawn from as a CSV download."""
    key = key or name
    event = st.plotly_chart(fig, key=f"chart_{key}", config=PLOTLY_CONFIG, width="stretch", **kw)
    left, right = st.columns([4, 1], vertical_alignment="center")
    if caption:
        left.caption(caption)
    right.download_button("⬇ CSV", spreadsheet.to_csv(frame).encode(), file_name=f"{name}.csv",
                          mime="text/csv", key=f"csv_{key}", help=f"Download the data behind "
                          f"this chart ({len(frame):,} rows)", width="content")
    return event


def table(frame: pd.DataFrame, name: str, key: str | None = None,
          csv: pd.DataFrame | None = None, **kw: Any) -> Any:
    """A data frame (drawn on a canvas, never as HTML) with its CSV download: human column
    names, percentages, right/wrong/not graded (dashboard/labels.py); the CSV keeps the raw
    columns and values (``csv``: the frame to download when the one shown is condensed)."""
    key = key or name
    kw["column_config"] = labels.column_config(frame, kw.get("column_config"))
    with st.container(key=f"table_{key}"):  # the key names it in the page (tests, links)
        event = st.dataframe(labels.readable(frame), key=f"df_{key}", hide_index=True,
                             width="stretch", **kw)
        frame = frame if csv is None else csv  # the download keeps the raw columns
        st.download_button("⬇ CSV", spreadsheet.to_csv(frame).encode(),
                           file_name=f"{name}.csv", mime="text/csv", key=f"csv_{key}")
    return event


def query(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Run one data call (its spinner shows while an uncached answer is computed,
    dashboard/data.py); on failure say what went wrong and stop the page."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # the source is outside our control: say so, keep the app up
        st.error(f"The query failed: {type(e).__name__}")
        st.text(str(e))
        st.stop()


def empty_state() -> None:
    s = data.source()
    target = s["url"] or "http://127.0.0.1:4318"
    st.title("No traces yet")
    if s["db"]:
        st.write(f"`{s['db']}` holds no requests in its time range.")
    st.markdown(
        "midtrace draws a request once its trace has reached the collector. To send traces:\n\n"
        f"1. Run a collector: `midtrace collector --db traces.duckdb` (or `midtrace serve`).\n"
        f"2. Point your app's OTLP exporter at it:\n\n"
        f"   ```bash\n   export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={target}/v1/traces\n   ```\n"
        "3. Record each answered question on its LLM span with `midtrace.schemas.encode.record_request` "
        "(midtrace conventions), or keep your OpenInference / OTel GenAI instrumentation: the "
        "collector reads those too.\n"
        "4. Grades can follow later: `POST /v1/outcomes`.\n\n"
        "Reload this page once traces have arrived.")


def no_rows(what: str = "requests") -> None:
    """Say why a page is empty: often the requests are there but in the other traffic."""
    params = filters.current()
    traffic = params.get("traffic", "production")
    other = {"production": "experiment", "experiment": "production"}.get(traffic)
    elsewhere = 0
    if other is not None:
        _, elsewhere = query(data.requests_page, data.params_key({**params, "traffic": other}),
                             limit=1)
    if elsewhere:
        st.info(f"No {what} match these filters in {traffic} traffic, but {elsewhere:,} "
                f"{other} requests do: switch Traffic to {other} (or all) in the sidebar.")
    else:
        st.info(f"No {what} match these filters. Widen the time range or clear a filter in the "
                "sidebar.")


def fmt_rate(value: Any) -> str:
    return "—" if value is None or _nan(value) else f"{float(value):.1%}"


def fmt_number(value: Any) -> str:
    """A score in [0, 1] that is not a share (MRR, NDCG): three decimals."""
    return "—" if value is None or _nan(value) else f"{float(value):.3f}"


def _nan(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def headline(container: Any, label: str, current: dict[str, Any] | None,
             previous: dict[str, Any] | None, value: str, n: str, min_n: int,
             higher_is_better: bool = True, help: str | None = None) -> None:
    """One weekly figure with its interval and, when both weeks have enough n, its change."""
    if current is None or _nan(current.get(value)):
        container.metric(label, "—", help=help)
        container.caption("no data this week")
        return
    cur = float(current[value])
    n_cur = int(current.get(n) or 0)
    delta = None
    note = ""
    called = False
    if previous is not None and not _nan(previous.get(value)):
        prev = float(previous[value])
        n_prev = int(previous.get(n) or 0)
        if n_cur >= min_n and n_prev >= min_n:
            delta = f"{(cur - prev) * 100:+.1f} pts vs last week"
            called, p = frames.change_called(prev, n_prev, cur, n_cur, min_n)
            if not called and p is not None:
                note = f" · change may be noise (p = {p:.2f})"
        else:
            note = f" · change not called (n < {min_n})"
    lo, hi = current.get("ci_low"), current.get("ci_high")
    interval = f"95% {fmt_rate(lo)}–{fmt_rate(hi)}" if not (_nan(lo) or _nan(hi)) else ""
    container.metric(label, fmt_rate(cur), delta=delta,
                     delta_color=("off" if not called else
                                  "normal" if higher_is_better else "inverse"), help=help,
                     border=True)
    container.caption(f"{interval} · n = {n_cur:,}{note}".strip(" ·"))


def token_gate() -> bool:
    """Ask for the dashboard token once per session; True when the visitor may proceed."""
    if st.session_state.get("_authed"):
        return True
    expected = data.source()["token"] or ""
    st.title("midtrace")
    with st.form("token_gate"):
        given = st.text_input("Token", type="password",
                              help="This dashboard is reachable beyond this machine; ask its owner "
                                   "for the token (MIDTRACE_TOKEN).")
        submitted = st.form_submit_button("Open")
    if submitted:
        if expected and hmac.compare_digest(given.encode(), expected.encode()):
            st.session_state["_authed"] = True
            st.rerun()
        st.error("That token is not right.")
    return False


def finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v
