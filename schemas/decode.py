"""Decode midtrace's own attributes back into the model: the collector side of the contract.

``decode_record`` reads one span's attributes and refuses bad ones with an
:class:`InvalidAttributes` that names the attribute and what is wrong with it.
``decode_trace`` assembles one request from all spans of a trace that carry midtrace
attributes, whichever order they arrived in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from itertools import repeat
from datetime import UTC, date, datetime
from types import NoneType
from typing import Any

from midtrace.schemas import conventions as c
from midtrace.schemas.model import (
    DROP_REASONS, STAGES, Chunk, Outcome, Placement, PromptSection, RagRecord, RagRequest)
from midtrace.schemas.span import SpanRecord

# Characters per token when a prompt reports no token count (docs/architecture.md, "Tokens").
CHARS_PER_TOKEN = 4.0


class InvalidAttributes(ValueError):
    """A span's midtrace attributes break the contract; the message says which and how."""


def has_midtrace_attributes(attrs: Mapping[str, Any]) -> bool:
    # str.startswith mapped in C: a span of another convention has a hundred keys or more
    return any(map(str.startswith, attrs, repeat(c.PREFIX)))


# --- typed getters -------------------------------------------------------------------------

def _scalar(attrs: Mapping[str, Any], key: str) -> Any:
    value = attrs.get(key)
    if value is None:
        return None
    kind = c.BY_NAME[key].type
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InvalidAttributes(f"{key} must not be negative, got {value}")
        if value > c.MAX_INT:
            raise InvalidAttributes(f"{key} is out of range: at most {c.MAX_INT}, got {value}")
        return value
    if kind == "double" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if value != value else float(value)  # NaN: missing, as in an array
    raise InvalidAttributes(f"{key} must be {kind}, got {_type_name(value)} {_short(value)}")


def _array(attrs: Mapping[str, Any], key: str) -> list[Any] | None:
    value = attrs.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        kind = c.BY_NAME[key].type
        raise InvalidAttributes(f"{key} must be {kind}, got {_type_name(value)} {_short(value)}")
    item = _ITEM[key]
    # the common case in C (intake checks every chunk array of every export): one pass for
    # the element types, ``in`` for the values that need a second look
    types = set(map(type, value))
    if NoneType in types:
        types.discard(NoneType)
        present = [v for v in value if v is not None]
    else:
        present = value
    if types <= _FAST[item]:
        if item == "int" and present and max(present) > c.MAX_INT:
            _check_range(key, value)
        elif item == "string":
            return [v or None for v in value] if "" in value else list(value)
        elif item == "double":
            return [None if v is None or v != v else float(v) for v in value]
        return list(value)
    out: list[Any] = []
    for i, v in enumerate(value):
        if v is None:
            out.append(None)
        elif item == "string" and isinstance(v, str):
            out.append(v or None)
        elif item == "boolean" and isinstance(v, bool):
            out.append(v)
        elif item == "int" and isinstance(v, int) and not isinstance(v, bool):
            _check_range(key, [v])
            out.append(v)
        elif item == "double" and isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(None if math.isnan(v) else float(v))
        else:
            raise InvalidAttributes(
                f"{key}[{i}] must be {item}, got {_type_name(v)} {_short(v)}")
    return out


def _check_range(key: str, values: list[Any]) -> None:
    present = [v for v in values if v is not None]
    if present and max(present) > c.MAX_INT:
        i, v = next((i, v) for i, v in enumerate(values) if v is not None and v > c.MAX_INT)
        raise InvalidAttributes(f"{key}[{i}] is out of range: at most {c.MAX_INT}, got {v}")


# Element types that need no per-element check (bool is not an int here: type() is exact).
_FAST: dict[str, set[type]] = {"string": {str}, "boolean": {bool}, "int": {int}, "double": {float, int}}
# The element type of each array attribute: "int" for "int[]".
_ITEM = {a.name: a.type[:-2] for a in c.ALL_ATTRS if a.type.endswith("[]")}


