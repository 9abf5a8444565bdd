"""The one model of a RAG request: what an app records and what the collector stores.

An app builds a :class:`RagRecord` (the request as it saw it) and records it on a span
with :func:`midtrace.schemas.encode.record_request`. The collector decodes the trace back into a
:class:`RagRequest`: the same record plus what only the trace knows (trace id, time,
service). Chunks and placements are separate so a chunk placed twice in the prompt has one
chunk and two placements (docs/architecture.md, "Placements").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal, get_args

from midtrace.schemas.frozen import stored_at_once

Stage = Literal["retrieved", "reranked", "in_prompt", "dropped"]
DropReason = Literal["budget", "dedupe", "filter", "diversity"]
Label = Literal[
    "direct_answer", "exception_constraint", "supporting_background", "conflicting", "irrelevant"
]
Convention = Literal["midtrace", "openinference", "genai", "vercel_ai"]
# What a trace is (docs/metrics.md, "Request kinds"): an answered RAG request, retrieval with
# no LLM call to answer from it, or an LLM call with no retrieval. Only `rag` requests count
# in the metrics.
RequestKind = Literal["rag", "retrieval_only", "llm_only"]
# Who graded an outcome, in precedence order (docs/grading.md, "Precedence").
Grader = Literal["person", "references", "judge"]

STAGES: tuple[str, ...] = get_args(Stage)
DROP_REASONS: tuple[str, ...] = get_args(DropReason)
LABELS: tuple[str, ...] = get_args(Label)
GRADERS: tuple[str, ...] = get_args(Grader)
# Labels that make a chunk decisive for ungraded traffic (docs/architecture.md, "decisive position").
DECISIVE_LABELS: tuple[str, ...] = ("direct_answer", "exception_constraint")


@stored_at_once
@dataclass(frozen=True)
class Chunk:
    """One retrieved (or considered) chunk of one request."""

    id: str
    stage: Stage = "in_prompt"
    drop_reason: DropReason | None = None
    source_id: str | None = None
    source_position: int | None = None
    retrieval_rank: int | None = None
    retrieval_score: float | None = None
    rerank_rank: int | None = None
    rerank_score: float | None = None
    label: str | None = None
    authority: str | None = None
    updated: date | None = None
    decisive: bool | None = None
    cited: bool | None = None
    text: str | None = None


@stored_at_once
@dataclass(frozen=True)
class Placement:
    """One occurrence of a chunk in the final prompt, in prompt order (``prompt_index`` 0-based).

    Token offsets are half-open ``[token_start, token_end)``; character offsets likewise.
    """

    chunk_id: str
    prompt_index: int
    token_start: int | None = None
    token_end: int | None = None
    char_start: int | None = None
    char_end: int | None = None


# What a part of the prompt that is no chunk holds (docs/zero-code.md, "Prompt sections").
SECTION_KINDS = ("instructions", "history", "question", "format")


@stored_at_once
@dataclass(frozen=True)
class PromptSection:
    """A stretch of the final prompt that is not a chunk: the instructions (system message or
    preamble), earlier turns of the conversation, the question, or what follows it (the
    answer format). Offsets are half-open, like a placement's."""

    kind: str
    token_start: int | None = None
    token_end: int | None = None
    char_start: int | None = None
    char_end: int | None = None


@stored_at_once
@dataclass(frozen=True)
class Outcome:
    """A grade for one request, from a grader, a human, or the app itself.

    ``None`` means "this outcome does not say"; the merge rule (docs/architecture.md) lets the newest
    outcome that sets a field win that field.
    """

    trace_id: str | None = None
    time: datetime | None = None
    correct: bool | None = None
    score: float | None = None
    decisive_chunk_ids: tuple[str, ...] | None = None
    required_constraints: tuple[str, ...] | None = None
    recalled_constraints: tuple[str, ...] | None = None
    reviewer: str | None = None
    note: str | None = None
    grader: Grader | None = None  # None: a person (docs/grading.md, "Precedence")


@stored_at_once
@dataclass(frozen=True)
class RagRecord:
    """What a RAG app knows about one answered question."""

    question: str | None = None
    answer: str | None = None
    model: str | None = None
    template_id: str | None = None
    template_version: str | None = None
    strategy: str | None = None
    experiment_id: str | None = None
    condition: str | None = None
    case_id: str | None = None
    confidence: float | None = None
    answer_constraints: tuple[str, ...] | None = None
    cited_ids: tuple[str, ...] | None = None
    unresolved_conflicts: tuple[str, ...] | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    prompt_chars: int | None = None
    evidence_tokens: int | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    verifier_result: str | None = None
    chunks: tuple[Chunk, ...] = ()
    placements: tuple[Placement, ...] = ()
    outcome: Outcome | None = None
    prompt_sections: tuple[PromptSection, ...] | None = None


@stored_at_once
@dataclass(frozen=True)
class RagRequest:
    """A decoded request: the app's record plus what the trace itself says."""

    trace_id: str
    time: datetime
    record: RagRecord
    service: str | None = None
    convention: Convention = "midtrace"
    tokens_estimated: bool = False
    warnings: tuple[str, ...] = field(default=())
    kind: RequestKind = "rag"
