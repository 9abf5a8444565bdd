"""RagRequest -> the Arrow tables the store appends (requests, chunks, placements,
answer_sources, texts)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from midtrace.collector.normalize.answer_sources import AnswerSource, answer_sources
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.schemas.chunk_hash import RedactedText, content_hash
from midtrace.schemas.model import Outcome, RagRequest

REQUESTS = pa.schema([
    ("request_id", pa.int64()), ("trace_id", pa.string()), ("time", pa.timestamp("us", tz="UTC")),
    ("service", pa.string()), ("model", pa.string()), ("template_id", pa.string()),
    ("template_version", pa.string()), ("strategy", pa.string()), ("experiment_id", pa.string()),
    ("condition", pa.string()), ("case_id", pa.string()), ("question", pa.string()),
    ("answer", pa.string()), ("confidence", pa.float64()),
    ("answer_constraints", pa.list_(pa.string())), ("cited_ids", pa.list_(pa.string())),
    ("unresolved_conflicts", pa.list_(pa.string())), ("prompt_tokens", pa.int32()),
    ("output_tokens", pa.int32()),
    ("prompt_chars", pa.int32()), ("evidence_tokens", pa.int32()),
    ("tokens_estimated", pa.bool_()), ("latency_ms", pa.float64()), ("cost_usd", pa.float64()),
    ("verifier_result", pa.string()), ("convention", pa.string()),
    ("warnings", pa.list_(pa.string())),
    ("prompt_sections", pa.list_(pa.struct([("kind", pa.string()), ("token_start", pa.int32()),
                                            ("token_end", pa.int32())]))),
    ("kind", pa.string()),
])
CHUNKS = pa.schema([
    ("request_id", pa.int64()), ("chunk_id", pa.string()), ("ordinal", pa.int32()),
    ("stage", pa.string()), ("drop_reason", pa.string()), ("source_id", pa.string()),
    ("source_position", pa.int32()), ("retrieval_rank", pa.int32()),
    ("retrieval_score", pa.float64()), ("rerank_rank", pa.int32()), ("rerank_score", pa.float64()),
    ("label", pa.string()), ("authority", pa.string()), ("updated", pa.date32()),
    ("decisive", pa.bool_()), ("cited", pa.bool_()), ("text_hash", pa.string()),
    ("text_chars", pa.int32()),
])
PLACEMENTS = pa.schema([
    ("request_id", pa.int64()), ("chunk_id", pa.string()), ("prompt_index", pa.int32()),
    ("token_start", pa.int32()), ("token_end", pa.int32()), ("char_start", pa.int32()),
    ("char_end", pa.int32()),
])
ANSWER_SOURCES = pa.schema([
    ("request_id", pa.int64()), ("chunk_id", pa.string()), ("ordinal", pa.int32()),
    ("kind", pa.string()), ("answer_start", pa.int32()), ("answer_end", pa.int32()),
    ("chunk_start", pa.int32()), ("chunk_end", pa.int32()), ("matched", pa.string()),
    ("matched_hash", pa.string()),
])
TEXTS = pa.schema([("text_hash", pa.string()), ("text", pa.string())])
OUTCOMES = pa.schema([
    ("outcome_id", pa.int64()), ("trace_id", pa.string()), ("origin", pa.string()),
    ("time", pa.timestamp("us", tz="UTC")), ("received_at", pa.timestamp("us", tz="UTC")),
    ("correct", pa.bool_()), ("score", pa.float64()),
    ("decisive_chunk_ids", pa.list_(pa.string())), ("required_constraints", pa.list_(pa.string())),
    ("recalled_constraints", pa.list_(pa.string())), ("reviewer", pa.string()), ("note", pa.string()),
    ("grader", pa.string()),
])
SPANS = pa.schema([
    ("trace_id", pa.string()), ("span_id", pa.string()), ("parent_span_id", pa.string()),
    ("name", pa.string()), ("kind", pa.int32()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("service", pa.string()), ("scope", pa.string()), ("status_code", pa.int32()),
    ("dropped_attributes_count", pa.int32()), ("attributes", pa.string()), ("resource", pa.string()),
    ("received_at", pa.timestamp("us", tz="UTC")),
])


# Chunk and placement columns filled straight from the model's attribute of the same meaning.
_CHUNK_ATTRS = (("chunk_id", "id"), ("stage", "stage"), ("drop_reason", "drop_reason"),
                ("source_id", "source_id"), ("source_position", "source_position"),
                ("retrieval_rank", "retrieval_rank"), ("retrieval_score", "retrieval_score"),
                ("rerank_rank", "rerank_rank"), ("rerank_score", "rerank_score"),
                ("label", "label"), ("authority", "authority"), ("updated", "updated"),
                ("decisive", "decisive"), ("cited", "cited"))
_PLACEMENT_ATTRS = ("chunk_id", "prompt_index", "token_start", "token_end", "char_start", "char_end")


GRADED_FIELDS = ("correct", "score", "decisive_chunk_ids", "required_constraints",
                 "recalled_constraints", "reviewer", "note")


def graded_fields(o: Outcome, keep_text: bool) -> dict[str, Any]:
    """The merged fields of an outcome as the outcomes table stores them."""
    return dict(
        correct=o.correct, score=o.score, decisive_chunk_ids=_list(o.decisive_chunk_ids),
        required_constraints=_phrases(o.required_constraints, keep_text),
        recalled_constraints=_phrases(o.recalled_constraints, keep_text),
        reviewer=o.reviewer, note=_kept(o.note, keep_text),
    )


def _kept(text: str | None, keep_text: bool) -> str | None:
    return text if keep_text and not isinstance(text, RedactedText) else None


def _phrases(values: tuple[str, ...] | None, keep_text: bool) -> list[str] | None:
    """Short texts compared by equality (constraints, conflicts): as sent, or without text
    their content hashes, which still compare equal (constraint recall needs nothing more)."""
    if values is None:
        return None
    if keep_text and not any(isinstance(v, RedactedText) for v in values):
        return list(values)
    return [content_hash(v) for v in values]


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes_base64": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot store {type(value).__name__} in span attributes")


def dumps(obj: Any) -> str:
    """Compact JSON text of span attributes (or a resource). orjson writes it 3-6x faster
    than the json module; where the two would differ, the json module writes it: orjson
    refuses a lone surrogate, an integer beyond 64 bits and a key that is not a string, and
    writes null where json writes NaN or Infinity."""
    try:
        text = orjson.dumps(obj, default=_json_default).decode()
    except TypeError:
        return _json_dumps(obj)
    if "null" in text and not _nulls_are_nones(obj, text) and _non_finite(obj):
        return _json_dumps(obj)
    return text


def _nulls_are_nones(obj: Any, text: str) -> bool:
    """Whether each ``null`` in ``text`` (orjson's of the dict ``obj``) stands for a None
    among ``obj``'s values or the values of its lists, so that none stands for a NaN or an
    infinity. The Nones are counted in C, list by list; a ``null`` inside a string, or a
    None deeper down, makes the counts differ, and ``_non_finite`` looks value by value.
    Span attributes hold Nones in their chunk arrays (a dropped chunk has no prompt index):
    counted so, they cost 10 µs a request against 22 (bench/ingest.py's own conventions)."""
    if type(obj) is not dict:  # dumps is given attributes and resources: dicts
        return False
    values = list(obj.values())
    nones = values.count(None) + sum([v.count(None) for v in values if type(v) is list])
    return text.count("null") == nones


def _non_finite(value: Any) -> bool:
    """Whether ``value`` holds a float that is NaN or infinite. The kinds of a list's values
    are taken in one pass in C, so a list of strings costs no loop here."""
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is dict:
        value = list(value.values())
    elif type(value) is not list:
        return False
    kinds = set(map(type, value))
    if float in kinds:  # a sum of finite floats may overflow to infinity: json writes it then
        floats = value if len(kinds) == 1 else [v for v in value if type(v) is float]
        if not math.isfinite(sum(floats)):
            return True
    return (list in kinds or dict in kinds) and any(
        _non_finite(v) for v in value if type(v) is list or type(v) is dict)


def _json_dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Rows:
    """Columns accumulated for one write, as plain lists keyed by schema field."""

    requests: dict[str, list[Any]] = field(default_factory=lambda: _empty(REQUESTS))
    chunks: dict[str, list[Any]] = field(default_factory=lambda: _empty(CHUNKS))
    placements: dict[str, list[Any]] = field(default_factory=lambda: _empty(PLACEMENTS))
    answer_sources: dict[str, list[Any]] = field(default_factory=lambda: _empty(ANSWER_SOURCES))
    texts: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, list[Any]] = field(default_factory=lambda: _empty(OUTCOMES))
    hashes: TextHashes = field(default_factory=lambda: TextHashes(content_hash))  # memo of content_hash

    def add_request(self, request_id: int, req: RagRequest, keep_text: bool = True) -> None:
        r = req.record
        values = dict(
            request_id=request_id, trace_id=req.trace_id, time=req.time, service=req.service,
            model=r.model, template_id=r.template_id, template_version=r.template_version,
            strategy=r.strategy, experiment_id=r.experiment_id, condition=r.condition,
            case_id=r.case_id, question=_kept(r.question, keep_text),
            answer=_kept(r.answer, keep_text), confidence=r.confidence,
            answer_constraints=_phrases(r.answer_constraints, keep_text),
            cited_ids=_list(r.cited_ids),
            unresolved_conflicts=_phrases(r.unresolved_conflicts, keep_text),
            prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
            prompt_chars=r.prompt_chars, evidence_tokens=r.evidence_tokens,
            tokens_estimated=req.tokens_estimated, latency_ms=r.latency_ms, cost_usd=r.cost_usd,
            verifier_result=_kept(r.verifier_result, keep_text), convention=req.convention,
            warnings=list(req.warnings) or None,
            prompt_sections=[{"kind": x.kind, "token_start": x.token_start,
                              "token_end": x.token_end} for x in r.prompt_sections
                             if x.token_start is not None] or None
            if r.prompt_sections else None,
            kind=req.kind,
        )
        _append(self.requests, values)
        chunks = r.chunks
        if chunks:
            hashes: list[str | None] = []
            chars: list[int | None] = []
            for ch in chunks:
                text = ch.text
                if isinstance(text, RedactedText):
                    hashes.append(text.content_hash)
                    chars.append(text.chars)
                elif text:
                    h = self.hashes(text)
                    hashes.append(h)
                    chars.append(len(text))
                    if keep_text:
                        self.texts.setdefault(h, text)
                else:
                    hashes.append(None)
                    chars.append(None)
            cols = self.chunks
            cols["request_id"].extend([request_id] * len(chunks))
            cols["ordinal"].extend(range(len(chunks)))
            cols["text_hash"].extend(hashes)
            cols["text_chars"].extend(chars)
            for column, attr in _CHUNK_ATTRS:
                cols[column].extend([getattr(ch, attr) for ch in chunks])
        placements = r.placements
        if placements:
            cols = self.placements
            cols["request_id"].extend([request_id] * len(placements))
            for column in _PLACEMENT_ATTRS:
                cols[column].extend([getattr(p, column) for p in placements])
        sources = answer_sources(r)
        if sources:
            self._add_sources(request_id, r.answer or "", sources, keep_text)

    def _add_sources(self, request_id: int, answer: str, sources: list[AnswerSource],
                     keep_text: bool) -> None:
        cols = self.answer_sources
        for source in sources:
            for m in source.matches:
                matched = answer[m.answer_start:m.answer_end]
                cols["request_id"].append(request_id)
                cols["chunk_id"].append(source.chunk_id)
                cols["ordinal"].append(source.ordinal)
                cols["kind"].append(m.kind)
                cols["answer_start"].append(m.answer_start)
                cols["answer_end"].append(m.answer_end)
                cols["chunk_start"].append(m.chunk_start)
                cols["chunk_end"].append(m.chunk_end)
                cols["matched"].append(matched if keep_text else None)
                cols["matched_hash"].append(self.hashes(matched))

    def add_outcome(self, outcome_id: int, trace_id: str, origin: str, o: Outcome,
                    received_at: datetime, keep_text: bool = True) -> None:
        _append(self.outcomes, dict(
            outcome_id=outcome_id, trace_id=trace_id, origin=origin, time=o.time,
            received_at=received_at, **graded_fields(o, keep_text), grader=o.grader,
        ))

    def tables(self) -> dict[str, pa.Table]:
        return {
            "requests": pa.table(self.requests, schema=REQUESTS),
            "chunks": pa.table(self.chunks, schema=CHUNKS),
            "placements": pa.table(self.placements, schema=PLACEMENTS),
            "answer_sources": pa.table(self.answer_sources, schema=ANSWER_SOURCES),
            "chunk_texts": pa.table({"text_hash": list(self.texts), "text": list(self.texts.values())},
                                    schema=TEXTS),
            "outcomes": pa.table(self.outcomes, schema=OUTCOMES),
        }


def _empty(schema: pa.Schema) -> dict[str, list[Any]]:
    return {name: [] for name in schema.names}


def _append(columns: dict[str, list[Any]], values: dict[str, Any]) -> None:
    for key, column in columns.items():
        column.append(values[key])


def _list(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)
