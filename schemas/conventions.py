"""midtrace's own OpenTelemetry attribute conventions: every name, its type and its meaning.

Everything is namespaced under ``midtrace.``. Per-chunk data travels as *parallel arrays*
(``midtrace.chunk.ids``, ``midtrace.chunk.token_starts`` ...), one entry per chunk
occurrence: the OTel SDKs keep only 128 attributes per span by default and silently drop
the rest, so one key per chunk would lose data on any real prompt.

A missing value inside an array is ``null`` (an empty AnyValue, which the Python SDK sends
for ``None``) or, for SDKs that refuse nulls in arrays, the sentinel named in ``missing``.
This table is the single source of docs/conventions.md (see ``render_markdown``) and is
checked against the decoder by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AttrType = Literal["string", "int", "double", "boolean", "string[]", "int[]", "double[]", "boolean[]"]

PREFIX = "midtrace."
MAX_INT = 2**31 - 1
"""The largest integer the contract takes (token counts, offsets, ranks): 32-bit columns."""


@dataclass(frozen=True)
class Attr:
    name: str
    type: AttrType
    meaning: str
    missing: str = ""
    # Free text from the app or its users, as opposed to ids, labels, dates and numbers:
    # the collector's --no-text keeps only its content hash.
    text: bool = False


# Request-level attributes, on the span that answered (or any span of the trace).
QUESTION = "midtrace.request.question"
ANSWER = "midtrace.request.answer"
MODEL = "midtrace.request.model"
LATENCY_MS = "midtrace.request.latency_ms"
COST_USD = "midtrace.request.cost_usd"
TEMPLATE_ID = "midtrace.template.id"
TEMPLATE_VERSION = "midtrace.template.version"
STRATEGY = "midtrace.packing.strategy"
EXPERIMENT_ID = "midtrace.experiment.id"
CONDITION = "midtrace.experiment.condition"
CASE_ID = "midtrace.case.id"
CONFIDENCE = "midtrace.answer.confidence"
ANSWER_CONSTRAINTS = "midtrace.answer.constraints"
CITED_IDS = "midtrace.answer.cited_ids"
UNRESOLVED_CONFLICTS = "midtrace.answer.unresolved_conflicts"
PROMPT_TOKENS = "midtrace.prompt.tokens"
ANSWER_TOKENS = "midtrace.answer.tokens"
PROMPT_CHARS = "midtrace.prompt.chars"
EVIDENCE_TOKENS = "midtrace.prompt.evidence_tokens"
VERIFIER_RESULT = "midtrace.verifier.result"
# Prompt sections: entry i of each array describes the same stretch of the prompt.
SECTION_KINDS = "midtrace.prompt.section_kinds"
SECTION_TOKEN_STARTS = "midtrace.prompt.section_token_starts"
SECTION_TOKEN_ENDS = "midtrace.prompt.section_token_ends"

# Chunk arrays: entry i of every array describes the same chunk occurrence.
CHUNK_IDS = "midtrace.chunk.ids"
CHUNK_STAGES = "midtrace.chunk.stages"
CHUNK_DROP_REASONS = "midtrace.chunk.drop_reasons"
CHUNK_SOURCE_IDS = "midtrace.chunk.source_ids"
CHUNK_SOURCE_POSITIONS = "midtrace.chunk.source_positions"
CHUNK_RETRIEVAL_RANKS = "midtrace.chunk.retrieval_ranks"
CHUNK_RETRIEVAL_SCORES = "midtrace.chunk.retrieval_scores"
CHUNK_RERANK_RANKS = "midtrace.chunk.rerank_ranks"
CHUNK_RERANK_SCORES = "midtrace.chunk.rerank_scores"
CHUNK_PROMPT_INDICES = "midtrace.chunk.prompt_indices"
CHUNK_TOKEN_STARTS = "midtrace.chunk.token_starts"
CHUNK_TOKEN_ENDS = "midtrace.chunk.token_ends"
CHUNK_CHAR_STARTS = "midtrace.chunk.char_starts"
CHUNK_CHAR_ENDS = "midtrace.chunk.char_ends"
CHUNK_LABELS = "midtrace.chunk.labels"
CHUNK_AUTHORITIES = "midtrace.chunk.authorities"
CHUNK_UPDATED_DATES = "midtrace.chunk.updated_dates"
CHUNK_DECISIVE = "midtrace.chunk.decisive"
CHUNK_CITED = "midtrace.chunk.cited"
CHUNK_TEXTS = "midtrace.chunk.texts"

# Outcome attributes: a grade the app already knows (a posted outcome overrides these).
OUTCOME_CORRECT = "midtrace.outcome.correct"
OUTCOME_SCORE = "midtrace.outcome.score"
OUTCOME_DECISIVE_CHUNK_IDS = "midtrace.outcome.decisive_chunk_ids"
OUTCOME_REQUIRED_CONSTRAINTS = "midtrace.outcome.required_constraints"
OUTCOME_RECALLED_CONSTRAINTS = "midtrace.outcome.recalled_constraints"
OUTCOME_REVIEWER = "midtrace.outcome.reviewer"
OUTCOME_NOTE = "midtrace.outcome.note"
OUTCOME_TIME = "midtrace.outcome.time"

REQUEST_ATTRS: tuple[Attr, ...] = (
    Attr(QUESTION, "string", "The user's question.", text=True),
    Attr(ANSWER, "string", "The answer the model gave.", text=True),
    Attr(MODEL, "string", "Model that answered (else `gen_ai.request.model` or `llm.model_name`)."),
    Attr(LATENCY_MS, "double", "End-to-end latency of the request in milliseconds."),
    Attr(COST_USD, "double", "Cost of the request in US dollars."),
    Attr(TEMPLATE_ID, "string", "Prompt template id."),
    Attr(TEMPLATE_VERSION, "string", "Prompt template version."),
    Attr(STRATEGY, "string", "Packing strategy that ordered the chunks (`score_order`, `edge`, ...)."),
    Attr(EXPERIMENT_ID, "string", "Experiment (sweep) this request belongs to."),
    Attr(CONDITION, "string", "Placement condition within the experiment (e.g. `rank_5`, `absent`)."),
    Attr(CASE_ID, "string", "Case id: the same question across placements."),
    Attr(CONFIDENCE, "double", "Structured answer field: the model's stated confidence, 0..1."),
    Attr(ANSWER_CONSTRAINTS, "string[]", "Structured answer field: constraints the answer mentions.",
         text=True),
    Attr(CITED_IDS, "string[]", "Structured answer field: chunk ids the answer cites."),
    Attr(UNRESOLVED_CONFLICTS, "string[]", "Structured answer field: conflicts the answer left open.",
         text=True),
    Attr(PROMPT_TOKENS, "int", "Tokens in the final prompt."),
    Attr(ANSWER_TOKENS, "int", "Tokens the model generated for the answer (output, or completion, "
         "tokens; else `gen_ai.usage.output_tokens` or `llm.token_count.completion`)."),
    Attr(PROMPT_CHARS, "int", "Characters in the final prompt (used to estimate token offsets)."),
    Attr(EVIDENCE_TOKENS, "int", "Tokens of the evidence block within the prompt."),
    Attr(VERIFIER_RESULT, "string", "Result of a verifier pass, if one ran.", text=True),
    Attr(SECTION_KINDS, "string[]", "What fills the prompt around the chunks, one entry per "
         "stretch: `instructions`, `history`, `question` or `format` (the inspector draws them "
         "as grey blocks; others are kept as sent)."),
    Attr(SECTION_TOKEN_STARTS, "int[]", "First token of each section (same length as "
         "`midtrace.prompt.section_kinds`)."),
    Attr(SECTION_TOKEN_ENDS, "int[]", "Token after the last one of each section (half-open)."),
)

CHUNK_ATTRS: tuple[Attr, ...] = (
    Attr(CHUNK_IDS, "string[]", "Chunk id of each entry (required; sets the array length). An id "
         "may repeat only for a second placement of the same chunk in the prompt."),
    Attr(CHUNK_STAGES, "string[]", "Furthest stage reached: `retrieved`, `reranked`, `in_prompt` "
         "or `dropped`.", "`\"\"` (then `in_prompt` if the entry has a prompt index, else `retrieved`)"),
    Attr(CHUNK_DROP_REASONS, "string[]", "Why a dropped chunk was dropped: `budget`, `dedupe`, "
         "`filter`, `diversity`.", "`\"\"`"),
    Attr(CHUNK_SOURCE_IDS, "string[]", "Source document id.", "`\"\"`"),
    Attr(CHUNK_SOURCE_POSITIONS, "int[]", "Position of the chunk within its source document (0-based).", "`-1`"),
    Attr(CHUNK_RETRIEVAL_RANKS, "int[]", "Retrieval rank, 1-based.", "`0`"),
    Attr(CHUNK_RETRIEVAL_SCORES, "double[]", "Retrieval score.", "`NaN`"),
    Attr(CHUNK_RERANK_RANKS, "int[]", "Rerank rank, 1-based.", "`0`"),
    Attr(CHUNK_RERANK_SCORES, "double[]", "Rerank score.", "`NaN`"),
    Attr(CHUNK_PROMPT_INDICES, "int[]", "0-based index of this occurrence in the final prompt "
         "order.", "`-1` (not in the prompt)"),
    Attr(CHUNK_TOKEN_STARTS, "int[]", "First token of this occurrence in the prompt.", "`-1`"),
    Attr(CHUNK_TOKEN_ENDS, "int[]", "Token after the last one of this occurrence (half-open).", "`-1`"),
    Attr(CHUNK_CHAR_STARTS, "int[]", "First character of this occurrence in the prompt; token "
         "offsets are estimated from these when no token offsets are sent.", "`-1`"),
    Attr(CHUNK_CHAR_ENDS, "int[]", "Character after the last one of this occurrence.", "`-1`"),
    Attr(CHUNK_LABELS, "string[]", "`direct_answer`, `exception_constraint`, "
         "`supporting_background`, `conflicting`, `irrelevant` (others are kept as sent).", "`\"\"`"),
    Attr(CHUNK_AUTHORITIES, "string[]", "Authority of the source: `canonical`, `deprecated`, ...", "`\"\"`"),
    Attr(CHUNK_UPDATED_DATES, "string[]", "Date the source was last updated, `YYYY-MM-DD`.", "`\"\"`"),
    Attr(CHUNK_DECISIVE, "boolean[]", "The app's own mark: this chunk decides the answer (gold).", "none: send the array for all entries or omit it"),
    Attr(CHUNK_CITED, "boolean[]", "The answer cited this chunk.", "none: send the array for all entries or omit it"),
    Attr(CHUNK_TEXTS, "string[]", "Chunk text (optional).", "`\"\"`", text=True),
)

OUTCOME_ATTRS: tuple[Attr, ...] = (
    Attr(OUTCOME_CORRECT, "boolean", "The answer was correct."),
    Attr(OUTCOME_SCORE, "double", "A graded score."),
    Attr(OUTCOME_DECISIVE_CHUNK_IDS, "string[]", "Chunk ids that decide this question."),
    Attr(OUTCOME_REQUIRED_CONSTRAINTS, "string[]", "Qualifiers a correct answer must mention.",
         text=True),
    Attr(OUTCOME_RECALLED_CONSTRAINTS, "string[]",
         "Those of the required constraints the answer mentioned.", text=True),
    Attr(OUTCOME_REVIEWER, "string", "Who graded."),
    Attr(OUTCOME_NOTE, "string", "A note on the grade.", text=True),
    Attr(OUTCOME_TIME, "string",
         "When the grade was given, RFC 3339 (no offset: UTC); in UTC within years 1-9999."),
)

ALL_ATTRS: tuple[Attr, ...] = REQUEST_ATTRS + CHUNK_ATTRS + OUTCOME_ATTRS
BY_NAME: dict[str, Attr] = {a.name: a for a in ALL_ATTRS}


TEXT_NOTE = " Free text: `--no-text` keeps only its content hash."


def render_markdown() -> str:
    """The attribute reference as a Markdown table (docs/conventions.md embeds it)."""
    lines = []
    for title, attrs in (("Request", REQUEST_ATTRS), ("Chunks (parallel arrays)", CHUNK_ATTRS),
                         ("Outcome", OUTCOME_ATTRS)):
        lines += [f"### {title}", "", "| attribute | type | meaning | missing value |",
                  "|---|---|---|---|"]
        lines += [f"| `{a.name}` | {a.type} | {a.meaning}{TEXT_NOTE if a.text else ''} | {a.missing} |"
                  for a in attrs]
        lines.append("")
    return "\n".join(lines)
