"""The case set: incidents frozen as sweep cases from the inspector ("Add to case set") and the
Failures page ("Export these as cases"), kept in the browser tab's session and downloaded as
the cases file `midtrace sweep --cases` and `midtrace gate --cases` read.

Each case is made by the one rule `midtrace cases` follows (midtrace/sweep/from_traces.py):
a request becomes a case only with its question, every retrieved chunk's text, a decisive
chunk and an accepted answer; otherwise the reason is shown. docs/dashboard.md, "Case set".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import streamlit as st

KEY = "_case_set"  # trace id -> case, in the order they were added
FILE_NAME = "cases.jsonl"
# The most requests one export reads: each is one trace fetched from the source.
MAX_EXPORT = 500


def case_of(trace: Mapping[str, Any], answers: Iterable[str]) -> dict[str, Any] | str:
    """The case one request makes with these accepted answers, or why it makes none."""
    from midtrace.references import Reference, question_key
    from midtrace.sweep.from_traces import case_from_trace

    kept = tuple(a.strip() for a in answers if a.strip())
    question = (trace.get("request") or {}).get("question")
    refs = ({question_key(question): Reference(0, question, kept)}
            if isinstance(question, str) and kept else {})
    made = case_from_trace(trace, refs)
    if isinstance(made, str):
        return made.replace("no --references line has its question",
                            "give the accepted answers")
    return made


def cases_of(trace_ids: Iterable[str], fetch: Callable[[str], Mapping[str, Any] | None],
             references: Mapping[str, Any],
             progress: Callable[[int], None] = lambda done: None,
             ) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The cases the requests make with a references file's answers (by question), and how
    many were skipped for each reason."""
    from midtrace.sweep.from_traces import case_from_trace

    made: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for done, trace_id in enumerate(trace_ids, start=1):
        trace = fetch(trace_id)
        case = (case_from_trace(trace, references) if trace
                else "no request has this trace id")
        if isinstance(case, str):
            skipped[case.replace("no --references line", "no line of the references file")] += 1
        else:
            made.append(case)
        progress(done)
    return made, skipped


def to_jsonl(cases: Iterable[Mapping[str, Any]]) -> str:
    """The cases file: one JSON object per line, as `midtrace cases` writes it."""
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)


def current() -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = st.session_state.setdefault(KEY, {})
    return cases


def add(cases: Iterable[dict[str, Any]]) -> int:
    """Put cases in the set (a request already there is replaced); how many are new."""
    held = current()
    new = 0
    for case in cases:
        new += case["id"] not in held
        held[case["id"]] = case
    return new


def sidebar() -> None:
    """The set's size and its download, on every page once it holds a case."""
    held = current()
    if not held:
        return
    with st.sidebar.container(border=True):
        st.text(f"Case set: {len(held)} case{'s' if len(held) != 1 else ''}")
        left, right = st.columns(2)
        left.download_button("⬇ cases", to_jsonl(held.values()).encode(), file_name=FILE_NAME,
                             mime="application/jsonl", key="case_set_download",
                             help="The cases file `midtrace sweep --cases` and `midtrace gate "
                                  "--cases` read (docs/sweep.md).")
        if right.button("Clear", key="case_set_clear"):
            held.clear()
            st.rerun()
