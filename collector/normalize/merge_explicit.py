"""Merge what an app recorded in midtrace's own attributes with what was inferred.

A trace can mix conventions: the app sets a few ``midtrace.*`` attributes on its root span
(labels, the case id, an outcome) while OpenInference instrumentation describes the
retriever and the LLM call. Explicit values win field by field; inferred ones fill the
rest:

- request fields: the app's value where it sent one;
- chunks are matched by id, and an app chunk that sent its text also matches the inferred
  chunk with that text's content hash (it then keeps the app's id); a matched chunk takes
  each field from the app where set; its stage too, except the decoder's default
  ``retrieved``, which a further inferred stage replaces;
- placements: the app's when it sent any (then chunks the app did not list are left out),
  else the inferred ones, with the chunks only the instrumentation saw added after the
  app's; token offsets are then re-estimated if the app reported its own prompt tokens;
- when the app lists chunks and none of them matches an inferred one, the app's chunk list
  stands alone (two id schemes cannot be told apart), with a warning.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from midtrace.collector.normalize.inferred import evidence_tokens
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.decode import estimate_tokens
from midtrace.schemas.model import Chunk, Placement, RagRecord, RagRequest

_POSITION_FIELDS = ("chunks", "placements", "outcome", "prompt_chars")


def _rename(request: RagRequest, names: dict[str, str]) -> RagRecord:
    record = request.record
    if not names:
        return record
    return replace(
        record,
        chunks=tuple(replace(c, id=names.get(c.id, c.id)) for c in record.chunks),
        placements=tuple(replace(p, chunk_id=names.get(p.chunk_id, p.chunk_id))
                         for p in record.placements),
        cited_ids=None if record.cited_ids is None
        else tuple(names.get(i, i) for i in record.cited_ids),
    )


def _merge_chunk(own: Chunk, inferred: Chunk | None) -> Chunk:
    if inferred is None:
        return own
    values: dict[str, Any] = {}
    for f in fields(Chunk):
        mine = getattr(own, f.name)
        values[f.name] = mine if mine is not None else getattr(inferred, f.name)
    if own.stage == "retrieved":
        values["stage"] = inferred.stage
    return Chunk(**values)


def _retokenize(record: RagRecord) -> RagRecord:
    bare = tuple(Placement(p.chunk_id, p.prompt_index, None, None, p.char_start, p.char_end)
                 for p in record.placements)
    record, _ = estimate_tokens(replace(record, placements=bare))
    return replace(record, evidence_tokens=evidence_tokens(record.placements))


def merge_explicit(own: RagRequest, inferred: RagRequest) -> RagRequest:
    """``own`` (midtrace attributes) merged over ``inferred`` (OpenInference or GenAI)."""
    mine = own.record
    inferred_ids = {c.id for c in inferred.record.chunks}
    names = {content_hash(c.text): c.id for c in mine.chunks
             if c.text is not None and content_hash(c.text) in inferred_ids
             and c.id not in inferred_ids}
    theirs = _rename(inferred, names)
    by_id = {c.id: c for c in theirs.chunks}
    matched = [c for c in mine.chunks if c.id in by_id]
    warnings = list(own.warnings) + list(inferred.warnings)

    values = {f.name: getattr(mine, f.name) if getattr(mine, f.name) is not None
              else getattr(theirs, f.name)
              for f in fields(RagRecord) if f.name not in _POSITION_FIELDS}
    values["outcome"] = mine.outcome
    inferred_positions = False
    if mine.chunks and not matched:
        chunks, placements = mine.chunks, mine.placements
        if theirs.chunks:
            warnings.append(f"{len(theirs.chunks)} chunk(s) seen by the instrumentation match "
                            "none of the app's chunk ids; the app's chunk list is kept alone")
    elif mine.placements:
        chunks = tuple(_merge_chunk(c, by_id.get(c.id)) for c in mine.chunks)
        placements = mine.placements
        left_out = len(set(by_id) - {c.id for c in mine.chunks})
        if left_out:
            warnings.append(f"{left_out} chunk(s) seen by the instrumentation but not listed by "
                            "the app were left out, since the app sent its own positions")
    else:
        own_ids = {c.id for c in mine.chunks}
        chunks = tuple(_merge_chunk(c, by_id.get(c.id)) for c in mine.chunks) + tuple(
            c for c in theirs.chunks if c.id not in own_ids)
        placements = theirs.placements
        inferred_positions = bool(placements)

    # Character offsets only mean something against the prompt they were measured in.
    if inferred_positions or mine.prompt_chars is None:
        prompt_chars = theirs.prompt_chars
    else:
        prompt_chars = mine.prompt_chars
    record = RagRecord(**values, chunks=chunks, placements=placements, prompt_chars=prompt_chars)
    estimated = own.tokens_estimated
    if inferred_positions:
        estimated = inferred.tokens_estimated
        if mine.prompt_tokens is not None and mine.prompt_tokens != theirs.prompt_tokens:
            record = _retokenize(record)
            if mine.evidence_tokens is not None:
                record = replace(record, evidence_tokens=mine.evidence_tokens)
    return RagRequest(
        trace_id=own.trace_id,
        time=min(own.time, inferred.time),
        record=record,
        service=own.service or inferred.service,
        convention=inferred.convention if inferred_positions else own.convention,
        tokens_estimated=estimated,
        warnings=tuple(dict.fromkeys(warnings)),
    )
