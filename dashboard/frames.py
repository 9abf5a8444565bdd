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
from midtrace.dashboard import labels
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
    week to the newest. A slice new this week is compared with the whole of its dimension
    the week before (``versus`` = ``all``: a new template against all traffic), so a
    template that regresses shows in the week it starts.

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
        weeks = findings.slice_weeks(findings.weekly_counts(frame, counted, [dim]), dim, last)
        # a new slice is measured against the whole traffic of the week before
        all_x = sum(s.before_count for s in weeks)
        all_n = int(sum(s.before_total for s in weeks))
        for s in weeks:
            n_cur, n_prev = int(s.after_total), int(s.before_total)
            if n_cur == 0 and n_prev == 0:
                continue
            kind = "new" if n_prev == 0 else "vanished" if n_cur == 0 else "moved"
            after = s.after_count / n_cur if n_cur else math.nan
            before = s.before_count / n_prev if n_prev else math.nan
            x_prev, versus = s.before_count, "the slice"
            if kind == "new" and all_n:  # against every slice of the week before
                before, x_prev, n_prev, versus = all_x / all_n, all_x, all_n, "all"
            called, z, p = (findings.judge_change(x_prev, n_prev, s.after_count, n_cur, min_n)
                            if kind == "moved" or (kind == "new" and n_prev)
                            else (False, None, None))
            rows.append({"dimension": dim, "value": str(s.value),
                         "slice": labels.slice_label(dim, s.value), "kind": kind,
                         "versus": versus, "before": before, "after": after,
                         "delta": after - before, "n": n_cur, "n_before": n_prev, "z": z,
                         "p_value": p, "called": called, "small": min(n_cur, n_prev) < min_n})
    cols = ["dimension", "value", "slice", "kind", "versus", "before", "after", "delta", "n",
            "n_before", "z", "p_value", "called", "small"]
    out = pd.DataFrame(rows, columns=cols)
    if out.empty:
        return out
    rank = out.assign(_k=out["kind"].map({"new": 0, "vanished": 1, "moved": 2}),
                      _a=-out["delta"].abs().fillna(0))
    return out.loc[rank.sort_values(["_k", "_a"], kind="stable").index].reset_index(drop=True)


def at_least(frame: pd.DataFrame, min_n: float, split: str | None,
             n: str = "n") -> tuple[pd.DataFrame, int]:
    """A split chart's points with at least ``min_n`` graded requests, and how many were
    hidden: a slice's point over a handful of requests is noise drawn as a finding. Without
    a split every point stays (its interval says how sure it is)."""
    if not split or frame.empty or n not in frame:
        return frame, 0
    keep = frame[n].fillna(0).astype(float) >= min_n
    return frame[keep], int((~keep).sum())


change_called = findings.change_called


def constraint_recall(required: Iterable[Any], recalled: Iterable[Any] | None) -> pd.DataFrame:
    """One row per required constraint (in the outcome's order) and whether the answer kept
    it: the outcome's ``recalled_constraints`` (docs/metrics.md, constraint recall)."""
    kept = set(map(str, recalled or ()))
    names = list(dict.fromkeys(map(str, required)))
    return pd.DataFrame({"constraint": names, "recalled": [n in kept for n in names]})


GRADE_COLUMNS = ("grader", "reviewer", "correct", "score", "decisive_chunk_ids", "note", "time",
                 "received_at")


