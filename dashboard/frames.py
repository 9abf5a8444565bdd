"""Shaping metric-view frames for display: pure pandas, no Streamlit, no SQL.

The numbers themselves come from the views in schemas/sql/views/; this module only picks
weeks, sums a view's counts across a group the page does not show, and ranks changes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import date
from typing import Any

import pandas as pd

from midtrace import findings
from midtrace.schemas.stats import wilson


def newest_week(frame: pd.DataFrame) -> date | None:
    if frame.empty or "week" not in frame:
        return None
    return pd.Timestamp(frame["week"].max()).date()


def last_two_weeks(frame: pd.DataFrame,
                   value: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The newest week's row and the week before's (None where a week has no row)."""
    if frame.empty or "week" not in frame:
        return None, None
    ordered = frame.assign(_w=pd.to_datetime(frame["week"])).sort_values("_w")
    last = ordered["_w"].max()
    cur = ordered[ordered["_w"] == last]
    prev = ordered[ordered["_w"] == last - pd.Timedelta(days=7)]
    return (cur.iloc[0].to_dict() if not cur.empty else None,
            prev.iloc[0].to_dict() if not prev.empty else None)


def weekly_recall(frame: pd.DataFrame) -> pd.DataFrame:
    """constraint_recall grouped by week (and its context bucket) → one row per week."""
    cols = ["week", "required", "recalled", "recall", "ci_low", "ci_high"]
    if frame.empty:
        return pd.DataFrame(columns=cols)
    by_week = frame.groupby("week", as_index=False)[["required", "recalled"]].sum()
    by_week["recall"] = by_week["recalled"] / by_week["required"].where(by_week["required"] > 0)
    intervals = [wilson(int(r), int(n)) for r, n in
                 zip(by_week["recalled"], by_week["required"], strict=True)]
    by_week["ci_low"] = [math.nan if lo is None else lo for lo, _ in intervals]
    by_week["ci_high"] = [math.nan if hi is None else hi for _, hi in intervals]
    return by_week[cols]


def slice_moves(parts: Iterable[tuple[str, pd.DataFrame]], min_n: float,
                value: str = "accuracy", n: str = "graded", x: str = "correct") -> pd.DataFrame:
    """Per slice, the change of ``value`` (``x`` of ``n``) from the week before the newest
    week to the newest.

    ``parts`` pairs a dimension with weekly_overview grouped by (dimension, week). ``kind`` is
    ``moved`` (data in both weeks), ``new`` (none the week before: a template in its first
    week) or ``vanished`` (none in the newest week). A move is ``called`` (coloured better or
    worse) by the findings' test (midtrace.findings.judge_change: p < 0.05 and both weeks at
    least ``min_n``, the database's setting). New and vanished slices come first, then the
    moves by the size of the change, biggest first.
    """
    counted = findings.Metric(value, value, "", x, n, n, True)
    rows = []
    for dim, frame in parts:
        if frame.empty or dim not in frame:
            continue
        last = pd.Timestamp(pd.to_datetime(frame["week"]).max()).date()
        for s in findings.slice_weeks(findings.weekly_counts(frame, counted, [dim]), dim, last):
            n_cur, n_prev = int(s.after_total), int(s.before_total)
            if n_cur == 0 and n_prev == 0:
                continue
            kind = "new" if n_prev == 0 else "vanished" if n_cur == 0 else "moved"
            after = s.after_count / n_cur if n_cur else math.nan
            before = s.before_count / n_prev if n_prev else math.nan
            called, z, p = (findings.judge_change(s.before_count, n_prev, s.after_count, n_cur,
                                                  min_n)
                            if kind == "moved" else (False, None, None))
            rows.append({"dimension": dim, "value": str(s.value), "slice": f"{dim}: {s.value}",
                         "kind": kind, "before": before, "after": after, "delta": after - before,
                         "n": n_cur, "n_before": n_prev, "z": z, "p_value": p,
                         "called": called, "small": min(n_cur, n_prev) < min_n})
    cols = ["dimension", "value", "slice", "kind", "before", "after", "delta", "n", "n_before",
            "z", "p_value", "called", "small"]
    out = pd.DataFrame(rows, columns=cols)
    if out.empty:
        return out
    rank = out.assign(_k=out["kind"].map({"new": 0, "vanished": 1, "moved": 2}),
                      _a=-out["delta"].abs().fillna(0))
    return out.loc[rank.sort_values(["_k", "_a"], kind="stable").index].reset_index(drop=True)


change_called = findings.change_called


def constraint_recall(required: Iterable[Any], recalled: Iterable[Any] | None) -> pd.DataFrame:
    """One row per required constraint (in the outcome's order) and whether the answer kept
    it: the outcome's ``recalled_constraints`` (docs/metrics.md, constraint recall)."""
    kept = set(map(str, recalled or ()))
    names = list(dict.fromkeys(map(str, required)))
    return pd.DataFrame({"constraint": names, "recalled": [n in kept for n in names]})


def arrivals(moves: pd.DataFrame) -> list[str]:
    """One line per slice that is new this week or had no graded traffic in it (slice_moves
    rows of kind ``new`` or ``vanished``): a new template is what a reviewer must see."""
    if moves.empty:
        return []
    lines = []
    for r in moves[moves["kind"] != "moved"].itertuples():
        if r.kind == "new":
            lines.append(f"{r.slice}: first seen this week, accuracy {r.after:.0%} "
                         f"of {r.n:,} graded")
        else:
            lines.append(f"{r.slice}: no graded traffic this week (the week before: "
                         f"{r.before:.0%} of {r.n_before:,} graded)")
    return lines


