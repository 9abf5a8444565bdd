"""Position: accuracy by the decisive chunk's band and slot, with intervals, sliced."""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import data, figures, filters, frames, ui

SPLITS = {"model": "Model", "template": "Prompt template", "strategy": "Packing strategy",
          "context_bucket": "Context length"}

params = data.params_key(filters.current())
st.title("Where the decisive evidence sat")
st.caption(filters.traffic_note())
st.caption("Accuracy of graded requests by the position of their first decisive chunk in the "
           "prompt: its band (token midpoint in the first, middle or last third) and its slot "
           "among the k chunks. Error bars are Wilson 95% intervals; n is graded requests.")

split = st.segmented_control("Split by", list(SPLITS), key="split", bind="query-params",
                             help="model, prompt template, packing strategy or context-length "
                                  "bucket")
group = (split,) if split else ()

bands = ui.query(data.view, "accuracy_by_band", params, group)
if bands.empty:
    ui.no_rows("requests with a decisive chunk in the prompt")
    st.stop()
min_n = int(data.settings()["min_n"])
present, hidden = frames.at_least(bands[bands["band"] != "absent"], min_n, split)
# 'absent' (the sweep's closed-book condition) exists only in experiment traffic.
absent = bands[bands["band"] == "absent"]
ui.chart(figures.accuracy_by_band(present, split=split, baseline=absent,
                                  title="Accuracy by decisive-evidence band"), bands,
         "accuracy_by_band",
         caption=("Dashed line: the closed-book baseline, the sweep's 'absent' condition (no "
                  "decisive evidence in the prompt). " if not absent.empty else
                  "A middle band clearly below the edges is positional bias. ")
         + (f"{hidden} split points under min_n = {min_n} graded requests are hidden."
            if hidden else ""))

slots = ui.query(data.view, "accuracy_by_slot", params, group)
ks = frames.requests_per_k(slots)
if ks:
    k = st.selectbox("Chunks in the prompt (k)", ks, key="k", bind="query-params",
                     help="Slot positions mean different things for different k; ordered by "
                          "number of requests.")
    at_k, hidden_k = frames.at_least(slots[slots["k"] == k], min_n, split)
    if hidden_k:
        st.caption(f"{hidden_k} points under min_n = {min_n} graded requests are hidden.")
    ui.chart(figures.accuracy_by_slot(at_k, split=split, baseline=absent if not split else None,
                                      title=f"Accuracy by slot of the decisive chunk (k = {k})"),
             at_k, "accuracy_by_slot", key="slot")
else:
    st.info("No request with a decisive chunk in a known slot matches these filters.")

st.subheader("Retrieval order against prompt order")
quality = ui.query(data.view, "retrieval_quality", params, ())
if quality.empty or not int(quality.iloc[0]["requests"] or 0):
    st.info("No request with a known decisive chunk matches these filters.")
else:
    q = quality.iloc[0]
    st.caption(f"Over {int(q['requests']):,} requests with a known decisive chunk: did "
               "retrieval rank it high, and did packing keep it where the model reads best? "
               "Hit rate: a decisive chunk is in the list at all; MRR: 1 / rank of the first; "
               "NDCG: rank-discounted gain of every decisive chunk.")
    cols = st.columns(3)
    for col, (label, key) in zip(cols, (("Hit rate", "hit_rate"), ("MRR", "mrr"),
                                        ("NDCG", "ndcg")), strict=True):
        retrieval, prompt = q[f"retrieval_{key}"], q[f"prompt_{key}"]
        fmt = ui.fmt_rate if key == "hit_rate" else ui.fmt_number
        col.metric(f"{label}: retrieval order", fmt(retrieval), border=True,
                   help="The decisive chunks among the retrieved chunks, in retrieval order.")
        col.metric(f"{label}: prompt order", fmt(prompt), border=True,
                   help="The decisive chunks among the chunks in the prompt, in prompt order.")

with st.expander("Numbers"):
    ui.table(bands, "accuracy_by_band_table")
    if not quality.empty:
        ui.table(quality, "retrieval_quality")
