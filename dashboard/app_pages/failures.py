"""Failures: the taxonomy over time and by slice; a class opens its requests, a request the
inspector."""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import case_set, data, figures, filters, frames, ui

CLASSES = ("buried", "unused", "dropped", "missing", "unlabeled", "answered", "ungraded")
MEANING = {
    "buried": "in the prompt, but only in the middle band",
    "unused": "in the prompt at an edge, still answered wrong",
    "dropped": "retrieved, then cut before the prompt (budget, dedupe, filter, diversity)",
    "missing": "never retrieved",
    "unlabeled": "answered wrong, no decisive chunk known: grade it in the inspector",
    "answered": "graded correct",
    "ungraded": "no grade yet",
}
SLICES = {"model": "Model", "template": "Prompt template", "strategy": "Packing strategy",
          "context_bucket": "Context length"}
PAGE_SIZE = 50

params = data.params_key(filters.current())
st.title("Failures")
st.caption(filters.traffic_note())
st.caption("Each graded-wrong request gets one class, by the furthest stage any decisive chunk "
           "reached. Different owners act on different classes: retrieval on missing, prompt "
           "assembly on dropped, layout on buried, the model or prompt wording on unused.")

tax = ui.query(data.view, "taxonomy_by_week", params, ("week",))
if tax.empty:
    ui.no_rows()
    st.stop()

left, right = st.columns(2)
with left:
    hide_ok = st.toggle("Failures only", value=True, key="fail_only", bind="query-params",
                        help="Hide answered and ungraded requests.")
    shown = tax[~tax["class"].isin(("answered", "ungraded"))] if hide_ok else tax
    ui.chart(figures.taxonomy_by_week(shown, title="Taxonomy by week"), shown, "taxonomy_by_week")
with right:
    dim = st.selectbox("Slice by", list(SLICES), key="slice", bind="query-params")
    by_slice = ui.query(data.view, "failure_taxonomy", params, (dim,))
    ui.chart(figures.taxonomy_by_slice(by_slice, dim, title=f"Failure classes by "
                                                             f"{SLICES[dim].lower()}"),
             by_slice, "failure_taxonomy_by_slice", key="slice")

unsupported = ui.query(data.view, "unsupported_confidence", params, ())
if not unsupported.empty and int(unsupported.iloc[0]["graded_with_evidence_and_confidence"] or 0):
    u = unsupported.iloc[0]
    threshold = data.settings().get("high_confidence")
    st.subheader("Confident and wrong")
    cols = st.columns(3)
    cols[0].metric("Unsupported confidence", ui.fmt_rate(u["unsupported_rate"]), border=True,
                   help="Of the graded answers with the decisive evidence in the prompt and a "
                        "stated confidence: wrong while at least "
                        f"{threshold} confident (the high_confidence setting).")
    cols[1].metric("Confident wrong answers", f"{int(u['unsupported']):,}", border=True)
    cols[2].metric("…of them buried", f"{int(u['unsupported_buried']):,}", border=True,
                   help="The decisive evidence sat only in the middle band of the prompt.")
    st.caption(f"Out of {int(u['graded_with_evidence_and_confidence']):,} graded answers "
               "that had the evidence and stated a confidence: the model sounded sure and "
               "was wrong. These are the answers users trust most.")

st.subheader("Requests in a class")
totals = tax.groupby("class")["n"].sum().to_dict()
# Options are the raw class names: a URL-bound control matches the URL against the labels.
cls = st.segmented_control("Class", CLASSES, key="class", bind="query-params", default="buried")
st.caption(" · ".join(f"{c} {int(totals.get(c, 0)):,}" for c in CLASSES)
           + " requests in the selected range")
if cls is None:
    st.stop()
st.caption(f"{cls}: {MEANING[cls]}. Select a row to open it in the trace inspector.")
search = st.text_input("Question or answer contains", key="q", placeholder="e.g. refund",
                       bind="query-params")
page_no = int(st.session_state.get("page_no", 1))
rows, total = ui.query(data.requests_page, params, search=search or None, taxonomy_class=cls,
                       limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE)
