"""Trace inspector: one request's prompt drawn along its token axis, its chunks, answer,
citations and outcome; grading when a collector is behind the dashboard.

Chunk, question and answer text is untrusted: it is shown with st.text / st.code /
st.dataframe only, never as Markdown or HTML.
"""

from __future__ import annotations

import re

import streamlit as st

from midtrace.dashboard import case_set, data, figures, filters, frames, labels, ui

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
CLASS_COLORS = {"answered": "green", "ungraded": "gray", "missing": "violet", "dropped": "orange",
                "buried": "red", "unused": "blue", "unlabeled": "gray"}

st.title("Trace inspector")

with st.container(border=True):
    left, right = st.columns([2, 3])
    trace_id = left.text_input("Trace id", key="trace_id", bind="query-params",
                               placeholder="32 hex digits",
                               help="Paste a trace id from your logs, or pick a request on the "
                                    "right or on the Failures page.").strip().lower()
    search = right.text_input("…or find by question or answer text", key="q",
                              bind="query-params", placeholder="e.g. refund, or 30 days",
                              help="Searches questions and answers under the sidebar filters, "
                                   "newest first.").strip()


def pick_from(rows, key: str) -> None:  # type: ignore[no-untyped-def]
    cols = [c for c in ("time", "kind", "question", "correct", "taxonomy_class", "decisive_band",
                        "model", "template", "trace_id")
            if c in rows.columns]

    def open_chosen() -> None:
        # The trace id box is bound to the URL, so the URL cannot be set around it
        # (switch_page with query_params raises): set the box, before the rerun draws it.
        picked = st.session_state[key].selection.rows
        if picked:
            st.session_state["trace_id"] = str(rows.iloc[picked[0]]["trace_id"])

    shown = rows[cols]
    st.dataframe(labels.readable(shown), key=key, hide_index=True, width="stretch",
                 on_select=open_chosen, selection_mode="single-row",
                 column_config=labels.column_config(shown, {
                     "time": st.column_config.DatetimeColumn("time (UTC)",
                                                             format="YYYY-MM-DD HH:mm"),
                     "question": st.column_config.TextColumn("question", width="large")}))


PAGE_SIZE = 50
# requests that are no answered RAG request: listed and shown, in no figure (docs/metrics.md)
NOT_RAG = {
    "retrieval_only": "Retrieval only: this trace retrieved documents but made no LLM call "
                      "after it, so it is not an answered RAG request and is in no figure.",
    "llm_only": "LLM only: this trace made an LLM call with no retrieval, so it is not a RAG "
                "request and is in no figure.",
}

