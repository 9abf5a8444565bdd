"""Sweep cases from stored requests: an incident frozen with its evidence, ready to permute.

A request becomes one case (the format `midtrace sweep --cases` reads, midtrace/sweep/cases.py)
when the store has what a case needs:

- its question, and the text of every chunk it retrieved (not under `--no-text`);
- at least one decisive chunk among those chunks (a grade named it, the app marked it, or
  its label says so: the inspector's "decisive");
- an accepted answer: the references line whose question matches (midtrace/references.py).

The decisive chunks are the case's ``decisive``; every other retrieved chunk, in retrieval
order, a distractor (dropped ones too: they were retrieved). The required constraints come
from the request's outcome, else from the references line. ``metadata`` keeps where the
case came from: the trace id, the failure class, the prompt order and the retrieval ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from midtrace.references import Reference, question_key
from midtrace.sweep.cases import DECISIVE_LABELS, DISTRACTOR_LABELS, case_from_json

PAGE = 500  # requests read per page of the source's request list
NO_TEXT = "its texts were not stored (the collector ran with --no-text)"


def case_from_trace(trace: Mapping[str, Any],
                    references: Mapping[str, Reference]) -> dict[str, Any] | str:
    """The case a stored request (the query API's trace) makes, or why it makes none."""
    request = trace.get("request") or {}
    question = request.get("question")
    if not isinstance(question, str) or not question.strip():
        return "it has no stored question (none was recorded, or the collector ran with --no-text)"
    chunks = _unique(trace.get("chunks") or [])
    if any(not isinstance(c.get("text"), str) for c in chunks):
        return NO_TEXT if all(c.get("text") is None for c in chunks) else \
            "a chunk it retrieved has no stored text"
    decisive = [c for c in chunks if c.get("is_decisive")]
    if not decisive:
        return "no decisive chunk is known among its chunks: grade it first"
    reference = references.get(question_key(question))
    if reference is None:
        return "no accepted answer: no --references line has its question"
    outcome = trace.get("outcome") or {}
    constraints = list(outcome.get("required_constraints") or reference.required_constraints)
    ordered = sorted(chunks, key=lambda c: (c.get("retrieval_rank") is None,
                                            c.get("retrieval_rank") or 0, c.get("ordinal") or 0))
    placements = sorted(trace.get("placements") or [], key=lambda p: p.get("prompt_index", 0))
    case = {
        "id": str(trace.get("trace_id")),
        "question": question,
        "answers": list(reference.answers),
        "decisive": [_chunk(c, DECISIVE_LABELS) for c in ordered if c.get("is_decisive")],
        "distractors": [_chunk(c, DISTRACTOR_LABELS) for c in ordered
                        if not c.get("is_decisive")],
        "constraints": constraints,
        "metadata": {
            "trace_id": trace.get("trace_id"),
            "taxonomy_class": trace.get("taxonomy_class"),
            "prompt_order": [p.get("chunk_id") for p in placements],
            "retrieval_ranks": {c["chunk_id"]: c.get("retrieval_rank") for c in ordered},
        },
    }
    case_from_json(case)  # the sweep reads it: refuse here what it would refuse there
    return case


def trace_ids(client: Any, filters: Any, taxonomy_class: str | None = None,
              search: str | None = None, limit: int | None = None) -> list[str]:
    """The trace ids of the requests under the filters (midtrace.client.Filters), newest
    first, at most ``limit``."""
    ids: list[str] = []
    while limit is None or len(ids) < limit:
        size = PAGE if limit is None else min(PAGE, limit - len(ids))
        page, _ = client.requests_page(filters, search=search, taxonomy_class=taxonomy_class,
                                       limit=size, offset=len(ids))
        ids += [str(t) for t in page["trace_id"]] if not page.empty else []
        if len(page) < size:
            break
    return ids


def _unique(chunks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    seen: set[str] = set()
    out = []
    for c in chunks:
        cid = str(c.get("chunk_id"))
        if cid not in seen:
            seen.add(cid)
            out.append(c)
    return out


def _chunk(c: Mapping[str, Any], labels: Sequence[str]) -> dict[str, Any]:
    """A case chunk; its label only when it fits its role (a chunk a grade made decisive may
    carry the app's 'supporting_background')."""
    out: dict[str, Any] = {"id": str(c["chunk_id"]), "text": c["text"]}
    if c.get("source_id"):
        out["source"] = str(c["source_id"])
    if isinstance(c.get("source_position"), int):
        out["source_position"] = c["source_position"]
    if c.get("label") in labels:
        out["label"] = str(c["label"])
    return out
