"""The simulated parts of a request: prompt layout in tokens, the model's answer, the grade.

The answer model is a U-shaped position curve: the chance that an answer uses a decisive
chunk depends on where the chunk sits in the prompt, x in [0, 1] (the chunk's token midpoint
over the prompt's tokens; slot-based in the sweep). Its parameters live at the top of
``generate.py``; the curve itself is :meth:`UCurve.p`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from midtrace.sample_traces.corpus import CorpusChunk
from midtrace.schemas.model import Chunk, DropReason, Outcome, Placement, PromptSection, RagRecord

BAND_EARLY_END = 1 / 3
BAND_LATE_START = 2 / 3


@dataclass(frozen=True)
class UCurve:
    """P(correct | decisive evidence at relative position x): quadratic, high at both ends.

    ``p(0) = start``, ``p(0.5) = middle``, ``p(1) = end``; between them the curve is
    ``middle + (start - middle) * (1 - 2x)^2`` on the first half and
    ``middle + (end - middle) * (2x - 1)^2`` on the second. ``no_evidence`` is the chance of a
    correct answer when no decisive chunk reached the prompt.
    """

    start: float
    middle: float
    end: float
    no_evidence: float

    def p(self, x: float) -> float:
        x = min(1.0, max(0.0, x))
        if x < 0.5:
            return self.middle + (self.start - self.middle) * (1 - 2 * x) ** 2
        return self.middle + (self.end - self.middle) * (2 * x - 1) ** 2


@dataclass(frozen=True)
class Template:
    id: str
    version: str
    preamble_tokens: int
    tail_tokens: int
    min_chunks: int
    max_chunks: int


CHUNK_HEADER_TOKENS = 18  # "[doc 3] source=... authority=... updated=...\n"
CHUNK_SEPARATOR_TOKENS = 2


def text_tokens(text: str) -> int:
    """The simulated tokenizer: about four characters per token."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class Layout:
    spans: tuple[tuple[int, int], ...]  # token [start, end) per chunk in prompt order
    prompt_tokens: int
    evidence_tokens: int

    def x(self, index: int) -> float:
        start, end = self.spans[index]
        return (start + end) / 2 / self.prompt_tokens


def lay_out(texts: Sequence[str], preamble_tokens: int, tail_tokens: int) -> Layout:
    """Chunks laid end to end after the preamble, the question and answer format after them."""
    pos = preamble_tokens
    spans: list[tuple[int, int]] = []
    for i, text in enumerate(texts):
        if i:
            pos += CHUNK_SEPARATOR_TOKENS
        end = pos + CHUNK_HEADER_TOKENS + text_tokens(text)
        spans.append((pos, end))
        pos = end
    evidence = pos - preamble_tokens
    return Layout(tuple(spans), pos + tail_tokens, evidence)


def sections_for(layout: Layout, preamble_tokens: int, history_tokens: int,
                 question: str) -> tuple[PromptSection, ...]:
    """What surrounds the chunks: the template's instructions, earlier turns of the
    conversation, then after the chunks the question and the answer format."""
    first = layout.spans[0][0] if layout.spans else preamble_tokens + history_tokens
    last = layout.spans[-1][1] if layout.spans else first
    asked = min(layout.prompt_tokens, last + text_tokens(question) + 4)  # "Question: ...\n"
    out = [PromptSection("instructions", 0, preamble_tokens)]
    if history_tokens:
        out.append(PromptSection("history", preamble_tokens, preamble_tokens + history_tokens))
    out += [PromptSection("question", last, asked),
            PromptSection("format", asked, layout.prompt_tokens)]
    return tuple(x for x in out if x.token_end > x.token_start)  # type: ignore[operator]


def band(x: float) -> str:
    if x < BAND_EARLY_END:
        return "early"
    return "middle" if x < BAND_LATE_START else "late"


@dataclass(frozen=True)
class Answer:
    text: str
    main_ok: bool
    correct: bool
    score: float
    recalled: tuple[str, ...]
    cited: tuple[str, ...]
    confidence: float