def layout_difference(conditions: pd.DataFrame, a: str, b: str,
                      order: list[str]) -> pd.DataFrame:
    """sweep_conditions rows of strategies a and b → per condition: both accuracies, B − A."""
    cols = ["condition", "accuracy_a", "accuracy_b", "difference", "n_a", "n_b"]
    pick = {s: conditions[conditions["strategy"].astype(str) == s].set_index("condition")
            for s in (a, b)}
    shared = [c for c in order if c in pick[a].index and c in pick[b].index]
    if not shared:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({"condition": shared,
                        "accuracy_a": pick[a].loc[shared, "accuracy"].astype(float).values,
                        "accuracy_b": pick[b].loc[shared, "accuracy"].astype(float).values,
                        "n_a": pick[a].loc[shared, "n"].values,
                        "n_b": pick[b].loc[shared, "n"].values})
    out["difference"] = out["accuracy_b"] - out["accuracy_a"]
    return out[cols]


NAMED_PLACEMENTS = ("first", "start", "early", "start_end", "middle", "late", "end", "last")


def condition_order(values: Iterable[Any]) -> list[str]:
    """Placement conditions in prompt order: named ones first, then rank_1, rank_2, ...,
    rank_10 (numbers compared as numbers), the closed-book 'absent' last."""
    present = {str(v) for v in values if v is not None and not pd.isna(v)}

    def key(c: str) -> tuple[int, int, list[Any]]:
        named = NAMED_PLACEMENTS.index(c) if c in NAMED_PLACEMENTS else len(NAMED_PLACEMENTS)
        parts = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", c)]
        return (c == "absent", named, parts)

    return sorted(present, key=key)


def requests_per_k(frame: pd.DataFrame) -> list[int]:
    """The prompt sizes k in accuracy_by_slot, most requests first."""
    if frame.empty or "k" not in frame:
        return []
    totals = frame.groupby("k")["requests"].sum().sort_values(ascending=False)
    return [int(k) for k in totals.index]


PLACEMENT_COLUMNS = ("slot", "chunk_id", "label", "is_decisive", "is_cited", "band", "token_start",
                     "token_end", "source_id", "authority", "retrieval_rank", "retrieval_score",
                     "rerank_rank", "rerank_score", "updated")


def placed_chunks(trace: dict[str, Any]) -> pd.DataFrame:
    """One row per placement in prompt order, with its chunk's facts (the inspector's strip)."""
    placements = pd.DataFrame(trace.get("placements") or [])
    chunks = pd.DataFrame(trace.get("chunks") or [])
    if placements.empty:
        return pd.DataFrame(columns=[*PLACEMENT_COLUMNS, "prompt_index", "text"])
    if chunks.empty:
        chunks = pd.DataFrame(columns=["chunk_id"])
    merged = placements.merge(chunks.drop_duplicates("chunk_id"), on="chunk_id", how="left",
                              suffixes=("", "_chunk"))
    merged = merged.sort_values("prompt_index").reset_index(drop=True)
    if "slot" not in merged:
        merged["slot"] = range(1, len(merged) + 1)
    for col in PLACEMENT_COLUMNS:
        if col not in merged:
            merged[col] = None
    merged["decisive"] = merged["is_decisive"].fillna(False).astype(bool)
    merged["cited"] = merged["is_cited"].fillna(False).astype(bool)
    return merged


def unplaced_chunks(trace: dict[str, Any]) -> pd.DataFrame:
    """Chunks that never reached the prompt (retrieved or reranked only, or dropped)."""
    chunks = pd.DataFrame(trace.get("chunks") or [])
    if chunks.empty:
        return pd.DataFrame(columns=["chunk_id", "stage", "drop_reason"])
    placed = {p.get("chunk_id") for p in trace.get("placements") or []}
    out = chunks[~chunks["chunk_id"].isin(placed)]
    return out.reset_index(drop=True)


def citations(trace: dict[str, Any], placed: pd.DataFrame) -> pd.DataFrame:
    """The answer's citations in the order it gave them, each tied to its chunk."""
    request = trace.get("request") or {}
    chunks = {c.get("chunk_id"): c for c in trace.get("chunks") or []}
    order = list(request.get("cited_ids") or [])
    order += [c for c, ch in chunks.items() if ch.get("is_cited") and c not in order]
    rows = []
    for i, cid in enumerate(order, start=1):
        ch = chunks.get(cid, {})
        at = placed[placed["chunk_id"] == cid] if not placed.empty else placed
        rows.append({
            "citation": i, "chunk_id": cid,
            "slot": int(at["slot"].iloc[0]) if not at.empty else None,
            "band": at["band"].iloc[0] if not at.empty else ("not in prompt" if ch else "unknown"),
            "label": ch.get("label"), "decisive": bool(ch.get("is_decisive")),
            "source_id": ch.get("source_id"), "authority": ch.get("authority"),
        })
    return pd.DataFrame(rows, columns=["citation", "chunk_id", "slot", "band", "label",
                                       "decisive", "source_id", "authority"])
