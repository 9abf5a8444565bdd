"""Experiments: placement sweeps per packing strategy, side by side; two layouts compared."""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import data, figures, filters, frames, ui

params = dict(filters.current())
st.title("Experiments")
st.caption(filters.traffic_note("experiment"))
st.caption("Placement sweeps: the same cases asked with the decisive chunk moved through the "
           "prompt, under each packing strategy. Accuracy per placement with Wilson 95% "
           "intervals; 'absent' is the closed-book baseline.")

params.pop("strategy", None)  # the page compares strategies: the sidebar's one does not apply
if not (st.session_state.get("_facets") or {}).get("experiment"):
    st.info("No experiment in this database yet. Record sweeps with an experiment id, a "
            "placement condition and a case id per request (`midtrace sweep`), then come back.")
    st.stop()
# The experiments with requests in the selected range, the biggest first.
in_range = ui.query(data.view, "sweep_summary", data.params_key(params), ())
experiments = list(in_range.groupby("experiment")["requests"].sum()
                   .sort_values(ascending=False).index) if not in_range.empty else []
if not experiments:
    ui.no_rows("experiment requests")
    st.stop()
experiment = st.selectbox("Experiment", experiments, key="experiment", bind="query-params",
                          help="Experiments with requests in the selected range, most requests "
                               "first.")
params["experiment"] = experiment
key = data.params_key(params)

conditions = ui.query(data.view, "sweep_conditions", key, ())
summary = ui.query(data.view, "sweep_summary", key, ())
if conditions.empty:
    ui.no_rows(f"requests in experiment {experiment}")
    st.stop()

strategies = sorted(conditions["strategy"].dropna().astype(str).unique())
cols = st.columns(max(1, min(4, len(summary))))
for col, row in zip(cols * (len(summary) // len(cols) + 1), summary.to_dict("records")):
    with col.container(border=True):
        st.text(f"strategy: {row.get('strategy') or '(none)'}")
        st.metric("Accuracy", ui.fmt_rate(row.get("accuracy")),
                  help="Graded requests across placements, 'absent' excluded.")
        st.metric("Position sensitivity Δ", ui.fmt_rate(row.get("sensitivity_delta")),
                  help="Best minus worst placement accuracy.", delta_color="inverse")
        st.caption(f"buried-evidence failure rate {ui.fmt_rate(row.get('buried_failure_rate'))} "
                   f"({row.get('buried_failure_cases', 0)}/{row.get('buried_eligible_cases', 0)} "
                   f"cases) · answer consistency {ui.fmt_rate(row.get('answer_consistency'))} · "
                   f"closed-book {ui.fmt_rate(row.get('absent_accuracy'))}")

order = frames.condition_order(conditions["condition"])
ui.chart(figures.rate_bars(conditions, "condition", split="strategy", order=order,
                           title="Accuracy by placement, per packing strategy"),
         conditions, f"sweep_conditions_{experiment}", key="conditions")

st.subheader("Two layouts compared")
if len(strategies) < 2:
    st.caption("This experiment has one packing strategy; record a second to compare layouts.")
else:
    left, right = st.columns(2)
    a = left.selectbox("Layout A", strategies, index=0, key="layout_a", bind="query-params")
    b = right.selectbox("Layout B", strategies, index=1, key="layout_b", bind="query-params")
    if a != b:
        diff = frames.layout_difference(conditions, a, b, order)
        ui.chart(figures.layout_difference(diff, a, b, title=f"{b} minus {a}, by placement"),
                 diff, f"difference_{a}_{b}", key="compare",
                 caption="Green: B more accurate at that placement. A layout that only wins in "
                         "the middle is fixing positional bias.")
    else:
        st.caption("Pick two different layouts.")

with st.expander("Summary numbers"):
    ui.table(summary, f"sweep_summary_{experiment}", key="summary")
