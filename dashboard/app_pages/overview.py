"""Overview: the weekly review. Headline figures week over week, taxonomy by week, movers,
and what the answers cost."""

from __future__ import annotations

import streamlit as st

from midtrace import findings
from midtrace.dashboard import cost_figures, data, figures, filters, frames, ui
from midtrace.report_cells import calibration_sentence

# The weekly review is about production traffic, the default (the Traffic filter).
params = data.params_key(filters.current())
min_n = int(data.settings()["min_n"])  # the views' own threshold, not a copy of it

st.title("Weekly review")
st.caption(filters.traffic_note())
st.caption("The newest week in the selected range against the week before. A change is called "
           f"out only when both weeks have at least {min_n} graded requests; shaded "
           "bands and ranges are Wilson 95% intervals.")

weekly = ui.query(data.view, "weekly_overview", params, ("week",))
if weekly.empty or int(weekly["requests"].sum()) == 0:
    ui.no_rows()
    st.stop()

# The findings the weekly report opens with (midtrace/findings.py). Slice names are data (an
# app's template ids): each sentence is shown as text, never as Markdown or HTML.
review = findings.collect(lambda view, group_by: ui.query(data.view, view, params, group_by),
                          min_n)
with st.container(border=True, key="findings"):
    st.subheader("Findings")
    for i, finding in enumerate(review.findings, start=1):
        st.text(f"{i}. {finding.text}")
    if not review.findings:
        st.text(review.summary)

buried = ui.query(data.view, "buried_rate", params, ("week",))
alignment = ui.query(data.view, "citation_alignment", params, ("week",))
recall = frames.weekly_recall(ui.query(data.view, "constraint_recall", params, ("week",)))

cols = st.columns(4)
for col, (label, frame, value, n, better, help_text) in zip(cols, (
    ("Accuracy", weekly, "accuracy", "graded", True, "Graded requests answered correctly."),
    ("Buried rate", buried, "buried_rate", "wrong", False,
     "Graded-wrong requests whose decisive evidence sat only in the middle band of the prompt."),
    ("Citation alignment", alignment, "alignment", "evidence_in_prompt", True,
     "Requests with decisive evidence in the prompt whose answer cited a decisive chunk."),
    ("Constraint recall", recall, "recall", "required", True,
     "Required qualifiers (exceptions, limits) that the answer kept."),
), strict=True):
    current, previous = frames.last_two_weeks(frame, value)
    ui.headline(col, label, current, previous, value, n, min_n, better, help_text)

# how far to trust the judge's grades: where a person graded too (docs/grading.md)
calibration = ui.query(data.view, "judge_agreement", params)
if not calibration.empty and int(calibration["n"].iloc[0] or 0) > 0:
    sentence = calibration_sentence(
        [{k: (None if v != v else v) for k, v in row.items()}  # NaN as None
         for row in calibration.to_dict("records")])
    st.info(sentence + " Judged accuracy is as trustworthy as this agreement.",
            icon=":material/balance:")

week = frames.newest_week(weekly)
st.caption(f"Newest week: {week:%d %b %Y} (ISO week {week.isocalendar().week})." if week else "")

left, right = st.columns(2)
with left:
    ui.chart(figures.rate_by_week(weekly, "accuracy", title="Accuracy by week",
                                  n="graded"), weekly, "weekly_overview")
with right:
    tax = ui.query(data.view, "taxonomy_by_week", params, ("week",))
    # drawn before its toggle: on a followed link the URL says it first
    share = st.session_state.get("tax_share", st.query_params.get("tax_share") in ("true", "True", "1"))
    ui.chart(figures.taxonomy_by_week(tax, title="Failure taxonomy by week", share=share), tax,
             "taxonomy_by_week")
    st.toggle("Show shares of each week", key="tax_share", bind="query-params")