def grades(outcomes: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Every outcome received for one request, one row each, newest first: who graded
    (``grader``, NULL read as person) and what they said. A judge's row with no ``correct``
    is a judge error (its note says why), not a grade (docs/grading.md)."""
    rows = [{c: o.get(c) for c in GRADE_COLUMNS} for o in outcomes]
    for row in rows:
        row["grader"] = row["grader"] or "person"
        if isinstance(row["decisive_chunk_ids"], (list, tuple)):
            row["decisive_chunk_ids"] = ", ".join(map(str, row["decisive_chunk_ids"]))
    return pd.DataFrame(rows[::-1], columns=list(GRADE_COLUMNS))


def arrivals(moves: pd.DataFrame) -> list[str]:
    """One line per slice that is new this week or had no graded traffic in it (slice_moves
    rows of kind ``new`` or ``vanished``): a new template is what a reviewer must see."""
    if moves.empty:
        return []
    lines = []
    for r in moves[moves["kind"] != "moved"].itertuples():
        if r.kind == "new":
            against = (f" (all traffic the week before: {r.before:.0%} of {r.n_before:,})"
                       if r.versus == "all" else "")
            lines.append(f"{r.slice}: first seen this week, accuracy {r.after:.0%} "
                         f"of {r.n:,} graded{against}")
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


SECTION_NAMES = {"instructions": "instructions", "history": "conversation history",
                 "question": "question", "format": "answer format"}


def prompt_segments(placed: pd.DataFrame, sections: Any, prompt_tokens: int | None
                    ) -> pd.DataFrame:
    """Everything in the prompt that is not a chunk, as grey blocks for the strip: the
    request's prompt sections (instructions, history, question, answer format) where the
    trace recorded its messages, and every other stretch of at least 1% of the prompt that no
    chunk covers, named by where it sits ("before the chunks", "between chunks", "after the
    chunks") since what it held was not recorded. Columns ``kind``, ``name``,
    ``token_start``, ``token_end``, ``tokens``."""
    cols = ["kind", "name", "token_start", "token_end", "tokens"]
    chunks = [] if placed.empty else [
        (float(a), float(b)) for a, b in zip(placed["token_start"], placed["token_end"],
                                             strict=True) if pd.notna(a) and pd.notna(b)]
    if not chunks:
        return pd.DataFrame(columns=cols)
    total = float(max(prompt_tokens or 0, max(b for _, b in chunks)))
    rows = [{"kind": str(x["kind"]), "name": SECTION_NAMES.get(str(x["kind"]), str(x["kind"])),
             "token_start": float(x["token_start"]), "token_end": float(x["token_end"])}
            for x in (sections if isinstance(sections, list | tuple) else [])
            if isinstance(x, dict) and x.get("token_start") is not None
            and x.get("token_end") is not None and x["token_end"] > x["token_start"]]
    covered = sorted(chunks + [(r["token_start"], r["token_end"]) for r in rows])
    first, last = min(a for a, _ in chunks), max(b for _, b in chunks)
    pos, gaps = 0.0, []
    for a, b in covered + [(total, total)]:
        if a > pos:
            gaps.append((pos, a))
        pos = max(pos, b)
    for a, b in gaps:
        if b - a < 0.01 * total:
            continue
        where = ("before the chunks" if b <= first else "after the chunks" if a >= last
                 else "between chunks")
        rows.append({"kind": "unrecorded", "name": f"{where} (not recorded)",
                     "token_start": a, "token_end": b})
    out = pd.DataFrame(rows, columns=cols[:-1])
    out["tokens"] = out["token_end"] - out["token_start"]
    return out.sort_values("token_start").reset_index(drop=True)


def edge_occurrences(placed: pd.DataFrame) -> list[str]:
    """Each occurrence of a decisive chunk in the early or late band, as 'slot 1 of 9, early
    (chunk 3f2a91c0…)': what makes a wrong answer `unused` rather than `buried`."""
    if placed.empty or "band" not in placed:
        return []
    at_edge = placed[placed["decisive"] & placed["band"].isin(("early", "late"))]
    k = len(placed)
    return [f"slot {int(r['slot'])} of {k}, {r['band']} (chunk {labels.short_id(r['chunk_id'])})"
            for r in at_edge.to_dict("records")]


def decisive_cells(rows: pd.DataFrame) -> list[str]:
    """Where each request's decisive chunk sat, in one cell: 'slot 5 of 9, middle', plus the
    edge an `unused` request had an occurrence at ('…, edge: early'), 'not in the prompt'."""
    def cell(r: dict[str, Any]) -> str:
        slot, k, band = r.get("decisive_slot"), r.get("k"), r.get("decisive_band")
        if slot is None or pd.isna(slot):
            return "not in the prompt" if (r.get("n_decisive") or 0) else "—"
        text = f"slot {int(slot)} of {int(k)}" if k is not None and pd.notna(k) else \
            f"slot {int(slot)}"
        text += f", {band}" if isinstance(band, str) else ""
        edge = r.get("decisive_edge_band")
        return text + (f", edge: {edge}" if isinstance(edge, str) and edge != band else "")
    return [cell(r) for r in rows.to_dict("records")]


def compact_chunks(frame: pd.DataFrame) -> pd.DataFrame:
    """A chunk table narrow enough for the page: token offsets as one 'tokens' range, each
    rank with its score ('2 (0.812)'), no empty cells printed as 'None'."""
    def ranked(rank: Any, score: Any) -> str:
        if rank is None or pd.isna(rank):
            return "—"
        return f"{int(rank)}" + ("" if score is None or pd.isna(score) else f" ({float(score):.3f})")

    out = frame.copy()
    if "token_start" in out and "token_end" in out:
        out.insert(list(out.columns).index("token_start"), "tokens", [
            "—" if pd.isna(a) or pd.isna(b) else f"{int(a):,}–{int(b):,}"
            for a, b in zip(out["token_start"], out["token_end"], strict=True)])
        out = out.drop(columns=["token_start", "token_end"])
    for stage in ("retrieval", "rerank"):
        rank, score = f"{stage}_rank", f"{stage}_score"
        if rank in out:
            scores = out[score] if score in out else pd.Series(None, index=out.index)
            out.insert(list(out.columns).index(rank), stage,
                       [ranked(r, x) for r, x in zip(out[rank], scores, strict=True)])
            out = out.drop(columns=[c for c in (rank, score) if c in out])
    return out


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


MARK_OPEN, MARK_CLOSE = "⟦", "⟧"


def marked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each span (character offsets) wrapped in ⟦ ⟧, overlapping spans joined:
    a highlight that stays plain text, for untrusted text shown with st.code."""
    joined: list[list[int]] = []
    for start, end in sorted((int(s), int(e)) for s, e in spans):
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    parts: list[str] = []
    at = 0
    for start, end in joined:
        parts += [text[at:start], MARK_OPEN, text[start:end], MARK_CLOSE]
        at = end
    parts.append(text[at:])
    return "".join(parts)


FOLLOWED_COLUMNS = ("slot", "band", "chunk_id", "label", "decisive", "matched", "kinds")


def followed_chunks(trace: dict[str, Any], placed: pd.DataFrame) -> pd.DataFrame:
    """One row per chunk the answer follows (the trace's answer_sources), in prompt order:
    where it sat, whether it is decisive, and what of the answer it holds (the matched texts,
    or their offsets in the answer when texts are not kept)."""
    sources = trace.get("answer_sources") or []
    chunks = {c.get("ordinal"): c for c in trace.get("chunks") or []}
    rows: dict[int, dict[str, Any]] = {}
    for s in sources:
        ordinal = int(s["ordinal"])
        row = rows.get(ordinal)
        if row is None:
            ch = chunks.get(ordinal, {})
            at = placed[placed["chunk_id"] == s["chunk_id"]] if not placed.empty else placed
            row = rows[ordinal] = {
                "slot": int(at["slot"].iloc[0]) if not at.empty else None,
                "band": at["band"].iloc[0] if not at.empty else None,
                "chunk_id": s["chunk_id"], "label": ch.get("label"),
                "decisive": bool(ch.get("is_decisive")), "ordinal": ordinal,
                "spans": [], "pieces": [], "kinds": []}
        row["spans"].append((int(s["chunk_start"]), int(s["chunk_end"])))
        piece = s.get("matched")
        row["pieces"].append(f'"{piece}"' if isinstance(piece, str)
                             else f"answer chars {s['answer_start']}-{s['answer_end']}")
        if s["kind"] not in row["kinds"]:
            row["kinds"].append(s["kind"])
    out = pd.DataFrame([{**r, "matched": ", ".join(r["pieces"]), "kinds": ", ".join(r["kinds"])}
                        for r in rows.values()],
                       columns=[*FOLLOWED_COLUMNS, "ordinal", "spans"])
    return out.sort_values(["slot", "ordinal"], na_position="last").reset_index(drop=True)


REPLAY_COLUMNS = ["experiment", "layout", "model", "calls", "correct", "accuracy", "last_time"]


def replays(rows: Any) -> pd.DataFrame:
    """The trace's replays (the query API's ``replays``), one row per experiment and layout,
    with the share of graded calls answered right."""
    frame = pd.DataFrame(list(rows or []))
    if frame.empty:
        return pd.DataFrame(columns=REPLAY_COLUMNS)
    graded = pd.to_numeric(frame["graded"], errors="coerce")
    frame["accuracy"] = (pd.to_numeric(frame["correct"], errors="coerce")
                         / graded.where(graded > 0))
    return frame[REPLAY_COLUMNS]


def dollars(value: Any) -> str:
    """A cost in US dollars: cents for a dollar or more, four decimals under; "—" unknown."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "—"
    amount = float(value)
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:,.4f}"


def token_count(value: Any) -> str:
    """A token count short enough for a headline: 9,876, 311k, 3.0M."""
    n = int(value or 0)
    if n >= 1_000_000:
        return f"{n / 1_000_000:,.1f}M"
    return f"{n / 1_000:,.0f}k" if n >= 10_000 else f"{n:,}"


def cost_note(summary: dict[str, Any]) -> str:
    """How the costs of a ``cost_summary`` row are known, as one sentence of our own words
    (counts only): reported by the app, estimated from the price table (saying when at the
    shipped example prices), or not known at all."""
    requests, priced = int(summary.get("requests") or 0), int(summary.get("priced") or 0)
    reported, estimated = int(summary.get("reported") or 0), int(summary.get("estimated") or 0)
    example = int(summary.get("example_priced") or 0)
    parts = [f"{reported} of {requests} requests reported their cost",
             f"{estimated} are estimated from their tokens and the price table"]
    text = ", ".join(parts)
    if example:
        text += (f" ({example} at the shipped example prices, which are not your provider's: "
                 "pass your own table with `--prices`)")
    unpriced = requests - priced
    if unpriced:
        text += (f"; {unpriced} have no cost (no cost sent, and no price for their model or "
                 "no token counts) and are left out of the totals")
    return text + "."


def request_cost(request: dict[str, Any]) -> str:
    """One request's output tokens and cost, as the trace API gives them (request_costs): the
    cost the app reported, else the estimate from the price table, else unknown."""
    output = request.get("output_tokens")
    tokens = f"Output tokens: {output:,}" if isinstance(output, int) else "Output tokens: unknown"
    source = request.get("cost_source")
    if source == "reported":
        return f"{tokens} · cost {dollars(request.get('cost_usd'))}, reported by the app."
    if source == "estimated":
        return (f"{tokens} · cost {dollars(request.get('estimated_cost_usd'))}, estimated from "
                "its tokens and the price table"
                + (" (a shipped example price: check it)." if request.get("example_price") else "."))
    return f"{tokens} · cost unknown (none reported, and no price or token count to estimate it)."
