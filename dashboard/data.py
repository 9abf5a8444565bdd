"""Data access for the pages: one cached client, query results cached by filter values.

The source comes from the environment `midtrace dashboard` sets (midtrace/supervise.py):
MIDTRACE_URL (a collector's query API) or MIDTRACE_DB (a store opened read-only: a DuckDB file,
or a ClickHouse store's URL).
Every cached function takes the filters as a sorted tuple of URL parameters, so the cache key
is exactly what the URL says.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from midtrace.supervise import ENV_DB, ENV_REQUIRE_TOKEN, ENV_TOKEN, ENV_URL, is_clickhouse
from midtrace.client import Filters, open_client

Params = tuple[tuple[str, str], ...]

# A collector keeps receiving traces, so its answers go stale, and so may a ClickHouse store,
# which others write; a DuckDB file opened read-only does not change under us.
LIVE_TTL_SECONDS = 30

# Shown while a query runs, only when its answer is not cached yet: a spinner around every
# call would start a timer thread per call even when the answer is cached (what most runs are).
QUERYING = "Querying…"


def source() -> dict[str, str | None]:
    return {"url": os.environ.get(ENV_URL) or None, "db": os.environ.get(ENV_DB) or None,
            "token": os.environ.get(ENV_TOKEN) or None}


def token_required() -> bool:
    return os.environ.get(ENV_REQUIRE_TOKEN) == "1"


def describe_source() -> str:
    s = source()
    if s["url"]:
        return f"collector {s['url']}"
    if s["db"] and is_clickhouse(s["db"]):
        return f"{s['db']} (read-only)"
    if s["db"]:
        return f"{os.path.basename(s['db'])} (read-only)"
    return "no source"


@st.cache_resource(show_spinner=False)
def _client(url: str | None, db: str | None, token: str | None) -> Any:
    if url:
        return open_client(url=url, token=token)
    return open_client(db=db)


def client() -> Any:
    s = source()
    if not s["url"] and not s["db"]:
        raise RuntimeError("no data source: start the dashboard with `midtrace dashboard --url "
                           "URL` or `midtrace dashboard --db PATH`")
    return _client(s["url"], s["db"], s["token"])


def read_only() -> bool:
    return bool(client().read_only)


def params_key(params: Mapping[str, str | None]) -> Params:
    return tuple(sorted((k, str(v)) for k, v in params.items() if v not in (None, "")))


def filters(params: Params) -> Any:
    return Filters.from_params(dict(params))


Source = tuple[str | None, str | None, int]


def _src() -> Source:
    """Part of every cache key: answers from one source never serve another, and answers from
    a live collector or a ClickHouse store age out after LIVE_TTL_SECONDS (a file opened
    read-only never changes)."""
    s = source()
    live = s["url"] or (s["db"] and is_clickhouse(s["db"]))
    epoch = int(time.time() // LIVE_TTL_SECONDS) if live else 0
    return s["url"], s["db"], epoch


@st.cache_data(show_spinner=QUERYING, show_time=True, max_entries=512)
def _view(src: Source, name: str, params: Params, group_by: tuple[str, ...]) -> pd.DataFrame:
    return client().view(name, filters=filters(params), group_by=group_by)


def view(name: str, params: Params, group_by: tuple[str, ...] = ()) -> pd.DataFrame:
    """A metric view under the filters ``params``, grouped by ``group_by`` (cached)."""
    return _view(_src(), name, params, tuple(group_by))


@st.cache_data(show_spinner=QUERYING, show_time=True, max_entries=256)
def _requests(src: Source, params: Params, search: str | None, taxonomy_class: str | None,
              limit: int, offset: int) -> pd.DataFrame:
    return client().requests(filters(params), search=search, taxonomy_class=taxonomy_class,
                             limit=limit, offset=offset)


def requests(params: Params, search: str | None = None, taxonomy_class: str | None = None,
             limit: int = 50, offset: int = 0) -> pd.DataFrame:
    """One page of requests, newest first (cached)."""
    return _requests(_src(), params, search, taxonomy_class, limit, offset)


@st.cache_data(show_spinner=QUERYING, show_time=True, max_entries=256)
def _requests_page(src: Source, params: Params, search: str | None, taxonomy_class: str | None,
                   limit: int, offset: int) -> tuple[pd.DataFrame, int]:
    frame, total = client().requests_page(filters(params), search=search,
                                          taxonomy_class=taxonomy_class, limit=limit,
                                          offset=offset)
    return frame, int(total)


def requests_page(params: Params, search: str | None = None, taxonomy_class: str | None = None,
                  limit: int = 50, offset: int = 0) -> tuple[pd.DataFrame, int]:
    """One page of requests, newest first, and how many match in all (cached)."""
    return _requests_page(_src(), params, search, taxonomy_class, limit, offset)


@st.cache_data(show_spinner=QUERYING, show_time=True, max_entries=256)
def _trace(src: Source, trace_id: str) -> dict[str, Any] | None:
    result: dict[str, Any] | None = client().trace(trace_id)
    return result


def trace(trace_id: str) -> dict[str, Any] | None:
    return _trace(_src(), trace_id)


def trace_ids(params: Params, search: str | None, taxonomy_class: str | None,
              limit: int) -> list[str]:
    """The trace ids of the requests under the filters, newest first, at most ``limit``."""
    from midtrace.sweep.from_traces import trace_ids as matching

    return matching(client(), filters(params), taxonomy_class, search, limit)


@st.cache_data(show_spinner=QUERYING, show_time=True, max_entries=16)
def _facets(src: Source) -> dict[str, Any]:
    result: dict[str, Any] = client().facets()
    return result


def facets() -> dict[str, Any]:
    return _facets(_src())


@st.cache_data(show_spinner=False, max_entries=16)
def _settings(src: Source) -> dict[str, float]:
    result: dict[str, float] = client().settings()
    return result


def settings() -> dict[str, float]:
    """The settings the metric views applied (docs/metrics.md, "Settings"): a page that draws
    a threshold (min_n, the band edges) draws the one behind its numbers."""
    return _settings(_src())


def post_outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """Send a grade to the collector, wait until the collector has derived everything it
    acknowledged (the query API's freshness wait, docs/query-api.md), then forget cached
    answers, so every page re-reads with the grade counted."""
    result: dict[str, Any] = client().post_outcome(outcome)
    fresh_reads()
    return result


def fresh_reads() -> None:
    """Wait until the collector behind the dashboard has derived everything it acknowledged
    (the query API's freshness wait), then forget cached answers: every page re-reads with
    what was just sent counted."""
    s = source()
    if s["url"]:
        fresh = open_client(url=s["url"], token=s["token"], fresh=True)
        try:
            fresh.settings()  # answers once the collector's derived rows are current
        finally:
            fresh.close()
    st.cache_data.clear()


# --- replays from the inspector (docs/replay.md, "From the dashboard") -----------------------
ENV_REPLAY_ENDPOINT = "MIDTRACE_SWEEP_ENDPOINT"
ENV_REPLAY_MODEL = "MIDTRACE_SWEEP_MODEL"
REPLAY_MAX_TOKENS = 100


def replay_endpoint() -> str | None:
    """The one endpoint the dashboard may spend calls on: the one its environment names when
    it starts. A page never takes an endpoint or a key from its visitor, so the keys in the
    dashboard's environment go to no address a visitor chose."""
    return os.environ.get(ENV_REPLAY_ENDPOINT) or None


def replay_default_model() -> str | None:
    return os.environ.get(ENV_REPLAY_MODEL) or None


def replay_plan(trace: dict[str, Any], answers: list[str], strategies: str, repeats: int,
                model: str) -> Any:
    """The replay of ``trace`` the form describes (midtrace.sweep.replay.Plan), or why there
    is none (a string)."""
    from midtrace.references import Reference, question_key
    from midtrace.sweep import replay as rp
    from midtrace.sweep.conditions import ConditionError, parse_strategies

    try:
        names = parse_strategies(strategies)
    except ConditionError as e:
        return str(e)
    question = (trace.get("request") or {}).get("question")
    refs = ({question_key(question): Reference(0, question, tuple(answers))}
            if isinstance(question, str) and answers else {})
    made = rp.incident_from_trace(trace, refs, client().prompts(str(trace["trace_id"])))
    if isinstance(made, str):
        return made.replace("no --references line has its question",
                            "give the accepted answers")
    return rp.plan(made, names, repeats, rp.default_experiment(made.trace_id, model))


def replay_estimate(plan: Any, model: str) -> tuple[float | None, bool]:
    """The estimated cost of a plan's calls (prompt characters / 4 in, the most answer tokens
    out, by the price table) and whether its prices are examples; None when the model is not
    in the table."""
    from midtrace.prices import PriceError, load_prices, prices_path

    try:
        price = load_prices(prices_path()).get(model)
    except PriceError:
        price = None
    if price is None:
        return None, False
    return (price.cost(plan.estimated_prompt_tokens(), len(plan.trials) * REPLAY_MAX_TOKENS),
            price.example)


def run_replay(plan: Any, model: str) -> Any:
    """Spend the plan's calls on the configured endpoint, recording the replays through the
    collector behind the dashboard; then every page re-reads."""
    from midtrace.sweep import replay as rp
    from midtrace.sweep.client import ChatClient, api_key_from_env
    from midtrace.sweep.recording import OtlpSink, Recorder

    s = source()
    endpoint = replay_endpoint()
    if not s["url"] or not endpoint:
        raise rp.ReplayError("replays need a collector behind the dashboard and "
                             f"{ENV_REPLAY_ENDPOINT} set when it starts")
    chat = ChatClient(endpoint, model, api_key=api_key_from_env(os.environ),
                      max_tokens=REPLAY_MAX_TOKENS, concurrency=4)
    recorder = Recorder(OtlpSink(s["url"], s["token"]), service="midtrace-replay")
    try:
        result = rp.run(plan, chat, recorder, model)
    finally:
        chat.close()
        recorder.close()
    fresh_reads()  # the replays are acknowledged; the inspector lists them once derived
    return result
