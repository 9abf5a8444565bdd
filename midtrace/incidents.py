"""The incidents of the week: wrong answers whose decisive evidence was in the prompt and still
lost (taxonomy classes ``buried`` and ``unused``), grouped by question.

Each question's newest few requests are read in full, to say where the decisive evidence sat
and what the answer cited instead. ``read_incidents`` is the only part that reads; the rest
are plain functions of what it read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pandas as pd

if TYPE_CHECKING:
    from midtrace.client import Client, Filters

CLASSES = ("buried", "unused")
MAX_QUESTIONS = 6
TRACES_PER_QUESTION = 3
PAGE = 1000
MAX_ROWS = 20_000  # a week with more incidents than this is counted from its first pages


def inspector_url(dashboard_url: str, trace_id: str) -> str:
    """The dashboard's inspector showing one trace (docs/dashboard.md)."""
    return f"{dashboard_url.rstrip('/')}/inspector?trace_id={quote(trace_id, safe='')}"


def week_filters(filters: Filters, week: date) -> Filters:
    """``filters`` narrowed to the ISO week starting ``week`` (within their own range)."""
    start = datetime.combine(week, time(0), tzinfo=UTC)
    end = start + timedelta(days=7)
    since = max(start, filters.since) if filters.since else start
    until = min(end, filters.until) if filters.until else end
    return dataclasses.replace(filters, since=since, until=until)


def group_questions(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """requests rows (buried or unused) grouped by question: the most frequent first, each with
    its counts per class and its trace ids newest first."""
    if rows.empty:
        return []
    frame = rows.assign(question=rows["question"].fillna(""),
                        time=pd.to_datetime(rows["time"], utc=True))
    groups = []
    for question, part in frame.groupby("question", sort=False):
        part = part.sort_values("time", ascending=False)
        groups.append({
            "question": str(question) or None,
            "requests": int(len(part)),
            "classes": {c: int((part["taxonomy_class"] == c).sum()) for c in CLASSES},
            "newest": part["time"].iloc[0],
            "trace_ids": [str(t) for t in part["trace_id"]],
        })
    groups.sort(key=lambda g: (-g["requests"], -g["newest"].timestamp()))
    for g in groups:
        g.pop("newest")
    return groups


def _position(chunk: dict[str, Any] | None, placement: dict[str, Any] | None) -> dict[str, Any]:
    chunk = chunk or {}
    return {"chunk_id": chunk.get("chunk_id"), "source_id": chunk.get("source_id"),
            "authority": chunk.get("authority"), "label": chunk.get("label"),
            "decisive": bool(chunk.get("is_decisive")),
            "slot": placement.get("slot") if placement else None,
            "band": placement.get("band") if placement else None}


def describe_trace(trace: dict[str, Any], dashboard_url: str | None = None) -> dict[str, Any]:
    """One incident request: where its decisive evidence sat and what its answer cited."""
    request = trace.get("request") or {}
    chunks = {c.get("chunk_id"): c for c in trace.get("chunks") or []}
    placements: dict[Any, dict[str, Any]] = {}
    for p in sorted(trace.get("placements") or [], key=lambda p: p.get("prompt_index") or 0):
        placements.setdefault(p.get("chunk_id"), p)
    cited_ids = list(request.get("cited_ids") or [])
    cited_ids += [cid for cid, c in chunks.items() if c.get("is_cited") and cid not in cited_ids]
    decisive = [_position(c, placements.get(cid)) for cid, c in chunks.items()
                if c.get("is_decisive") and cid in placements]
    decisive.sort(key=lambda d: d["slot"] or 0)
    out = {
        "trace_id": trace.get("trace_id"),
        "time": request.get("time"),
        "model": request.get("model"),
        "template": request.get("template_id"),
        "class": trace.get("taxonomy_class"),
        "k": request.get("k"),
        "decisive": decisive,
        "cited": [_position(chunks.get(cid, {"chunk_id": cid}), placements.get(cid))
                  for cid in cited_ids],
        "answer": request.get("answer"),
    }
    if dashboard_url:
        out["inspector_url"] = inspector_url(dashboard_url, str(trace.get("trace_id")))
    return out


def _rows(client: Client, filters: Filters, classes: Iterable[str]) -> pd.DataFrame:
    frames = []
    for cls in classes:
        offset = 0
        while offset < MAX_ROWS:
            page, total = client.requests_page(filters, taxonomy_class=cls, limit=PAGE,
                                               offset=offset)
            frames.append(page)
            offset += PAGE
            if offset >= total or page.empty:
                break
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def read_incidents(client: Client, filters: Filters, week: date,
                   dashboard_url: str | None = None, classes: Sequence[str] = CLASSES,
                   limit: int = MAX_QUESTIONS) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The incidents of the ISO week starting ``week``, grouped by question, the most frequent
    ``limit`` questions (docs/report-schema.md, ``incidents``), and the totals of all:
    ``{"questions": ..., "requests": ...}``."""
    every = group_questions(_rows(client, week_filters(filters, week), classes))
    totals = {"questions": len(every), "requests": sum(g["requests"] for g in every)}
    groups = every[:limit]
    for g in groups:
        traces = [client.trace(t) for t in g["trace_ids"][:TRACES_PER_QUESTION]]
        g["traces"] = [describe_trace(t, dashboard_url) for t in traces if t is not None]
        del g["trace_ids"]
    return groups, totals
