"""Experiments: which layout should we ship? Each packing strategy of a sweep against the one
production uses, with intervals, a verdict and what would decide it; accuracy by the decisive
chunk's retrieval rank and where each strategy put that rank in the prompt."""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import compare, data, figures, filters, frames, ui

params = dict(filters.current())
st.title("Experiments")
st.caption(filters.traffic_note("experiment"))
st.caption("Which layout should we ship? A placement sweep asks the same cases with the "
           "decisive chunk moved through the retrieval ranks, under each packing strategy. "
           "Every accuracy carries its Wilson 95% interval; each strategy is compared with "
           "the one production uses now, paired case by case.")

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
# Production in the same range and slice (a sweep records under a service of its own, so the
# service filter is left out): which strategy it uses, and where its decisive chunks rank.
production = {k: v for k, v in params.items() if k not in ("service", "traffic", "experiment")}
production_key = data.params_key(production)
params["experiment"] = experiment
key = data.params_key(params)

conditions = ui.query(data.view, "sweep_conditions", key, ())
summary = ui.query(data.view, "sweep_summary", key, ())
if conditions.empty:
    ui.no_rows(f"requests in experiment {experiment}")
    st.stop()
pairs = ui.query(data.view, "sweep_pairs", key, ())
ranks = ui.query(data.view, "sweep_ranks", key, ())
used = ui.query(data.view, "overview", production_key, ("strategy",))
weights = ui.query(data.view, "decisive_ranks", production_key, ())

strategies = sorted(summary["strategy"].dropna().astype(str).unique())
reference, why = compare.baseline(used, strategies)
averages = compare.rank_averages(ranks, weights).set_index("strategy")
versus = compare.against(summary, pairs, reference or "")
verdicts = versus.set_index("strategy") if not versus.empty else versus

st.subheader("Which layout should we ship?")
st.text(why)
order = [reference] + [s for s in strategies if s != reference] if reference else strategies
by_name = {str(r.get("strategy")): r for r in summary.to_dict("records")}
cols = st.columns(max(1, min(4, len(order))))
for i, name in enumerate(order):
    row = by_name.get(name, {})
    with cols[i % len(cols)].container(border=True):
        st.text(f"{name} · baseline" if name == reference else name)
        lo, hi = ui.finite(row.get("ci_low")), ui.finite(row.get("ci_high"))
        st.metric("Accuracy", ui.fmt_rate(row.get("accuracy")),
                  help="Graded requests across placements, 'absent' excluded.")
        st.caption(f"95% {ui.fmt_rate(lo)}–{ui.fmt_rate(hi)} · n = {int(row.get('n') or 0):,}")
        if name in verdicts.index:
            v = verdicts.loc[name]
            st.metric("Against the baseline", compare.points(v["difference"]),
                      delta=v["verdict"], delta_color=("off" if v["verdict"] == compare.UNDECIDED
                                                       else "normal"),
                      delta_arrow=("off" if v["verdict"] == compare.UNDECIDED else "auto"),
                      help="This strategy's accuracy minus the baseline's, paired by case "
                           "when both ran the same cases; the verdict is McNemar's test "
                           "(paired) or the two-proportion z-test, p < 0.05.")
            st.caption(f"95% {compare.points(v['ci_low'])} to {compare.points(v['ci_high'])} "
                       f"· p = {v['p_value']:.3f}")
        if name in averages.index:
            a = averages.loc[name]
            st.caption(f"Production-weighted {ui.fmt_rate(a['weighted'])} "
                       f"(95% {ui.fmt_rate(a['weighted_low'])}–{ui.fmt_rate(a['weighted_high'])})"
                       f" · uniform over ranks {ui.fmt_rate(a['uniform'])} "
                       f"(95% {ui.fmt_rate(a['uniform_low'])}–{ui.fmt_rate(a['uniform_high'])})")
        st.caption(f"sensitivity Δ {ui.fmt_rate(row.get('sensitivity_delta'))} · "
                   f"buried-evidence failures {ui.fmt_rate(row.get('buried_failure_rate'))} "
                   f"({row.get('buried_failure_cases', 0)}/{row.get('buried_eligible_cases', 0)} "
                   f"cases) · answer consistency {ui.fmt_rate(row.get('answer_consistency'))} · "
                   f"closed-book {ui.fmt_rate(row.get('absent_accuracy'))}")