def confidence_for(rng: random.Random, correct: bool) -> float:
    """Stated confidence: high when right, and often high when wrong too."""
    if correct:
        return round(rng.uniform(0.72, 0.97), 2)
    return round(rng.uniform(0.80, 0.95) if rng.random() < 0.55 else rng.uniform(0.40, 0.75), 2)


def cite(rng: random.Random, prompt_ids: Sequence[str], main_ok: bool, direct_in_prompt:
         Sequence[str], wrong_source: str | None, avoid: Sequence[str],
         miscite: float) -> tuple[str, ...]:
    """Citations: the decisive chunks when the answer used them, else the louder distractor."""
    others = [c for c in prompt_ids if c not in avoid]
    if main_ok and direct_in_prompt and rng.random() >= miscite:
        return tuple(direct_in_prompt)
    if not main_ok and wrong_source is not None and wrong_source in prompt_ids:
        return (wrong_source,)
    return (others[0],) if others else tuple(prompt_ids[:1])


def merge_outcomes(outcomes: Sequence[Outcome]) -> Outcome | None:
    """The contract's rule: field by field, the newest outcome that sets a field wins.

    ``outcomes`` come in arrival order with the span's own outcome first.
    """
    if not outcomes:
        return None
    merged = outcomes[0]
    for o in outcomes[1:]:
        merged = replace(merged, **{k: v for k, v in vars(o).items() if v is not None})
    return merged


def classify(record: RagRecord, outcome: Outcome | None) -> str:
    """The failure-taxonomy class of a request (docs/architecture.md, "Failure taxonomy")."""
    if outcome is None or outcome.correct is None:
        return "ungraded"
    if outcome.correct:
        return "answered"
    if outcome.decisive_chunk_ids:
        decisive = set(outcome.decisive_chunk_ids)
    elif any(c.decisive for c in record.chunks):
        decisive = {c.id for c in record.chunks if c.decisive}
    else:
        decisive = {c.id for c in record.chunks
                    if c.label in ("direct_answer", "exception_constraint")}
    if not decisive:
        return "unlabeled"
    present = [c for c in record.chunks if c.id in decisive]
    if not present:
        return "missing"
    placed = [p for p in record.placements if p.chunk_id in decisive]
    if not placed:
        return "dropped"
    total = record.prompt_tokens or 1
    bands = {band(((p.token_start or 0) + (p.token_end or 0)) / 2 / total) for p in placed}
    return "buried" if bands == {"middle"} else "unused"


def placements_for(ids: Sequence[str], layout: Layout) -> tuple[Placement, ...]:
    return tuple(Placement(chunk_id=cid, prompt_index=i, token_start=s, token_end=e)
                 for i, (cid, (s, e)) in enumerate(zip(ids, layout.spans)))


def outcome_json(trace_id: str, o: Outcome) -> dict[str, object]:
    """One entry of the body of ``POST /v1/outcomes``."""
    out: dict[str, object] = {"trace_id": trace_id}
    if o.time is not None:
        out["time"] = _rfc3339(o.time)
    for key in ("correct", "score", "decisive_chunk_ids", "required_constraints",
                "recalled_constraints", "reviewer", "note"):
        value = getattr(o, key)
        if value is not None:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _rfc3339(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def chunk_row(chunk: CorpusChunk, *, drop_reason: DropReason | None,
              retrieval: tuple[int, float], rerank: tuple[int, float] | None,
              label: str | None, decisive: bool | None, cited: bool) -> Chunk:
    """A chunk of one request: in the prompt unless it has a drop reason."""
    return Chunk(
        id=chunk.id, stage="dropped" if drop_reason else "in_prompt", drop_reason=drop_reason,
        source_id=chunk.source_id, source_position=chunk.position,
        retrieval_rank=retrieval[0], retrieval_score=retrieval[1],
        rerank_rank=rerank[0] if rerank else None, rerank_score=rerank[1] if rerank else None,
        label=label, authority=chunk.authority, updated=chunk.updated, decisive=decisive,
        cited=cited, text=chunk.text)