if search:
    params = data.params_key(filters.current())
    try:  # the page box is drawn below the results, so read it (or the URL) first
        page_no = max(1, int(st.session_state.get("results_page")
                             or st.query_params.get("results_page") or 1))
    except ValueError:
        page_no = 1
    found, total = ui.query(data.requests_page, params, search=search, limit=PAGE_SIZE,
                            offset=(page_no - 1) * PAGE_SIZE)
    pages = max(1, -(-total // PAGE_SIZE))
    if page_no > pages:  # the filters changed under a later page
        page_no = 1
        found, total = ui.query(data.requests_page, params, search=search, limit=PAGE_SIZE)
    first = (page_no - 1) * PAGE_SIZE
    st.caption(f"Requests whose question or answer contains the text, under the sidebar "
               f"filters: {total:,} match" + (f"; {first + 1:,}-{first + len(found):,} shown."
                                               if total else ".") + " Select one.")
    if found.empty:
        st.info("No request's question or answer contains that text under these filters "
                "(widen the dates or switch Traffic to all).")
    else:
        pick_from(found, "found")
        if pages > 1:
            st.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1,
                            key="results_page", bind="query-params")

if not trace_id:
    if not search:
        recent = ui.query(data.requests, data.params_key(filters.current()), limit=20)
        st.caption("The newest requests under the current filters. Select one to inspect it.")
        kinds = (ui.query(data.facets) or {}).get("kinds") or {}
        if kinds.get("retrieval_only") or kinds.get("llm_only"):
            st.caption(f"Of {sum(kinds.values()):,} stored requests, "
                       f"{kinds.get('retrieval_only', 0):,} are retrieval only and "
                       f"{kinds.get('llm_only', 0):,} LLM only: listed here with their kind, "
                       "in no figure (no answered RAG request).")
        if recent.empty:
            ui.no_rows()
        else:
            pick_from(recent, "recent")
    st.stop()

if not TRACE_ID.match(trace_id):
    st.error("A trace id is 32 hexadecimal digits.")
    st.stop()

trace = ui.query(data.trace, trace_id)
if trace is None:
    st.warning("No request with that trace id in this database (it may not have arrived yet, or "
               "its trace had neither retrieval nor an LLM call).")
    st.stop()

request = trace.get("request") or {}
placed = frames.placed_chunks(trace)
unplaced = frames.unplaced_chunks(trace)
cites = frames.citations(trace, placed)
cls = trace.get("taxonomy_class") or request.get("taxonomy_class")

# --- header: the question and the request's facts -------------------------------------------
if request.get("kind") in NOT_RAG:
    st.info(NOT_RAG[request["kind"]])
st.subheader("Question")
st.text(request.get("question") or "(no question recorded)")
facts = st.columns(6)
if cls in CLASS_COLORS:
    facts[0].badge(cls, color=CLASS_COLORS[cls])  # fixed vocabulary, checked above
facts[0].caption("failure class")
for col, (label, value) in zip(facts[1:], (
    ("time (UTC)", str(request.get("time") or "—")[:19].replace("T", " ")),
    ("model", labels.model(request.get("model"))),
    ("template · strategy", f"{labels.template(request.get('template_id'))} · "
                            f"{request.get('strategy') or 'no strategy'}"),
    ("prompt tokens", f"{request.get('prompt_tokens') or '—'}"
                      + (" (estimated)" if request.get("tokens_estimated") else "")),
    ("decisive at", f"slot {request.get('decisive_slot')} of {request.get('k')}, "
                    f"{request.get('decisive_band')}" if request.get("decisive_slot") else "—"),
), strict=True):
    col.text(str(value if value is not None else "—"))
    col.caption(label)
st.caption(frames.request_cost(request))

# --- the strip -------------------------------------------------------------------------------
prompt_tokens = request.get("prompt_tokens")
if not prompt_tokens and not placed.empty and placed["token_end"].notna().any():
    prompt_tokens = int(placed["token_end"].max())
bands = data.settings()  # the band edges the views used, so the shading matches the numbers
segments = frames.prompt_segments(placed, request.get("prompt_sections"), prompt_tokens)
strip = figures.prompt_strip(placed, prompt_tokens, bands["band_early_end"],
                             bands["band_late_start"], segments=segments,
                             title="The prompt, left to right: each coloured block a chunk in "
                                   "prompt order, grey what surrounds them")
event = ui.chart(strip, placed.drop(columns=["text"], errors="ignore"), f"prompt_{trace_id}",
                 key="strip", on_select="rerun", selection_mode="points",
                 caption="Colour: label · grey: the rest of the prompt (instructions, earlier "
                         "turns, the question, the answer format, or 'not recorded' when the "
                         "trace did not say) · black outline: decisive · ▼ cited · shaded: the "
                         "middle band. Hover a block for its ranks and scores; click a chunk "
                         "to read it.")
if cls == "unused":
    edges = frames.edge_occurrences(placed)
    if edges:
        st.caption("Class unused, not buried: a decisive chunk sat at an edge of the prompt "
                   "(" + "; ".join(edges) + ") and the answer was still wrong.")
clicked = cited_pick = None
points = event.selection.points if event is not None and event.selection else []
if points:
    clicked = points[0].get("customdata")
    if isinstance(clicked, list):
        clicked = clicked[0]

# --- chunks, answer, outcome -----------------------------------------------------------------
# The answer and its grade side by side; the wide tables below take the full width, so no
# column is cut off at 1440 px.
left, right = st.columns(2, gap="large")
with left:
    st.subheader("Answer")
    st.code(request.get("answer") or "(no answer recorded)", language=None, wrap_lines=True)
    st.caption("Citations, in the answer's order; select one to read its chunk.")
    shown_cites = cites.drop(columns=["source_id", "authority"], errors="ignore")
    cite_event = st.dataframe(labels.readable(shown_cites), key="cites", hide_index=True,
                              width="stretch", on_select="rerun", selection_mode="single-row",
                              column_config=labels.column_config(shown_cites))
    if cite_event.selection.rows:
        chosen = cites.iloc[cite_event.selection.rows[0]]["chunk_id"]
        hit = placed[placed["chunk_id"] == chosen]
        cited_pick = int(hit["prompt_index"].iloc[0]) if not hit.empty else chosen

with right:
    st.subheader("Outcome")
    outcome = trace.get("outcome")
    if outcome is None or outcome.get("correct") is None:
        st.text("Not graded yet.")
    else:
        st.text(("Correct" if outcome.get("correct") else "Wrong")
                + f" · graded by {outcome.get('grader') or 'person'}"
                + (f" · reviewer {outcome.get('reviewer')}" if outcome.get("reviewer") else "")
                + (f" · graded {str(outcome.get('graded_at'))[:19]}" if outcome.get("graded_at")
                   else ""))
        if outcome.get("decisive_chunk_ids"):
            st.text("decisive: " + ", ".join(map(str, outcome["decisive_chunk_ids"])))
        if outcome.get("note"):
            st.text("note: " + str(outcome["note"]))
    grades = frames.grades(trace.get("outcomes") or [])
    if len(grades) > 1 or (len(grades) == 1 and outcome is not None
                           and outcome.get("correct") is None):
        st.caption("Every grade received, by grader; the strongest kind wins (a person over "
                   "reference answers over the LLM judge). A judge error is no grade.")
        ui.table(grades, f"grades_{trace_id}", key="grades")
    required = list((outcome or {}).get("required_constraints") or [])
    if required:
        recall = frames.constraint_recall(required, (outcome or {}).get("recalled_constraints"))
        st.caption(f"Required constraints: {int(recall['recalled'].sum())} of {len(recall)} "
                   "kept in the answer.")
        ui.table(recall.assign(recalled=recall["recalled"].map({True: "kept", False: "missed"})),
                 f"constraints_{trace_id}", key="constraints")

# --- where the answer came from --------------------------------------------------------------
st.subheader("Where the answer came from")
followed = frames.followed_chunks(trace, placed)
if followed.empty:
    st.caption("No chunk in the prompt holds the answer's specific content (its numbers with "
               "units, dates, quoted text or rare phrases).")
else:
    st.caption("The chunks the answer follows: each holds some of the answer's specific "
               "content (numbers with units, dates, quoted text, rare phrases), marked ⟦like "
               "this⟧ in the answer and in the chunk. A chunk followed that is not decisive is "
               "a distractor the answer came from.")
    answer = request.get("answer")
    if isinstance(answer, str) and answer:
        st.code(frames.marked(answer, [(s["answer_start"], s["answer_end"])
                                       for s in trace.get("answer_sources") or []]),
                language=None, wrap_lines=True)
    ui.table(followed[list(frames.FOLLOWED_COLUMNS)], f"answer_sources_{trace_id}",
             key="answer_sources")
    texts = {c.get("ordinal"): c.get("text") for c in trace.get("chunks") or []}
    for r in followed.to_dict("records"):
        with st.container(border=True):
            st.text((f"slot {r['slot']} · " if r["slot"] is not None else "")
                    + f"{labels.short_id(r['chunk_id'])} · {r['label'] or 'no label'}"
                    + (" · decisive" if r["decisive"] else " · not decisive"))
            text = texts.get(r["ordinal"])
            st.code(frames.marked(text, r["spans"]) if isinstance(text, str)
                    else "(text not stored)", language=None, wrap_lines=True)

# --- replays (`midtrace replay`, docs/replay.md) ---------------------------------------------
st.subheader("Replays")
replays = frames.replays(trace.get("replays") or [])
if replays.empty:
    st.caption("Not replayed yet. Would another layout have answered it right? Ask the same "
               "prompt again with its chunks re-ordered (the decisive chunk first, last, and "
               "by each packing strategy), then come back here:")
    st.code(f"midtrace replay --trace-id {trace_id} --store STORE.duckdb (or --url URL) "
            "--references REFERENCES.jsonl --endpoint URL --model MODEL "
            "[--strategies edge,long_context_reorder] [--repeats 5] [--dry-run]",
            language="bash", wrap_lines=True)
else:
    st.caption("This request asked again under other layouts, one row per experiment and "
               "layout; 'original' is its own prompt order. Open an experiment to compare "
               "the layouts on the Experiments page.")
    ui.table(replays.assign(open=[filters.experiment_link(e) for e in replays["experiment"]]),
             f"replays_{trace_id}", key="replays", csv=replays,
             column_config={"open": st.column_config.LinkColumn(
                 "", display_text="experiment ↗", width="small")})
endpoint = data.replay_endpoint()
if data.read_only() or not endpoint:
    st.caption("To replay from here: run the dashboard on a collector (`midtrace serve`, or "
               "`midtrace dashboard --url ...`) with MIDTRACE_SWEEP_ENDPOINT set to your "
               "model endpoint (its key from MIDTRACE_SWEEP_API_KEY or OPENAI_API_KEY).")
else:
    with st.expander("Replay it here", expanded=False):
        st.caption("Calls go to the endpoint MIDTRACE_SWEEP_ENDPOINT names, below. Nothing is "
                   "sent until you confirm the number of calls and their estimated cost.")
        st.text(endpoint)
        with st.form("replay_form", border=False):
            replay_model = st.text_input("Model", key="replay_model",
                                         value=data.replay_default_model()
                                         or str(request.get("model") or ""))
            replay_strategies = st.text_input("Packing strategies", key="replay_strategies",
                                              value="edge,long_context_reorder")
            replay_repeats = st.number_input("Calls per layout", key="replay_repeats",
                                             min_value=1, max_value=50, value=5, step=1)
            replay_answers = st.text_area("Accepted answers, one per line (what a right "
                                          "answer contains)", key="replay_answers", height=68)
            estimate = st.form_submit_button("Count the calls and estimate the cost")
        if estimate:
            answers = [a.strip() for a in replay_answers.splitlines() if a.strip()]
            planned = ui.query(data.replay_plan, trace, answers, replay_strategies,
                               int(replay_repeats), replay_model.strip())
            if isinstance(planned, str) or not replay_model.strip():
                st.session_state.pop("_replay", None)
                st.error("Cannot replay this request.")
                st.text(planned if isinstance(planned, str) else "Name the model.")
            else:
                st.session_state["_replay"] = (trace_id, replay_model.strip(), planned)
        pending = st.session_state.get("_replay")
        if pending and pending[0] == trace_id:
            _, replay_model_name, planned = pending
            cost, example = data.replay_estimate(planned, replay_model_name)
            calls = len(planned.trials)
            st.text(f"{calls} calls ({len(planned.layouts)} layouts: "
                    f"{', '.join(planned.layouts)}) to {replay_model_name}; estimated cost "
                    + (f"${cost:.4f}" + (" (example prices)" if example else "")
                       if cost is not None else "unknown (the model is not in the price table)")
                    + ("; prompt reconstructed from the chunks" if planned.incident.reconstructed
                       else "; the stored prompt"))
            if st.button(f"Spend {calls} calls", key="replay_go", type="primary"):
                with st.spinner(f"Replaying: {calls} calls"):
                    try:
                        done = data.run_replay(planned, replay_model_name)
                    except Exception as e:  # the endpoint's or collector's answer, as text
                        st.error("The replay stopped.")
                        st.text(str(e))
                        st.stop()
                st.session_state.pop("_replay", None)
                st.session_state["_replayed"] = (trace_id, done.experiment, done.calls)
                st.rerun()
    replayed = st.session_state.get("_replayed")
    if replayed and replayed[0] == trace_id:
        st.success("Replays recorded: see the table above.")
        st.text(f"{replayed[2]} calls recorded as experiment {replayed[1]}")

# --- the case set (dashboard/case_set.py) -------------------------------------------------------
st.subheader("Add to case set")
in_set = trace_id in case_set.current()
st.caption("Freeze this incident as a sweep case: its question, every retrieved chunk's text, "
           "its decisive chunks and the accepted answers you give. The set is kept in this "
           "browser tab; download it from the sidebar as the cases file `midtrace sweep "
           "--cases` and `midtrace gate --cases` read."
           + (" This request is in the set; adding it again replaces its case." if in_set else ""))
with st.form("case_form", border=False):
    case_answers = st.text_area("Accepted answers for this case, one per line (what a right "
                                "answer contains)", key="case_answers", height=68)
    add_case = st.form_submit_button("Add to case set")
if add_case:
    made = case_set.case_of(trace, case_answers.splitlines())
    if isinstance(made, str):
        st.error("This request cannot become a case.")
        st.text(made)
    else:
        case_set.add([made])
        st.session_state["_case_added"] = trace_id
        st.rerun()  # the sidebar, drawn before this page, counts it
if st.session_state.get("_case_added") == trace_id:
    st.success(f"Added: the set holds {len(case_set.current())} case(s).")

st.subheader("In the prompt")
st.caption("Retrieval and rerank: each chunk's rank, with its score in brackets.")
placed_rows = placed[[c for c in frames.PLACEMENT_COLUMNS if c in placed.columns]]
ui.table(frames.compact_chunks(placed_rows), f"placements_{trace_id}", key="placed",
         csv=placed_rows)
st.subheader("Retrieved, not in the prompt")
if unplaced.empty:
    st.caption("Every retrieved chunk reached the prompt.")
else:
    cols = [c for c in ("chunk_id", "stage", "drop_reason", "label", "is_decisive",
                        "source_id", "authority", "retrieval_rank", "retrieval_score",
                        "rerank_rank", "rerank_score") if c in unplaced.columns]
    ui.table(frames.compact_chunks(unplaced[cols]), f"unplaced_{trace_id}", key="unplaced",
             csv=unplaced[cols])

# --- chunk texts -----------------------------------------------------------------------------
st.subheader("Chunk text")
options: list[object] = list(placed["prompt_index"]) + list(unplaced.get("chunk_id", []))
names = {int(r["prompt_index"]): f"slot {r['slot']} · {labels.short_id(r['chunk_id'])} · "
         f"{r['label'] or 'no label'}"
         + (" · decisive" if r["decisive"] else "") + (" · cited" if r["cited"] else "")
         for r in placed.to_dict("records")}
names.update({c: f"not in prompt · {labels.short_id(c)}" for c in unplaced.get("chunk_id", [])})
default = next(
    (int(r["prompt_index"]) for r in placed.to_dict("records") if r["decisive"]),
    options[0] if options else None)
if options:
    # A click on the strip or a citation picks the chunk once; the select box stays free after.
    for source_key, value in (("_strip_click", clicked), ("_cite_click", cited_pick)):
        if value is not None and value in names and st.session_state.get(source_key) != value:
            st.session_state["chunk_pick"] = value
        st.session_state[source_key] = value
    if st.session_state.get("chunk_pick") not in names:
        st.session_state["chunk_pick"] = default
    pick = st.selectbox("Chunk", options, format_func=lambda o: names.get(o, str(o)),
                        key="chunk_pick")
    if pick in set(placed["prompt_index"]):
        text = placed[placed["prompt_index"] == pick]["text"].iloc[0]
        full_id = placed[placed["prompt_index"] == pick]["chunk_id"].iloc[0]
    else:
        full_id = pick
        text = unplaced[unplaced["chunk_id"] == pick]["text"].iloc[0] if "text" in unplaced else None
    if labels.short_id(full_id) != str(full_id):  # a content-hash id: the whole, to copy
        st.code(str(full_id), language=None)
    st.code(text if isinstance(text, str) else "(text not stored)", language=None,
            wrap_lines=True)
    show_all = st.toggle("Show every chunk's text in prompt order", key="all_texts",
                         bind="query-params")
    if show_all:
        for r in placed.to_dict("records"):
            with st.container(border=True):
                st.text(names[int(r["prompt_index"])])
                st.code(r["text"] if isinstance(r.get("text"), str) else "(text not stored)",
                        language=None, wrap_lines=True)

# --- grading ---------------------------------------------------------------------------------
st.subheader("Grade this answer")
if data.read_only():
    st.info("Read-only: this dashboard reads a store directly (a DuckDB file or a ClickHouse "
            "store). To grade, run it on a collector "
            "(`midtrace dashboard --url http://127.0.0.1:4318`, or `midtrace serve`).")
else:
    chunk_ids = list(dict.fromkeys([*placed["chunk_id"], *unplaced.get("chunk_id", [])]))
    current = [c for c in chunk_ids if c in set(
        (outcome or {}).get("decisive_chunk_ids") or [])] if outcome else []
    with st.form("grade", border=True):
        verdict = st.radio("The answer was", ["correct", "wrong"], horizontal=True, index=None,
                           key="grade_verdict")
        decisive = st.multiselect("Decisive chunk(s): the evidence a right answer needed",
                                  chunk_ids, default=current, key="grade_decisive")
        grade_required = st.text_area(
            "Required constraints, one per line: qualifiers a right answer must keep "
            "(an exception, a limit, a plan)", key="grade_required", height=68,
            value="\n".join(map(str, (outcome or {}).get("required_constraints") or [])))
        grade_recalled = st.text_area(
            "Of those, the ones the answer kept, one per line", key="grade_recalled", height=68,
            value="\n".join(map(str, (outcome or {}).get("recalled_constraints") or [])))
        reviewer = st.text_input("Reviewer", key="grade_reviewer")
        note = st.text_area("Note", key="grade_note", height=68)
        submitted = st.form_submit_button("Save grade", type="primary")
    if submitted:
        if verdict is None:
            st.error("Say whether the answer was correct or wrong.")
        else:
            outcome_body: dict[str, object] = {"trace_id": trace_id,
                                               "correct": verdict == "correct",
                                               "decisive_chunk_ids": decisive}
            lines = {k: [x.strip() for x in v.splitlines() if x.strip()]
                     for k, v in (("required_constraints", grade_required),
                                  ("recalled_constraints", grade_recalled))}
            unknown = [c for c in lines["recalled_constraints"]
                       if c not in lines["required_constraints"]]
            if unknown:
                st.error("A kept constraint must be one of the required ones: "
                         + "; ".join(unknown))
                st.stop()
            if lines["required_constraints"]:
                outcome_body.update(lines)
            if reviewer:
                outcome_body["reviewer"] = reviewer
            if note:
                outcome_body["note"] = note
            try:
                data.post_outcome(outcome_body)
            except Exception as e:  # the collector's answer, shown as plain text
                st.error("The collector did not accept the grade.")
                st.text(str(e))
            else:
                st.session_state["_graded"] = trace_id
                st.rerun()
    if st.session_state.get("_graded") == trace_id:
        st.success("Grade saved. Every page now counts it.")