left, right = st.columns(2)
with left:
    ui.chart(figures.rate_by_week(buried, "buried_rate", title="Buried rate by week",
                                  value_title="buried rate", n="wrong"), buried,
             "buried_rate_by_week")
with right:
    ui.chart(figures.rate_by_week(alignment, "alignment", title="Citation alignment by week",
                                  value_title="citation alignment", n="evidence_in_prompt"),
             alignment, "citation_alignment_by_week")

st.subheader("Slices that moved most")
st.caption("Accuracy in the newest week against the week before, per model, template, packing "
           "strategy and context length, the biggest changes first. Red or green: the change "
           "is unlikely to be noise (two-proportion z-test, p < 0.05, and both weeks have at "
           f"least {min_n} graded requests); grey: it may be. Each bar gives both weeks' "
           "accuracy and graded n; a slice new this week is set against all traffic the week "
           "before.")
parts = []
for dim in ("model", "template", "strategy", "context_bucket"):
    parts.append((dim, ui.query(data.view, "weekly_overview", params, (dim, "week"))))
moves = frames.slice_moves(parts, min_n)
arrivals = frames.arrivals(moves)
if arrivals:  # slice names are data (an app's template ids): shown as text, never Markdown
    st.text("New or gone this week:\n" + "\n".join(f"  {line}" for line in arrivals))
# moved slices and new ones (against all traffic the week before), the biggest changes first
charted = moves[moves["kind"].isin(("moved", "new"))] if not moves.empty else moves
if not charted.empty:
    charted = charted.loc[charted["delta"].abs().sort_values(ascending=False).index]
ui.chart(figures.slice_moves(charted.head(12)), moves, "slice_moves")

# What the answers cost (docs/metrics.md, "Cost"): the app's own figure when it sent one,
# else tokens priced by the price table the store was opened with.
st.subheader("Cost")
summary = ui.query(data.view, "cost_summary", params)
total = summary.to_dict("records")[0] if not summary.empty else {}
st.caption(frames.cost_note(total) + " Cost per correct answer: what the graded requests "
           "with a cost cost, over the correct answers among them.")
cols = st.columns(4)
cols[0].metric("Cost", frames.dollars(total.get("cost_usd")),
               help="What the priced requests in the range cost, in US dollars.")
cols[1].metric("Cost per correct answer", frames.dollars(total.get("cost_per_correct")),
               help="The graded requests' cost over their correct answers; none when no "
                    "priced answer was graded correct.")
cols[2].metric("Prompt tokens", frames.token_count(total.get("prompt_tokens")),
               help=f"{int(total.get('prompt_tokens') or 0):,} tokens in, summed (unknown "
                    "counts as none).")
cols[3].metric("Output tokens", frames.token_count(total.get("output_tokens")),
               help=f"{int(total.get('output_tokens') or 0):,} tokens out, summed (unknown "
                    "counts as none).")
left, right = st.columns(2)
with left:
    cost_weeks = ui.query(data.view, "cost_by_week", params, ("week",))
    ui.chart(cost_figures.cost_by_week(cost_weeks, title="Cost by week"), cost_weeks,
             "cost_by_week")
with right:
    cost_slices = ui.query(data.view, "cost_summary", params, ("template", "strategy"))
    ui.chart(cost_figures.cost_by_slice(cost_slices,
                                        title="Cost per correct answer by template and strategy"),
             cost_slices, "cost_by_template_strategy")
# per week, template and strategy: a table (drawn on a canvas: template names are data)
detail = ui.query(data.view, "cost_by_week", params, ("template", "strategy"))
if not detail.empty:
    detail = detail[detail["requests"] > 0]
    # `correct` here counts answers: not the per-request verdict the tables say right/wrong for
    ui.table(detail[["week", "template", "strategy", "requests", "priced", "prompt_tokens",
                     "output_tokens", "cost_usd", "correct", "cost_per_correct"]]
             .rename(columns={"correct": "correct answers"}),
             "cost_by_week_template_strategy", csv=detail)