if len(strategies) < 2:
    st.caption("This experiment has one packing strategy; record a second to compare layouts.")
else:
    st.markdown("**The verdict**")
    default_b = compare.best_other(summary, reference) if reference else strategies[1]
    left, right = st.columns(2)
    a = left.selectbox("Baseline (A)", strategies, index=strategies.index(reference)
                       if reference in strategies else 0, key="layout_a", bind="query-params",
                       help="Production's strategy unless you pick another.")
    b = right.selectbox("Candidate (B)", strategies,
                        index=strategies.index(default_b) if default_b in strategies else 1,
                        key="layout_b", bind="query-params",
                        help="The most accurate other strategy unless you pick another.")
    if a == b:
        st.caption("Pick two different layouts.")
    else:
        chosen = compare.compare(summary, pairs, b, a)
        with st.container(key="verdict"):
            if chosen is None:
                st.text(f"{b} against {a}: no graded requests to compare.")
            else:
                st.text(compare.sentence(chosen))
                if chosen.unpaired:
                    st.caption(f"{chosen.unpaired:,} graded requests had no counterpart under "
                               "the other strategy and are not in the paired comparison.")
        diff = frames.layout_difference(conditions, a, b, frames.condition_order(
            conditions["condition"]))
        ui.chart(figures.layout_difference(diff, a, b, title=f"{b} minus {a}, by placement"),
                 diff, f"difference_{a}_{b}", key="compare",
                 caption="Green: B more accurate at that placement. A layout that only wins in "
                         "the middle is fixing positional bias.")
    if not versus.empty:
        st.text(f"Every strategy (B) against the baseline {reference} (A):")
        ui.table(compare.table(versus), f"against_baseline_{experiment}", key="against")

st.subheader("By the decisive chunk's retrieval rank")
st.caption("Single-piece cases: accuracy by the rank retrieval gave the decisive chunk, before "
           "packing reordered it. Grey bars: how often production's decisive chunk sits at "
           "each rank in this range. The uniform average over ranks is the same in expectation "
           "for any reordering of the same prompts; the production-weighted one is what "
           "production traffic would see.")
ui.chart(figures.rank_accuracy(ranks, weights, title="Accuracy by retrieval rank of the "
                                                     "decisive chunk, per packing strategy"),
         ranks, f"sweep_ranks_{experiment}", key="ranks")
if not averages.empty:
    ui.table(compare.averages_table(averages.reset_index()), f"rank_averages_{experiment}",
             key="averages")
    if weights.empty:
        st.caption("No production request in this range has a retrieved decisive chunk: the "
                   "production-weighted average is not known.")
edges = data.settings()  # the band edges the views used, so the caption matches the colours
ui.chart(figures.rank_landing(ranks, title="Where each retrieval rank landed in the prompt"),
         ranks, f"rank_landing_{experiment}", key="landing",
         caption=f"Each cell: the prompt slot a strategy put that retrieval rank in (the most "
                 f"common one), coloured by the band of the chunk's token midpoint: early before "
                 f"{edges['band_early_end']:.0%} of the prompt, late from "
                 f"{edges['band_late_start']:.0%}, middle between.")

st.subheader("By placement condition")
ui.chart(figures.rate_bars(conditions, "condition", split="strategy",
                           order=frames.condition_order(conditions["condition"]),
                           title="Accuracy by placement condition, per packing strategy"),
         conditions, f"sweep_conditions_{experiment}", key="conditions",
         caption="'absent' is the closed-book baseline: the distractors without the evidence.")

with st.expander("Summary numbers"):
    ui.table(summary, f"sweep_summary_{experiment}", key="summary")
