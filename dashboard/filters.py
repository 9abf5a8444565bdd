"""The sidebar filters, kept in the URL so that a link reproduces the view.

Keys are the query API's filter keys (since, until, service, model, template, strategy,
context_bucket, traffic, grader). The select boxes are bound to the URL by Streamlit itself
(``bind="query-params"``). The time range is written to the URL on every run, even when it is
the default, because its default moves with the newest data: a link must keep its weeks.
``until`` is an inclusive date in the URL, as a reader expects; the query gets the day after.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from midtrace.dashboard import labels

DEFAULT_WEEKS = 8
TRAFFIC = ("production", "experiment", "all")
TRAFFIC_NOTES = {
    "production": "Counting production traffic: requests of no experiment (sweeps and replays "
                  "are left out; switch Traffic to see them).",
    "experiment": "Counting experiment traffic only: sweeps and replays.",
    "all": "Counting all traffic: production and experiments together.",
}
GRADERS = ("all", "person", "references", "judge")
GRADER_NOTES = {
    "all": "Grades from every grader count: a person's over the reference answers' over the "
           "LLM judge's.",
    "person": "Only a person's grades count; requests no person graded show as ungraded.",
    "references": "Only the reference answers' grades count (midtrace grade --references).",
    "judge": "Only the LLM judge's grades count (midtrace grade --judge-model).",
}
SHOWN = {"model": labels.model, "template": labels.template}  # how an option reads
SELECT_KEYS = ("service", "model", "template", "strategy", "context_bucket")
CONTEXT_BUCKETS = ("<4k", "4k-16k", "16k-64k", "64k+")
LABELS = {"service": "Service", "model": "Model", "template": "Prompt template",
          "strategy": "Packing strategy", "context_bucket": "Context length"}


def _as_date(value: Any) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).date()
    except ValueError:
        return None


def data_range(facets: dict[str, Any]) -> tuple[date, date] | None:
    """The first and last day holding data, from the facets' time range."""
    span = facets.get("time") or facets.get("time_range") or {}
    lo, hi = _as_date(span.get("min")), _as_date(span.get("max"))
    if lo is None or hi is None:
        return None
    return lo, hi


def default_range(first: date, last: date, weeks: int = DEFAULT_WEEKS) -> tuple[date, date]:
    """The last ``weeks`` ISO weeks up to the newest data (not up to today)."""
    monday = last - timedelta(days=last.weekday())
    return max(first, monday - timedelta(weeks=weeks - 1)), last


def _clamp(d: date, lo: date, hi: date) -> date:
    return min(max(d, lo), hi)


def _sync_date(key: str, default: date, lo: date, hi: date) -> None:
    """Adopt the URL's value when it changed since we last wrote it (a followed link)."""
    seen: dict[str, str] = st.session_state.setdefault("_url_seen", {})
    widget = f"f_{key}"
    raw = st.query_params.get(key)
    parsed = _as_date(raw)
    if raw and raw != seen.get(key) and parsed is not None:
        st.session_state[widget] = _clamp(parsed, lo, hi)
    elif widget not in st.session_state:
        st.session_state[widget] = default
    else:
        st.session_state[widget] = _clamp(st.session_state[widget], lo, hi)


def _write_date(key: str, value: date) -> None:
    text = value.isoformat()
    st.session_state.setdefault("_url_seen", {})[key] = text
    if st.query_params.get(key) != text:
        st.query_params[key] = text


def sidebar(facets: dict[str, Any]) -> dict[str, str]:
    """Draw the filters; returns the URL parameters they amount to (the query's filters)."""
    bounds = data_range(facets)
    params: dict[str, str] = {}
    with st.sidebar:
        st.subheader("Filters")
        if bounds is not None:
            first, last = bounds
            d_since, d_until = default_range(first, last)
            _sync_date("since", d_since, first, last)
            _sync_date("until", d_until, first, last)
            since = st.date_input("From", key="f_since", min_value=first, max_value=last,
                                  format="YYYY-MM-DD")
            until = st.date_input("To (inclusive)", key="f_until", min_value=first,
                                  max_value=last, format="YYYY-MM-DD")
            if since > until:
                since, until = until, since
            _write_date("since", since)
            _write_date("until", until)
            st.caption(f"Data from {first:%d %b %Y} to {last:%d %b %Y} (UTC). Default: the "
                       f"last {DEFAULT_WEEKS} weeks of data.")
            params["since"] = since.isoformat()
            params["until"] = until.isoformat()
        traffic = st.selectbox("Traffic", TRAFFIC, index=0, key="traffic", bind="query-params",
                               help="Production is every request that belongs to no experiment; "
                                    "experiments are sweeps and replays.")
        if traffic and traffic != "production":
            params["traffic"] = str(traffic)
        # the options as the query API spells them: the URL carries the shown value
        grader = st.selectbox("Grades", GRADERS, index=0, key="grader", bind="query-params",
                              help="Whose grades count: all (a person's over the reference "
                                   "answers' over the LLM judge's), person, references "
                                   "(midtrace grade --references) or judge (the LLM judge).")
        if grader and grader != "all":
            params["grader"] = str(grader)
        for key in SELECT_KEYS:
            options = _options(facets, key)
            if not options and key != "context_bucket":
                continue
            value = st.selectbox(LABELS[key], options, index=None, key=key,
                                 placeholder="All", bind="query-params",
                                 format_func=SHOWN.get(key, str))
            if value:
                params[key] = str(value)
    return params


def _options(facets: dict[str, Any], key: str) -> list[str]:
    if key == "context_bucket":
        present = facets.get("context_bucket") or facets.get("context_buckets")
        return [b for b in CONTEXT_BUCKETS if not present or b in present]
    values = facets.get(key) or facets.get(f"{key}s") or []
    return sorted(str(v) for v in values if v is not None)


def query_params(params: dict[str, str]) -> dict[str, str]:
    """URL filter values → the query API's: ``until`` becomes exclusive (the next day)."""
    out = dict(params)
    until = _as_date(out.get("until"))
    if until is not None:
        out["until"] = (until + timedelta(days=1)).isoformat()
    return out


def current() -> dict[str, str]:
    """The filters the router drew on this run (for the page it is running)."""
    params: dict[str, str] = st.session_state.get("_params", {})
    return params


def traffic_note(default: str = "production") -> str:
    """The sentences a page shows under its title: which traffic and whose grades it counts."""
    return (TRAFFIC_NOTES[current().get("traffic", default)] + " "
            + GRADER_NOTES[current().get("grader", "all")])


def inspect_link(trace_id: str) -> str:
    """A link to one trace in the inspector that keeps the current filters (dates, traffic,
    service...), so the inspector's lists and the way back stay in the same slice."""
    return "./inspector?" + urlencode({**current(), "trace_id": trace_id})


def experiment_link(experiment: str) -> str:
    """A link to one experiment on the Experiments page, in the current date range (the
    other filters describe the production request it was linked from, not the experiment)."""
    kept = {k: v for k, v in current().items() if k in ("since", "until", "grader")}
    return "./experiments?" + urlencode({**kept, "experiment": experiment})
