"""Citations: alignment by week, where cited chunks sat, and who got cited instead."""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import data, figures, filters, ui

params = data.params_key(filters.current())
st.title("Citations")
st.caption(filters.traffic_note())
st.caption("Citation alignment: among requests whose decisive evidence was in the prompt, the "
           "share whose answer cited a decisive chunk. Its fall over time is citation drift; "
           "beside it, the share of citing answers that cite a deprecated or non-canonical "
           "source.")

drift = ui.query(data.view, "citation_drift", params, ("week",))
if drift.empty or int(drift["requests"].sum()) == 0:
    ui.no_rows()
    st.stop()
ui.chart(figures.citation_drift(drift, title="Citation alignment and non-canonical citations "
                                             "by week"), drift, "citation_drift")

left, right = st.columns(2)
with left:
    positions = ui.query(data.view, "citation_positions", params, ())
    ui.chart(figures.band_heatmap(positions, "decisive_band", "cited_band", "requests",
                                  title="Where the cited chunks sat vs. the decisive chunk",
                                  row_title="decisive chunk's band",
                                  col_title="cited chunk's band"),
             positions, "citation_positions",
             caption="Requests with decisive evidence in the prompt, by the band of their "
                     "decisive chunk (rows) and of each chunk the answer cited (columns; "
                     "'none': cited nothing in the prompt).")
with right:
    elsewhere = ui.query(data.view, "cited_sources_elsewhere", params, ())
    ui.chart(figures.count_bars(elsewhere, "source_id", "instead_of_decisive", color="authority",
                                title="Sources cited when the decisive chunk was elsewhere",
                                value_title="requests citing it and no decisive chunk"),
             elsewhere, "cited_sources_elsewhere",
             caption="Who cited the deprecated note: non-decisive sources the answer cited while "
                     "the decisive evidence sat in the prompt uncited.")

st.subheader("Cited sources beside the decisive evidence")
ui.table(elsewhere, "cited_sources_elsewhere_table", key="elsewhere_table",
         column_config={"source_id": "source", "requests": st.column_config.NumberColumn(
             "requests citing it", help="Requests with decisive evidence in the prompt that "
             "cited this non-decisive source"), "instead_of_decisive": st.column_config.
             NumberColumn("…and no decisive chunk")})
