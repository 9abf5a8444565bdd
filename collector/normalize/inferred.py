"""Build a RagRequest from what a stock instrumentation observed.

The OpenInference and OTel GenAI normalizers each read their own attribute names into the
plain records below (rankings of documents, LLM calls); what is inferred from them is the
same for both and lives here:

- the answering call: the last LLM call to end whose prompt contains a retrieved document
  (docs/architecture.md, "One trace = one request");
- each document's place in that prompt (collector/normalize/locate.py), with character offsets and
  token offsets estimated from them (scaled by the call's reported prompt tokens, else
  4 characters a token);
- stages: ``in_prompt`` when found in the prompt, ``dropped`` when retrieved but not found
  (or cut by a reranker), else ``reranked``/``retrieved``;
- the citations in the answer, mapped back to chunks;
- the request's kind: ``rag`` with an answering call, ``retrieval_only`` without one, and
  ``llm_only`` for a trace with LLM calls and no document (its last call to end).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from datetime import UTC, datetime
from typing import Any

from midtrace.collector.normalize.attr_values import readable, text_length
from midtrace.collector.normalize.sections import message_spans, prompt_sections
from midtrace.collector.normalize.locate import Found, locate, normalize_key, prompt_labels, resolve_citations
from midtrace.schemas.chunk_hash import RedactedText, content_hash
from midtrace.schemas.decode import estimate_tokens
from midtrace.schemas.frozen import stored_at_once
from midtrace.schemas.model import Chunk, Convention, Placement, RagRecord, RagRequest, Stage
from midtrace.schemas.span import SpanRecord

ATTRIBUTE_LIMIT_WARNING = (
    "{n} span(s) of this trace lost attributes to the OpenTelemetry SDK's limit of 128 "
    "attributes per span ({names}); the SDK drops the oldest ones silently, so a retriever "
    "span with more than 30 to 60 documents loses the first ones. Raise the limit in the app "
    "with OTEL_ATTRIBUTE_COUNT_LIMIT (or OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT).")

NOT_KEPT_WARNING = (
    "document or prompt texts of this trace were not kept (--no-text): where the documents sat "
    "in the prompt is found only while the trace arrives in one export, not across exports or "
    "on rebuild")


NO_LLM_WARNING = (
    "this trace has retrieval but no LLM call: it is kept with what was retrieved, with no "
    "answer, no prompt and no chunk dropped")


@stored_at_once
@dataclass(frozen=True)
class Document:
    """A document as a retriever or reranker reported it."""

    text: str | None
    doc_id: str | None = None
    score: float | None = None
    source_id: str | None = None

    @cached_property
    def chunk_id(self) -> str | None:
        """The id the app sent, else the documented content hash of the text."""
        if self.doc_id:
            return self.doc_id
        return content_hash(self.text) if self.text is not None else None


@stored_at_once
@dataclass(frozen=True)
class Ranking:
    """The documents one retriever or reranker span returned, as ``(rank, document)``.

    ``inputs`` are the documents a reranker was given (empty for a retriever): those it
    did not return were cut by it. ``from_tool``: documents a tool returned (its query is
    the one the model wrote, not the user's question).
    """

    span: SpanRecord
    documents: tuple[tuple[int, Document], ...]
    query: str | None = None
    inputs: tuple[Document, ...] = ()
    from_tool: bool = False


@stored_at_once
@dataclass(frozen=True)
class LlmCall:
    """One LLM span: its whole prompt as one string (None when not recorded) and answer."""

    span: SpanRecord
    prompt: str | None
    answer: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    user_text: str | None = None
    # (role, characters) of each message the prompt joins, in order (collector/normalize/sections.py)
    messages: tuple[tuple[str | None, int], ...] = ()


@stored_at_once
@dataclass(frozen=True)
class Observation:
    """Everything a normalizer read from one trace."""

    convention: Convention
    retrievals: tuple[Ranking, ...] = ()
    reranks: tuple[Ranking, ...] = ()
    calls: tuple[LlmCall, ...] = ()
    question: str | None = None
    # (root span id, question) of each root chain with one, by start: in a multi-turn trace
    # the question is that of the root the answering call runs under
    root_questions: tuple[tuple[str, str], ...] = ()
    template_id: str | None = None
    template_version: str | None = None
    warnings: tuple[str, ...] = ()


def _by_end(span: SpanRecord) -> tuple[int, str]:
    return span.end_ns, span.span_id


def _by_start(span: SpanRecord) -> tuple[int, str]:
    return span.start_ns, span.span_id


class _ChunkTable:
    """Chunks by id in the order first seen, each a dict of Chunk fields."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.cut: set[str] = set()

    def add(self, doc: Document) -> str | None:
        cid = doc.chunk_id
        if cid is None:
            return None
        row = self.rows.setdefault(cid, {"id": cid})
        if doc.text is not None and readable(row.get("text")) is None:
            if row.get("text") is None or readable(doc.text) is not None:
                row["text"] = doc.text
        if row.get("source_id") is None and doc.source_id is not None:
            row["source_id"] = doc.source_id
        return cid

    def texts(self) -> list[str | None]:
        """Each chunk's text as it can be searched for: None when absent or not kept."""
        return [readable(row.get("text")) for row in self.rows.values()]

    def withheld(self) -> bool:
        """Whether some chunk's text was not kept (``--no-text``)."""
        return any(isinstance(row.get("text"), RedactedText) for row in self.rows.values())


def _collect(obs: Observation) -> _ChunkTable:
    table = _ChunkTable()
    for ranking in sorted(obs.retrievals, key=lambda r: _by_start(r.span)):
        for rank, doc in ranking.documents:
            cid = table.add(doc)
            if cid is not None and table.rows[cid].get("retrieval_rank") is None:
                table.rows[cid]["retrieval_rank"] = rank
                table.rows[cid]["retrieval_score"] = doc.score
    for ranking in sorted(obs.reranks, key=lambda r: _by_end(r.span)):
        returned: set[str] = set()
        for rank, doc in ranking.documents:
            cid = table.add(doc)
            if cid is not None:
                table.rows[cid]["rerank_rank"] = rank
                table.rows[cid]["rerank_score"] = doc.score
                returned.add(cid)
        for doc in ranking.inputs:
            cid = table.add(doc)
            if cid is not None and cid not in returned:
                table.cut.add(cid)
    return table


def _answering(obs: Observation, table: _ChunkTable
               ) -> tuple[LlmCall | None, list[Found], list[str]]:
    """The answering call and where the documents sit in its prompt."""
    calls = sorted(obs.calls, key=lambda c: _by_end(c.span), reverse=True)
    if not calls:
        return None, [], [NO_LLM_WARNING]
    texts = table.texts()
    searchable = any(texts)
    for call in calls:
        prompt = readable(call.prompt)
        if prompt and searchable:
            found = locate(prompt, texts)
            if found:
                return call, found, []
    rankings = obs.retrievals + obs.reranks
    first_done = min(r.span.end_ns for r in rankings) if rankings else 0
    # a call that ends after the first retrieval did; not one that starts after it: the
    # OpenTelemetry JS SDK records span starts to the millisecond, ends finer, so the model
    # call right after a retrieval may "start" before that retrieval ended
    after = [c for c in calls if c.span.end_ns > first_done]
    if not after:
        return None, [], []
    call = after[0]
    if table.withheld() or (call.prompt and readable(call.prompt) is None):
        return call, [], [NOT_KEPT_WARNING]
    if not searchable:
        return call, [], [
            "the retrieved documents carry no text (only ids), so where they sat in the "
            "prompt cannot be inferred"]
    if call.prompt:
        return call, [], [
            "no LLM prompt in this trace contains a retrieved document; the last LLM call "
            "after retrieval is taken as the answer and every document as dropped"]
    return call, [], [
        "the answering LLM span records no prompt text (are its inputs hidden?), so where "
        "the documents sat in the prompt is unknown"]


def _stage(cid: str, row: dict[str, Any], placed: set[str], prompt_known: bool,
           cut: set[str]) -> Stage:
    if cid in placed:
        return "in_prompt"
    # A document with no text cannot be looked for, so its absence says nothing.
    if (prompt_known and readable(row.get("text"))) or cid in cut:
        return "dropped"
    return "reranked" if row.get("rerank_rank") is not None else "retrieved"


def _citations(answer: str, prompt: str | None, placements: Sequence[Placement],
               rows: dict[str, dict[str, Any]], pattern: re.Pattern[str],
               messages: Sequence[tuple[str | None, int]] = ()
               ) -> tuple[tuple[str, ...] | None, list[str]]:
    spans = [(p.char_start or 0, p.char_end or 0) for p in placements]
    starts = [start for _, start, _ in message_spans(messages)]
    labels = prompt_labels(prompt, spans, pattern, starts) if prompt else [None] * len(spans)
    aliases: dict[str, list[str]] = {}
    for cid, row in rows.items():
        for name in (cid, row.get("source_id")):
            if name:
                aliases.setdefault(normalize_key(str(name)), []).append(cid)
    result = resolve_citations(answer, [p.chunk_id for p in placements], labels, aliases,
                               pattern)
    if result is None:
        return None, []
    warnings = []
    numeric = [k for k in result.unresolved if k.isdecimal()]
    if numeric:
        warnings.append("the answer cites " + ", ".join(f"[{k}]" for k in numeric)
                        + ", which matches no document label, id or prompt position")
    return result.cited_ids, warnings


def _limit_warning(spans: Sequence[SpanRecord]) -> list[str]:
    cut = sorted((s for s in spans if s.dropped_attributes_count > 0), key=_by_start)
    if not cut:
        return []
    names = ", ".join(f"{s.name!r} lost {s.dropped_attributes_count}" for s in cut[:5])
    return [ATTRIBUTE_LIMIT_WARNING.format(n=len(cut), names=names)]


def _question(obs: Observation, call: LlmCall | None,
              spans: Sequence[SpanRecord]) -> str | None:
    """The root chain's question: of several roots (turns), the one the answering call is in."""
    if call is not None and len(obs.root_questions) > 1:
        by_id = {s.span_id: s for s in spans}
        above, parent = set(), call.span.parent_span_id
        while parent and parent in by_id and parent not in above:
            above.add(parent)
            parent = by_id[parent].parent_span_id
        found = next((q for sid, q in obs.root_questions if sid in above), None)
        if found is not None:
            return found
    if obs.question:
        return obs.question
    return obs.root_questions[0][1] if obs.root_questions else None


def evidence_tokens(placements: Sequence[Placement]) -> int | None:
    """Tokens from the first placed chunk's start to the last one's end."""
    spans = [(p.token_start, p.token_end) for p in placements
             if p.token_start is not None and p.token_end is not None]
    if not spans:
        return None
    return max(e for _, e in spans) - min(s for s, _ in spans)


def assemble(spans: Sequence[SpanRecord], obs: Observation,
             pattern: re.Pattern[str]) -> RagRequest | None:
    """The request ``obs`` describes, or None when it holds no identifiable document."""
    table = _collect(obs)
    if not table.rows:
        return _llm_only(spans, obs) if obs.calls else None
    ids = list(table.rows)
    call, found, warnings = _answering(obs, table)
    warnings = list(obs.warnings) + warnings
    prompt = call.prompt if call is not None else None
    searched = readable(prompt)
    placements = tuple(
        Placement(chunk_id=ids[f.doc], prompt_index=k, char_start=f.start, char_end=f.end)
        for k, f in enumerate(found))
    truncated = {ids[f.doc] for f in found if f.truncated}
    if truncated:
        warnings.append(f"{len(truncated)} document(s) appear in the prompt only cut short "
                        "(found by a prefix of their text)")
    placed = {p.chunk_id for p in placements}

    answer = call.answer if call is not None else None
    cited_ids: tuple[str, ...] | None = None
    readable_answer = readable(answer)
    if readable_answer:
        cited_ids, cite_warnings = _citations(readable_answer, searched, placements, table.rows,
                                              pattern, call.messages if call is not None else ())
        warnings += cite_warnings
    chunks = tuple(
        Chunk(**{**row, "stage": _stage(cid, row, placed, bool(searched), table.cut),
                 "cited": None if cited_ids is None else cid in cited_ids})
        for cid, row in table.rows.items())

    rankings = sorted(obs.retrievals + obs.reranks, key=lambda r: _by_start(r.span))
    question = (_question(obs, call, spans)
                or next((r.query for r in rankings if r.query and not r.from_tool), None)
                or (call.user_text if call is not None else None)
                or next((r.query for r in rankings if r.query), None))
    start = min(s.start_ns for s in spans)
    record = RagRecord(
        question=question,
        answer=answer,
        model=call.model if call is not None else None,
        template_id=obs.template_id,
        template_version=obs.template_version,
        cited_ids=cited_ids,
        prompt_tokens=call.prompt_tokens if call is not None else None,
        output_tokens=call.output_tokens if call is not None else None,
        prompt_chars=text_length(prompt) if prompt else None,
        latency_ms=(max(s.end_ns for s in spans) - start) / 1e6,
        cost_usd=call.cost_usd if call is not None else None,
        chunks=chunks,
        placements=placements,
        prompt_sections=prompt_sections(
            call.messages, [(f.start, f.end) for f in found], searched, readable(question))
        if call is not None and call.messages else None,
    )
    record, estimated = estimate_tokens(record)
    record = replace(record, evidence_tokens=evidence_tokens(record.placements))
    ordered = sorted(spans, key=_by_start)
    service = (call.span.service if call is not None else None) or next(
        (s.service for s in ordered if s.service), None)
    return RagRequest(
        trace_id=ordered[0].trace_id,
        time=datetime.fromtimestamp(start / 1e9, tz=UTC),
        record=record,
        service=service,
        convention=obs.convention,
        tokens_estimated=estimated,
        warnings=tuple(dict.fromkeys(warnings + _limit_warning(spans))),
        kind="rag" if call is not None else "retrieval_only",
    )


def _llm_only(spans: Sequence[SpanRecord], obs: Observation) -> RagRequest:
    """A trace with LLM calls and no retrieval: its last call to end, kept as an ``llm_only``
    request (no chunks, so in no metric)."""
    call = max(obs.calls, key=lambda c: _by_end(c.span))
    question = _question(obs, call, spans) or call.user_text
    start = min(s.start_ns for s in spans)
    prompt = call.prompt
    record = RagRecord(
        question=question,
        answer=call.answer,
        model=call.model,
        template_id=obs.template_id,
        template_version=obs.template_version,
        prompt_tokens=call.prompt_tokens,
        prompt_chars=text_length(prompt) if prompt else None,
        latency_ms=(max(s.end_ns for s in spans) - start) / 1e6,
        cost_usd=call.cost_usd,
        prompt_sections=prompt_sections(call.messages, [], readable(prompt), readable(question))
        if call.messages else None,
    )
    record, estimated = estimate_tokens(record)
    ordered = sorted(spans, key=_by_start)
    return RagRequest(
        trace_id=ordered[0].trace_id,
        time=datetime.fromtimestamp(start / 1e9, tz=UTC),
        record=record,
        service=call.span.service or next((s.service for s in ordered if s.service), None),
        convention=obs.convention,
        tokens_estimated=estimated,
        warnings=tuple(_limit_warning(spans)),
        kind="llm_only",
    )
