"""Record a RAG request on an OpenTelemetry span: the app side of the contract.

Imports nothing heavier than opentelemetry-api, so a RAG service can add it to its own
process. ``record_request(span, record)`` sets midtrace's attributes (schemas/conventions.py)
on the span; the collector's decoder (schemas/decode.py) reads them back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Span

from midtrace.schemas import conventions as c
from midtrace.schemas.model import Outcome, RagRecord


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, tuple):
        value = list(value)
    attrs[key] = value


def _column(values: Sequence[Any]) -> list[Any] | None:
    """An array attribute, or None when every entry is missing (then it is not sent)."""
    return list(values) if any(v is not None for v in values) else None


def request_attributes(record: RagRecord) -> dict[str, Any]:
    """The span attributes for ``record``, as a plain dict (what ``record_request`` sets)."""
    attrs: dict[str, Any] = {}
    for key, value in (
        (c.QUESTION, record.question), (c.ANSWER, record.answer), (c.MODEL, record.model),
        (c.LATENCY_MS, record.latency_ms), (c.COST_USD, record.cost_usd),
        (c.TEMPLATE_ID, record.template_id), (c.TEMPLATE_VERSION, record.template_version),
        (c.STRATEGY, record.strategy), (c.EXPERIMENT_ID, record.experiment_id),
        (c.CONDITION, record.condition), (c.CASE_ID, record.case_id),
        (c.CONFIDENCE, record.confidence), (c.ANSWER_CONSTRAINTS, record.answer_constraints),
        (c.CITED_IDS, record.cited_ids), (c.UNRESOLVED_CONFLICTS, record.unresolved_conflicts),
        (c.PROMPT_TOKENS, record.prompt_tokens), (c.ANSWER_TOKENS, record.output_tokens),
        (c.PROMPT_CHARS, record.prompt_chars),
        (c.EVIDENCE_TOKENS, record.evidence_tokens), (c.VERIFIER_RESULT, record.verifier_result),
    ):
        _put(attrs, key, value)
    attrs.update(_chunk_arrays(record))
    sections = [x for x in record.prompt_sections or ()
                if x.token_start is not None and x.token_end is not None]
    if sections:
        attrs[c.SECTION_KINDS] = [x.kind for x in sections]
        attrs[c.SECTION_TOKEN_STARTS] = [int(x.token_start) for x in sections]  # type: ignore[arg-type]
        attrs[c.SECTION_TOKEN_ENDS] = [int(x.token_end) for x in sections]  # type: ignore[arg-type]
    if record.outcome is not None:
        attrs.update(outcome_attributes(record.outcome))
    return attrs


def _chunk_arrays(record: RagRecord) -> dict[str, Any]:
    placements_by_chunk: dict[str, list[Any]] = {}
    for p in sorted(record.placements, key=lambda p: p.prompt_index):
        placements_by_chunk.setdefault(p.chunk_id, []).append(p)
    rows: list[tuple[Any, Any]] = []
    for chunk in record.chunks:
        for placement in placements_by_chunk.get(chunk.id) or [None]:
            rows.append((chunk, placement))
    if not rows:
        return {}
    columns: dict[str, list[Any]] = {
        c.CHUNK_IDS: [ch.id for ch, _ in rows],
        c.CHUNK_STAGES: [ch.stage for ch, _ in rows],
        c.CHUNK_DROP_REASONS: [ch.drop_reason for ch, _ in rows],
        c.CHUNK_SOURCE_IDS: [ch.source_id for ch, _ in rows],
        c.CHUNK_SOURCE_POSITIONS: [ch.source_position for ch, _ in rows],
        c.CHUNK_RETRIEVAL_RANKS: [ch.retrieval_rank for ch, _ in rows],
        c.CHUNK_RETRIEVAL_SCORES: [_finite(ch.retrieval_score) for ch, _ in rows],
        c.CHUNK_RERANK_RANKS: [ch.rerank_rank for ch, _ in rows],
        c.CHUNK_RERANK_SCORES: [_finite(ch.rerank_score) for ch, _ in rows],
        c.CHUNK_PROMPT_INDICES: [p.prompt_index if p else None for _, p in rows],
        c.CHUNK_TOKEN_STARTS: [p.token_start if p else None for _, p in rows],
        c.CHUNK_TOKEN_ENDS: [p.token_end if p else None for _, p in rows],
        c.CHUNK_CHAR_STARTS: [p.char_start if p else None for _, p in rows],
        c.CHUNK_CHAR_ENDS: [p.char_end if p else None for _, p in rows],
        c.CHUNK_LABELS: [ch.label for ch, _ in rows],
        c.CHUNK_AUTHORITIES: [ch.authority for ch, _ in rows],
        c.CHUNK_UPDATED_DATES: [ch.updated.isoformat() if ch.updated else None for ch, _ in rows],
        c.CHUNK_DECISIVE: [ch.decisive for ch, _ in rows],
        c.CHUNK_CITED: [ch.cited for ch, _ in rows],
        c.CHUNK_TEXTS: [ch.text for ch, _ in rows],
    }
    out: dict[str, Any] = {c.CHUNK_IDS: columns.pop(c.CHUNK_IDS)}
    for key, values in columns.items():
        col = _column(values)
        if col is not None:
            out[key] = col
    return out


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def outcome_attributes(outcome: Outcome) -> dict[str, Any]:
    """Span attributes for an outcome the app already knows."""
    attrs: dict[str, Any] = {}
    for key, value in (
        (c.OUTCOME_CORRECT, outcome.correct), (c.OUTCOME_SCORE, outcome.score),
        (c.OUTCOME_DECISIVE_CHUNK_IDS, outcome.decisive_chunk_ids),
        (c.OUTCOME_REQUIRED_CONSTRAINTS, outcome.required_constraints),
        (c.OUTCOME_RECALLED_CONSTRAINTS, outcome.recalled_constraints),
        (c.OUTCOME_REVIEWER, outcome.reviewer), (c.OUTCOME_NOTE, outcome.note),
        (c.OUTCOME_TIME, outcome.time.isoformat() if outcome.time else None),
    ):
        _put(attrs, key, value)
    return attrs


def record_request(span: Span, record: RagRecord) -> None:
    """Set midtrace's attributes for ``record`` on ``span`` (one call per request)."""
    span.set_attributes(request_attributes(record))