pages = max(1, -(-total // PAGE_SIZE))
if page_no > pages:  # the filters changed under a later page: start again at the first
    st.session_state["page_no"] = page_no = 1
    rows, total = ui.query(data.requests_page, params, search=search or None,
                           taxonomy_class=cls, limit=PAGE_SIZE, offset=0)
left, right = st.columns([3, 1], vertical_alignment="bottom")
left.caption(f"{total:,} {cls} requests match, newest first; {PAGE_SIZE} per page.")
right.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="page_no")
if rows.empty:
    st.info(f"No {cls} requests match these filters.")
    st.stop()
# the link keeps the page's filters, so the inspector's lists and links stay in the same slice
rows = rows.assign(open=[filters.inspect_link(t) for t in rows["trace_id"]])
if cls == "unused":
    st.caption("unused vs band: the first decisive chunk may sit in the middle band while "
               "another occurrence sat at an edge; the 'decisive chunk' column names that edge.")
shown = rows.assign(decisive_at=frames.decisive_cells(rows))
# one class per list, so its class (and whether it was right) goes without saying
shown_cols = [c for c in ("open", "time", "question", "decisive_at", "model", "template",
                          "strategy") if c in shown.columns]
event = ui.table(shown[shown_cols], f"requests_{cls}", key="requests", csv=rows,
                 on_select="rerun", selection_mode="single-row",
                 column_config={"open": st.column_config.LinkColumn(
                     "", display_text="inspect ↗", width="small"),
                     "time": st.column_config.DatetimeColumn("time (UTC)", format="YYYY-MM-DD HH:mm"),
                     "decisive_at": "decisive chunk"})

with st.expander(f"Export these as cases ({min(total, case_set.MAX_EXPORT):,} requests)"):
    st.caption("Each request becomes a sweep case with its question, every retrieved chunk's "
               "text and its decisive chunks; its accepted answers come from a references file "
               "(the one `midtrace grade --references` reads: JSON lines of {question, answers, "
               "required_constraints}, or a cases file). The cases join the case set; download "
               "it from the sidebar. " + (f"Only the newest {case_set.MAX_EXPORT:,} are read; "
                                          "narrow the filters for the rest."
                                          if total > case_set.MAX_EXPORT else ""))
    upload = st.file_uploader("References file", type=["jsonl", "json", "txt"],
                              key="cases_references")
    if upload is not None and st.button("Make the cases", key="cases_make"):
        from midtrace.jsonl import json_lines
        from midtrace.references import parse_references

        refs = parse_references(json_lines(upload.getvalue().decode("utf-8-sig", "replace")))
        if refs.bad:
            st.error(f"{len(refs.bad)} line(s) of {upload.name} cannot be used; no case was made.")
            st.text("\n".join(refs.bad[:20]))
            st.stop()
        ids = ui.query(data.trace_ids, params, search or None, cls, case_set.MAX_EXPORT)
        bar = st.progress(0.0, text=f"Reading {len(ids):,} requests")
        made, skipped = case_set.cases_of(
            ids, data.trace, refs.by_question(),
            lambda done: bar.progress(done / len(ids), text=f"Read {done:,} of {len(ids):,}"))
        bar.empty()
        new = case_set.add(made)
        st.session_state["_cases_made"] = (len(made), new, dict(skipped))
        st.rerun()  # the sidebar, drawn before this page, counts them
    if "_cases_made" in st.session_state:
        n, new, skipped = st.session_state["_cases_made"]
        (st.success if n else st.warning)(
            f"{n:,} case(s) made ({new:,} new to the set); the set holds "
            f"{len(case_set.current()):,}.")
        if skipped:
            st.text("\n".join(f"skipped {k:,}: {reason}" for reason, k in
                              sorted(skipped.items(), key=lambda kv: -kv[1])))

selected = event.selection.rows if event is not None else []
if selected:
    trace_id = str(rows.iloc[selected[0]]["trace_id"])
    # the sidebar's filters are widgets of the router, bound to the URL: they go along
    st.switch_page("app_pages/inspector.py", query_params={"trace_id": trace_id})