def _type_name(v: Any) -> str:
    return {str: "string", bool: "boolean", int: "int", float: "double", list: "array",
            dict: "map", bytes: "bytes"}.get(type(v), type(v).__name__)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _tuple(values: list[Any] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(v for v in values if v is not None)


def utc_time(text: str) -> datetime:
    """An RFC 3339 time (``2026-11-02T10:00:00Z``; no offset reads as UTC), in UTC.

    ValueError saying why when it is none, or when it falls outside years 1-9999 once in
    UTC (``9999-12-31T23:59:59-23:59``: Python's datetime, and so every store, ends there).
    Outcome times, in span attributes and in ``/v1/outcomes``, and the query API's
    ``since`` and ``until`` are read by this one function."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{_short(text)} is not an RFC 3339 time") from None
    if t.tzinfo is None:
        return t.replace(tzinfo=UTC)
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{_short(text)} is out of range: in UTC it falls outside years "
                         "1-9999") from None


def _parse_time(key: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return utc_time(value)
    except ValueError as e:
        raise InvalidAttributes(f"{key}: {e}") from None


def _parse_date(key: str, i: int, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError as e:
        raise InvalidAttributes(f"{key}[{i}] must be a YYYY-MM-DD date, got {_short(value)}") from e


# --- decoding ------------------------------------------------------------------------------

def decode_outcome(attrs: Mapping[str, Any]) -> Outcome | None:
    fields = dict(
        correct=_scalar(attrs, c.OUTCOME_CORRECT),
        score=_scalar(attrs, c.OUTCOME_SCORE),
        decisive_chunk_ids=_tuple(_array(attrs, c.OUTCOME_DECISIVE_CHUNK_IDS)),
        required_constraints=_tuple(_array(attrs, c.OUTCOME_REQUIRED_CONSTRAINTS)),
        recalled_constraints=_tuple(_array(attrs, c.OUTCOME_RECALLED_CONSTRAINTS)),
        reviewer=_scalar(attrs, c.OUTCOME_REVIEWER),
        note=_scalar(attrs, c.OUTCOME_NOTE),
        time=_parse_time(c.OUTCOME_TIME, _scalar(attrs, c.OUTCOME_TIME)),
    )
    if all(v is None for v in fields.values()):
        return None
    return Outcome(**fields)  # type: ignore[arg-type]


def decode_record(attrs: Mapping[str, Any]) -> RagRecord:
    """Read one span's midtrace attributes; raise InvalidAttributes on any contract breach."""
    chunks, placements = _decode_chunks(attrs)
    return RagRecord(**_record_fields(attrs), chunks=chunks, placements=placements,
                     outcome=decode_outcome(attrs), prompt_sections=_decode_sections(attrs))


def check_record(attrs: Mapping[str, Any]) -> None:
    """Every check ``decode_record`` makes, in the same order, without building the record:
    what intake runs when a derive worker decodes the span again from the export's bytes."""
    _decode_chunks(attrs, build=False)
    _record_fields(attrs)
    decode_outcome(attrs)
    _decode_sections(attrs)


def _record_fields(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return dict(
        question=_scalar(attrs, c.QUESTION),
        answer=_scalar(attrs, c.ANSWER),
        model=_scalar(attrs, c.MODEL),
        template_id=_scalar(attrs, c.TEMPLATE_ID),
        template_version=_scalar(attrs, c.TEMPLATE_VERSION),
        strategy=_scalar(attrs, c.STRATEGY),
        experiment_id=_scalar(attrs, c.EXPERIMENT_ID),
        condition=_scalar(attrs, c.CONDITION),
        case_id=_scalar(attrs, c.CASE_ID),
        confidence=_scalar(attrs, c.CONFIDENCE),
        answer_constraints=_tuple(_array(attrs, c.ANSWER_CONSTRAINTS)),
        cited_ids=_tuple(_array(attrs, c.CITED_IDS)),
        unresolved_conflicts=_tuple(_array(attrs, c.UNRESOLVED_CONFLICTS)),
        prompt_tokens=_scalar(attrs, c.PROMPT_TOKENS),
        output_tokens=_scalar(attrs, c.ANSWER_TOKENS),
        prompt_chars=_scalar(attrs, c.PROMPT_CHARS),
        evidence_tokens=_scalar(attrs, c.EVIDENCE_TOKENS),
        latency_ms=_scalar(attrs, c.LATENCY_MS),
        cost_usd=_scalar(attrs, c.COST_USD),
        verifier_result=_scalar(attrs, c.VERIFIER_RESULT),
    )


def _decode_sections(attrs: Mapping[str, Any]) -> tuple[PromptSection, ...] | None:
    kinds = _array(attrs, c.SECTION_KINDS)
    starts = _array(attrs, c.SECTION_TOKEN_STARTS)
    ends = _array(attrs, c.SECTION_TOKEN_ENDS)
    if kinds is None and starts is None and ends is None:
        return None
    if kinds is None or starts is None or ends is None or not len(kinds) == len(starts) == len(ends):
        raise InvalidAttributes(
            f"{c.SECTION_KINDS}, {c.SECTION_TOKEN_STARTS} and {c.SECTION_TOKEN_ENDS} must be "
            "sent together, with one entry each per section")
    out = []
    for i, (kind, start, end) in enumerate(zip(kinds, starts, ends, strict=True)):
        if not kind or start is None or end is None:
            raise InvalidAttributes(f"section {i} needs a kind, a start and an end")
        if end < start:
            raise InvalidAttributes(f"{c.SECTION_TOKEN_ENDS}[{i}] is before its start "
                                    f"({end} < {start})")
        out.append(PromptSection(kind=str(kind), token_start=int(start), token_end=int(end)))
    return tuple(out)


def _offsets(key: str, col: list[int | None]) -> list[int | None]:
    """An offset or position column with -1 (none) read as None; a negative is refused."""
    return _with_none(key, col, -1, "must not be negative")


def _ranks(key: str, col: list[int | None]) -> list[int | None]:
    """A rank column with 0 (none) read as None; ranks are 1-based."""
    return _with_none(key, col, 0, "must be a 1-based rank")


def _with_none(key: str, col: list[int | None], none: int, rule: str) -> list[int | None]:
    """``col`` with ``none`` read as None; a value below it is refused, ``rule`` saying why.
    The common case is found in C (``min``, ``in``)."""
    present = col if None not in col else [v for v in col if v is not None]
    if present and min(present) < none:
        i, v = next((i, v) for i, v in enumerate(col) if v is not None and v < none)
        raise InvalidAttributes(f"{key}[{i}] {rule}, got {v}")
    return [None if v == none else v for v in col] if none in col else list(col)


def _decode_chunks(attrs: Mapping[str, Any], build: bool = True,
                   ) -> tuple[tuple[Chunk, ...], tuple[Placement, ...]]:
    """The chunks and their placements; with ``build=False`` only the checks (nothing built,
    ``((), ())`` returned)."""
    ids = _array(attrs, c.CHUNK_IDS)
    if ids is None:
        for a in c.CHUNK_ATTRS:
            if a.name in attrs:
                raise InvalidAttributes(f"{a.name} is sent without {c.CHUNK_IDS}")
        return (), ()
    n = len(ids)
    cols: dict[str, list[Any]] = {}
    for a in c.CHUNK_ATTRS[1:]:
        col = _array(attrs, a.name)
        if col is None:
            col = [None] * n
        elif len(col) != n:
            raise InvalidAttributes(
                f"{a.name} has {len(col)} entries but {c.CHUNK_IDS} has {n}: "
                "the chunk arrays must all have the same length")
        cols[a.name] = col
    for i, cid in enumerate(ids):
        if not cid:
            raise InvalidAttributes(f"{c.CHUNK_IDS}[{i}] is empty: every chunk needs an id")
    prompt_indices = _offsets(c.CHUNK_PROMPT_INDICES, cols[c.CHUNK_PROMPT_INDICES])
    token_starts = _offsets(c.CHUNK_TOKEN_STARTS, cols[c.CHUNK_TOKEN_STARTS])
    token_ends = _offsets(c.CHUNK_TOKEN_ENDS, cols[c.CHUNK_TOKEN_ENDS])
    char_starts = _offsets(c.CHUNK_CHAR_STARTS, cols[c.CHUNK_CHAR_STARTS])
    char_ends = _offsets(c.CHUNK_CHAR_ENDS, cols[c.CHUNK_CHAR_ENDS])
    source_positions = _offsets(c.CHUNK_SOURCE_POSITIONS, cols[c.CHUNK_SOURCE_POSITIONS])
    retrieval_ranks = _ranks(c.CHUNK_RETRIEVAL_RANKS, cols[c.CHUNK_RETRIEVAL_RANKS])
    rerank_ranks = _ranks(c.CHUNK_RERANK_RANKS, cols[c.CHUNK_RERANK_RANKS])
    stages, reasons = cols[c.CHUNK_STAGES], cols[c.CHUNK_DROP_REASONS]
    updated = cols[c.CHUNK_UPDATED_DATES]
    source_ids, labels, authorities = (cols[c.CHUNK_SOURCE_IDS], cols[c.CHUNK_LABELS],
                                       cols[c.CHUNK_AUTHORITIES])
    retrieval_scores, rerank_scores = cols[c.CHUNK_RETRIEVAL_SCORES], cols[c.CHUNK_RERANK_SCORES]
    decisive, cited, texts = cols[c.CHUNK_DECISIVE], cols[c.CHUNK_CITED], cols[c.CHUNK_TEXTS]

    stage_of: dict[str, str] = {}
    chunks: list[Chunk] = []
    raw_placements: list[tuple[int | None, int, str, int | None, int | None, int | None, int | None]] = []
    for i, (cid, stage, prompt_index, ts, te, cs, ce, reason, updated_at) in enumerate(zip(
            ids, stages, prompt_indices, token_starts, token_ends, char_starts, char_ends,
            reasons, updated)):
        placed = prompt_index is not None or ts is not None or cs is not None
        if stage is None:
            stage = "in_prompt" if placed else "retrieved"
        elif stage not in STAGES:
            raise InvalidAttributes(
                f"{c.CHUNK_STAGES}[{i}] is {stage!r}; allowed: {', '.join(STAGES)}")
        if placed and stage != "in_prompt":
            raise InvalidAttributes(
                f"chunk {cid!r} (entry {i}) has a prompt position but stage {stage!r}")
        if ts is not None or te is not None:
            _check_span(c.CHUNK_TOKEN_ENDS, i, cid, ts, te)
        if cs is not None or ce is not None:
            _check_span(c.CHUNK_CHAR_ENDS, i, cid, cs, ce)
        if reason is not None:
            if reason not in DROP_REASONS:
                raise InvalidAttributes(f"{c.CHUNK_DROP_REASONS}[{i}] is {reason!r}; "
                                        f"allowed: {', '.join(DROP_REASONS)}")
            if stage != "dropped":
                raise InvalidAttributes(f"chunk {cid!r} has a drop reason but stage {stage!r}")
        if stage == "in_prompt":
            raw_placements.append((prompt_index, i, cid, ts, te, cs, ce))
        if cid in stage_of:
            if stage != "in_prompt" or stage_of[cid] != "in_prompt":
                raise InvalidAttributes(
                    f"chunk id {cid!r} appears twice in {c.CHUNK_IDS}; an id may repeat only "
                    "for a second placement of the chunk in the prompt")
            continue
        stage_of[cid] = stage
        day = None if updated_at is None else _parse_date(c.CHUNK_UPDATED_DATES, i, updated_at)
        if build:
            chunks.append(Chunk(
                id=cid, stage=stage, drop_reason=reason,
                source_id=source_ids[i],
                source_position=source_positions[i],
                retrieval_rank=retrieval_ranks[i],
                retrieval_score=retrieval_scores[i],
                rerank_rank=rerank_ranks[i],
                rerank_score=rerank_scores[i],
                label=labels[i],
                authority=authorities[i],
                updated=day,
                decisive=decisive[i],
                cited=cited[i],
                text=texts[i],
            ))
    return tuple(chunks), _order_placements(raw_placements, build)


def _check_span(name: str, i: int, cid: str, start: int | None, end: int | None) -> None:
    """Entry ``i``'s start and end offsets (``name`` is the ends' attribute): both or neither,
    and the end not before the start."""
    if (start is None) != (end is None):
        raise InvalidAttributes(f"entry {i} of chunk {cid!r}: start and end offsets "
                                f"must be sent together ({name})")
    if start is not None and end is not None and end < start:
        raise InvalidAttributes(f"{name}[{i}] = {end} is before its start {start}")


def _order_placements(raw: list[tuple[Any, ...]], build: bool = True) -> tuple[Placement, ...]:
    with_index = [r for r in raw if r[0] is not None]
    if with_index and len(with_index) != len(raw):
        raise InvalidAttributes(
            f"{c.CHUNK_PROMPT_INDICES} is set for some in-prompt entries but not others")
    if with_index:
        raw = sorted(raw, key=lambda r: r[0])
        seen = [r[0] for r in raw]
        if len(set(seen)) != len(seen):
            raise InvalidAttributes(f"{c.CHUNK_PROMPT_INDICES} has a repeated index")
    elif any(r[3] is not None for r in raw):
        raw = sorted(raw, key=lambda r: (r[3] if r[3] is not None else -1, r[1]))
    _check_overlap(raw)
    if not build:
        return ()
    return tuple(
        Placement(chunk_id=r[2], prompt_index=k, token_start=r[3], token_end=r[4],
                  char_start=r[5], char_end=r[6])
        for k, r in enumerate(raw))


def _check_overlap(raw: Sequence[tuple[Any, ...]]) -> None:
    """In prompt order, no placement may start before the one before it ends."""
    for attr, start, end in (("token", 3, 4), ("char", 5, 6)):
        spans = [(r[start], r[end], r[2]) for r in raw if r[start] is not None]
        for (s1, e1, id1), (s2, e2, id2) in zip(spans, spans[1:]):
            if s2 < e1:
                raise InvalidAttributes(
                    f"{attr} offsets overlap: chunk {id1!r} [{s1}, {e1}) and chunk "
                    f"{id2!r} [{s2}, {e2}) in prompt order")


def estimate_tokens(record: RagRecord) -> tuple[RagRecord, bool]:
    """Fill token offsets from character offsets where only those were sent.

    Scaled by the prompt's reported token count when both its tokens and characters are
    known, else ``CHARS_PER_TOKEN``. Returns the record and whether anything was estimated.
    """
    missing = [p for p in record.placements if p.token_start is None and p.char_start is not None]
    sections = [s for s in record.prompt_sections or () if s.token_start is None
                and s.char_start is not None]
    if not missing and not sections:
        return record, False
    if record.prompt_tokens and record.prompt_chars:
        ratio = record.prompt_tokens / record.prompt_chars
    else:
        ratio = 1.0 / CHARS_PER_TOKEN
    placements = tuple(
        p if p.token_start is not None or p.char_start is None or p.char_end is None
        else Placement(p.chunk_id, p.prompt_index, int(p.char_start * ratio),
                       max(int(p.char_start * ratio), int(math.ceil(p.char_end * ratio))),
                       p.char_start, p.char_end)
        for p in record.placements)
    prompt_tokens = record.prompt_tokens
    if prompt_tokens is None and record.prompt_chars:
        prompt_tokens = int(math.ceil(record.prompt_chars * ratio))
    scaled = None if record.prompt_sections is None else tuple(
        s if s.token_start is not None or s.char_start is None or s.char_end is None
        else PromptSection(s.kind, int(s.char_start * ratio),
                           max(int(s.char_start * ratio), int(math.ceil(s.char_end * ratio))),
                           s.char_start, s.char_end)
        for s in record.prompt_sections)
    return replace(record, placements=placements, prompt_tokens=prompt_tokens,
                   prompt_sections=scaled), bool(missing)


def _merge_records(records: Sequence[RagRecord]) -> RagRecord:
    """Later records win each field they set; chunks come whole from the last that has any."""
    merged = records[0]
    for rec in records[1:]:
        updates = {f.name: getattr(rec, f.name) for f in fields(rec)
                   if f.name not in ("chunks", "placements", "outcome")
                   and getattr(rec, f.name) is not None}
        updates["outcome"] = _merge_outcomes(merged.outcome, rec.outcome)
        if rec.chunks:
            updates["chunks"] = rec.chunks
            updates["placements"] = rec.placements
        merged = replace(merged, **updates)
    return merged


def _merge_outcomes(old: Outcome | None, new: Outcome | None) -> Outcome | None:
    """Outcome attributes on two spans merge field by field; the later span wins a field."""
    if old is None or new is None:
        return old or new
    return replace(old, **{f.name: getattr(new, f.name) for f in fields(new)
                           if getattr(new, f.name) is not None})


def decode_trace(spans: Sequence[SpanRecord]) -> RagRequest | None:
    """The request a trace records in midtrace's own conventions, or None if it has none.

    Spans are taken in end-time order so a later span's value wins a field both set. Spans
    whose attributes break the contract should have been refused at receipt; here they raise.
    """
    own = sorted((s for s in spans if has_midtrace_attributes(s.attributes)),
                 key=lambda s: (s.end_ns, s.span_id))
    if not own:
        return None
    record = _merge_records([s.record if s.record is not None else decode_record(s.attributes)
                             for s in own])
    record, estimated = estimate_tokens(record)
    if record.model is None:
        record = _with_model_fallback(record, spans)
    if record.output_tokens is None:
        record = _with_output_tokens_fallback(record, spans)
    service = next((s.service for s in reversed(own) if s.service), None)
    start = min(s.start_ns for s in spans)
    return RagRequest(
        trace_id=own[0].trace_id,
        time=datetime.fromtimestamp(start / 1e9, tz=UTC),
        record=record,
        service=service,
        convention="midtrace",
        tokens_estimated=estimated,
    )


def _with_model_fallback(record: RagRecord, spans: Sequence[SpanRecord]) -> RagRecord:
    for s in sorted(spans, key=lambda s: s.end_ns, reverse=True):
        for key in ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name"):
            value = s.attributes.get(key)
            if isinstance(value, str) and value:
                return replace(record, model=value)
    return record


# The answering call's output tokens as the other conventions report them (OTel GenAI, its
# older name, OpenInference), when the app sent no midtrace.answer.tokens.
OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                     "llm.token_count.completion")


def _with_output_tokens_fallback(record: RagRecord, spans: Sequence[SpanRecord]) -> RagRecord:
    for s in sorted(spans, key=lambda s: s.end_ns, reverse=True):
        for key in OUTPUT_TOKEN_KEYS:
            value = s.attributes.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= c.MAX_INT:
                return replace(record, output_tokens=value)
    return record
