"""How values and columns read on the pages: human column names, rates as percentages, a
three-state correct, and the ids zero-code traces carry (64-hex chunk ids, templates known
only by their content hash, no model name) said plainly.

Pure functions over values and frames; the pages and ui.table apply them. The CSV downloads
keep the raw columns and values, which is what a script or spreadsheet reading them wants.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from midtrace.report_cells import COLUMN_NAMES, SHARES
from midtrace.report_cells import SCORES as REPORT_SCORES

HASH_TEMPLATE = "sha256:"  # an inferred template id: its content hash (docs/zero-code.md)
LONG_ID = re.compile(r"^[0-9a-f]{40,}$")  # a content-hash chunk id (64 hex) or similar
SHORT = 8

# The dashboard's own columns (the inspector's chunk tables, the request lists) and the
# words it says differently from the report; every metric column is named as the report
# names it (midtrace/report_cells.py), in the dashboard's lower case.
COLUMNS = {
    "time": "time (UTC)", "question": "question", "answer": "answer", "correct": "correct",
    "taxonomy_class": "failure class", "class": "failure class", "n": "graded",
    "decisive_slot": "decisive slot", "k": "chunks (k)", "template_id": "template",
    "trace_id": "trace id", "chunk_id": "chunk", "chunk_full_id": "chunk id (full)",
    "is_decisive": "decisive", "is_cited": "cited", "token_start": "first token",
    "token_end": "end token", "retrieval_rank": "retrieval rank",
    "retrieval_score": "retrieval score", "rerank_rank": "rerank rank",
    "rerank_score": "rerank score", "drop_reason": "drop reason", "updated": "updated",
    "band": "band", "slot": "slot", "label": "label", "stage": "stage", "case_id": "case",
    "instead_of_decisive": "…and no decisive chunk", "tokens": "tokens",
    "retrieval": "retrieval", "rerank": "rerank", "decisive_edge_band": "decisive at an edge",
}
# Columns that hold a share in [0, 1], shown as a percentage; scores in [0, 1] that are not
# shares, to three decimals.
RATES = SHARES | {"sensitivity_delta", "constraint_recall", "consistency"}
SCORES = REPORT_SCORES | {"retrieval_score", "rerank_score", "mrr", "ndcg"}


def column(name: str) -> str:
    if name in COLUMNS:
        return COLUMNS[name]
    if name in COLUMN_NAMES:
        named = COLUMN_NAMES[name]
        return named if named[1:2].isupper() else named[:1].lower() + named[1:]
    return name.replace("_", " ")


def is_rate(name: str) -> bool:
    return name in RATES or name.endswith("_rate") or name.endswith("_share")


def correct(value: Any) -> str:
    """right / wrong / not graded: never a checkbox that reads as 'no' when nobody graded."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return "not graded"
    return "right" if bool(value) else "wrong"


def yes_no(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return "—"
    return "yes" if bool(value) else "no"


def short_id(value: Any) -> str:
    """A content-hash id (64 hex digits from zero-code traces) cut to its first 8, marked."""
    text = "" if value is None else str(value)
    return text[:SHORT] + "…" if LONG_ID.match(text) else text


def template(value: Any) -> str:
    """A template known only by its content hash says so: 'unnamed template 63b2…'."""
    if value is None or (isinstance(value, float) and value != value):
        return "no template"
    text = str(value)
    if text.startswith(HASH_TEMPLATE):
        return f"unnamed template {text[len(HASH_TEMPLATE):][:4]}…"
    return text


def model(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value) or str(value) == "":
        return "unknown model"
    return str(value)


def slice_label(dimension: str, value: Any) -> str:
    """'template: unnamed template 63b2…', 'model: unknown model', 'strategy: edge'."""
    shown = template(value) if dimension in ("template", "template_id") else \
        model(value) if dimension == "model" else str(value)
    return f"{dimension}: {shown}"


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as a table shows it: values said plainly (three-state correct, yes/no,
    short ids, template and model names). Column names are left to ``column`` (the
    table's column configuration), so selections still index the same rows."""
    out = frame.copy()
    for name in out.columns:
        series = out[name]
        if name == "correct":
            out[name] = series.map(correct)
        elif name in ("template", "template_id"):
            out[name] = series.map(template)
        elif name == "model":
            out[name] = series.map(model)
        elif name in ("chunk_id", "decisive_chunk_id") or name.endswith("chunk_ids"):
            out[name] = series.map(lambda v: short_id(v) if not isinstance(v, list | tuple)
                                   else ", ".join(short_id(x) for x in v))
        elif series.dtype == bool or name in ("is_decisive", "is_cited", "decisive", "cited",
                                              "tokens_estimated"):
            out[name] = series.map(yes_no)
    if "chunk_id" in frame and frame["chunk_id"].map(
            lambda v: bool(LONG_ID.match(str(v)))).any():
        out["chunk_full_id"] = frame["chunk_id"].astype(str)  # to copy the whole id
    return out


def column_config(frame: pd.DataFrame, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Human names for every column of ``frame``, rates as percentages, scores to three
    decimals; ``given`` (a page's own configuration) wins."""
    import streamlit as st  # only the pages need it: the functions above stay pure

    config: dict[str, Any] = {}
    for name in frame.columns:
        label = column(str(name))
        if is_rate(str(name)):
            config[name] = st.column_config.NumberColumn(label, format="percent")
        elif str(name) in SCORES:
            config[name] = st.column_config.NumberColumn(label, format="%.3f")
        elif str(name) in ("requests", "graded", "n") or str(name).endswith("_cases"):
            config[name] = st.column_config.NumberColumn(label, format="localized")
        else:
            config[name] = label
    config.update(given or {})
    return config
