"""What ``--no-text`` keeps of a span (collector/storage/redact.py), and what the normalizers
make of a trace read back without its text: the same chunk ids, sources and template id."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from midtrace.collector.intake.otlp import SpanRecord
from midtrace.collector.normalize.inferred import NOT_KEPT_WARNING
from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.intake.accept import redacted_export
from midtrace.collector.normalize.attr_values import identifier, number
from midtrace.collector.storage.derive import spans_of_raw
from midtrace.collector.storage.redact import MARKER_DEPTH, MAX_DEPTH, REDACTED, keeps_strings, scrub
from midtrace.collector.storage.spanstore import SpanEncoder, span_from_row
from midtrace.schemas.chunk_hash import RedactedText, content_hash
from midtrace.schemas import conventions as c
from tests.e2e.test_no_text import PREFIX, Markers, Sent, genai_trace, openinference_trace
from tests.zero_code import provider_with, records

ROW_COLUMNS = ("trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns",
               "service", "scope", "status_code", "dropped_attributes_count", "attributes",
               "resource", "text_refs")


def redacted(text: str) -> dict[str, Any]:
    return {REDACTED: {"hash": content_hash(text), "chars": len(text)}}


def test_ids_labels_and_numbers_are_kept_and_any_other_string_is_not() -> None:
    assert scrub("retrieval.documents.3.document.id", "doc-3") == "doc-3"
    assert scrub("llm.output_messages.0.message.tool_calls.1.tool_call.function.name",
                 "lookup") == "lookup"
    assert scrub(c.CHUNK_IDS, ["a", "b"]) == ["a", "b"]
    assert scrub("llm.token_count.prompt", 300) == 300
    assert scrub("retrieval.documents.3.document.score", 0.5) == 0.5
    for key in ("retrieval.documents.3.document.content", "reranker.query",
                "gen_ai.tool.call.arguments", "an.attribute.nobody.has.named", c.QUESTION,
                c.OUTCOME_NOTE, "llm.prompt_template.template"):
        assert not keeps_strings(key), key
        assert scrub(key, "some words") == redacted("some words"), key
    assert scrub(c.OUTCOME_REQUIRED_CONSTRAINTS, ["x", ""]) == [redacted("x"), ""]
    assert scrub("app.blob", b"\x00words") == {REDACTED: {
        "hash": "sha256:" + hashlib.sha256(b"\x00words").hexdigest(), "chars": 6, "bytes": True}}


def test_a_json_text_keeps_its_ids_and_numbers_and_loses_its_strings() -> None:
    docs = [{"id": "g-1", "score": 0.9, "content": "the text",
             "metadata": {"source": "kb/a.md", "title": "a title", "page": 3}}]
    text = json.dumps(docs)
    assert scrub("gen_ai.retrieval.documents", text) == {REDACTED: {
        "hash": content_hash(text), "chars": len(text),
        "json": [{"id": "g-1", "score": 0.9, "content": redacted("the text"),
                  "metadata": {"source": "kb/a.md", "title": redacted("a title"), "page": 3}}]}}
    # a structured (kvlist) value: the same rule, one level down
    assert scrub("app.map", {"id": "x", "note": "words", "id_list": ["y"]}) == {
        "id": "x", "note": redacted("words"), "id_list": [redacted("y")]}
    # under an id field only a plain string is kept
    assert scrub("app.map", {"id": {"nested": "words"}}) == {"id": {"nested": redacted("words")}}


def span_with(value: Any) -> SpanRecord:
    return SpanRecord(trace_id="0" * 31 + "1", span_id="0" * 15 + "1", parent_span_id=None,
                      name="llm", kind=1, start_ns=1, end_ns=2, attributes={"input.value": value},
                      resource={}, scope=None, status_code=0)


def logged_and_read_back(value: Any) -> Any:
    """``value`` as the intake log of a --no-text collector keeps it, read back as recovery
    reads it (None when that entry cannot be read)."""
    spans = spans_of_raw(redacted_export([span_with(value)]))
    return spans[0].attributes["input.value"] if spans else None


def nested(depth: int, make: Callable[[Any], Any]) -> Any:
    value: Any = "words"
    for _ in range(depth):
        value = make(value)
    return value


def test_a_json_integer_past_64_bits_is_kept_as_its_digits() -> None:
    """Before: a JSON text holding such an integer (a 30-digit id) could not be encoded as the
    intake log's protobuf, and its whole export was answered 500."""
    text = json.dumps([{"id": 10**30, "score": 10**400, "rank": 2**63 - 1, "low": -2**63}])
    kept = logged_and_read_back(text)
    assert isinstance(kept, RedactedText)
    assert kept.structure == [{"id": str(10**30), "score": str(10**400), "rank": 2**63 - 1,
                               "low": -2**63}]
    assert identifier(kept.structure[0]["id"]) == identifier(10**30)  # the same document id
    assert number(kept.structure[0]["score"]) is None and number(10**400) is None


@pytest.mark.parametrize("make", [lambda v: {"a": v}, lambda v: [v]], ids=["objects", "arrays"])
@pytest.mark.parametrize("as_text", [False, True], ids=["value", "json text"])
def test_a_value_nested_past_the_bound_is_cut_and_reads_back(
        make: Callable[[Any], Any], as_text: bool) -> None:
    """Before: a value nested 50 levels deep (or a JSON text holding one) was logged as
    protobuf nested past what a protobuf reader accepts, so an export acknowledged before a
    crash could not be derived on the next start."""
    for depth in (MAX_DEPTH - MARKER_DEPTH - 1, 50, 500):
        value = nested(depth, make)
        kept = logged_and_read_back(json.dumps(value) if as_text else value)
        assert kept is not None, depth
        walked, levels = (kept.structure, MARKER_DEPTH) if as_text else (kept, 0)
        while isinstance(walked, (dict, list)):
            walked = walked["a"] if isinstance(walked, dict) else walked[0]
            levels += 1
        if depth + (MARKER_DEPTH if as_text else 0) <= MAX_DEPTH:  # all of it kept
            assert isinstance(walked, RedactedText), (depth, walked)  # the leaf's marker
            assert levels == depth + (MARKER_DEPTH if as_text else 0), (depth, levels)
        else:
            assert walked is None and levels == MAX_DEPTH, (depth, levels)


def test_bytes_read_back_are_still_bytes_and_keep_their_marker() -> None:
    """Bytes under an attribute whose strings are kept (``openinference.span.kind``) were
    read back as a text, so a trace derived in hand and again from the intake log differed."""
    marker = scrub("openinference.span.kind", b"\x00\x01\x02")
    assert marker[REDACTED]["bytes"] is True and marker[REDACTED]["chars"] == 3
    (span,) = spans_of_raw(redacted_export([dataclasses.replace(
        span_with("x"), attributes={"openinference.span.kind": b"\x00\x01\x02"})]))
    back = span.attributes["openinference.span.kind"]
    assert isinstance(back, bytes) and not isinstance(back, str)
    assert scrub("openinference.span.kind", back) == marker  # derived again: the same marker


def sdk_trace(build: Callable[[Tracer, Markers, Sent], None]) -> tuple[list[SpanRecord], Markers]:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    markers = Markers()
    build(provider.get_tracer("tests"), markers, Sent())
    provider.shutdown()
    return records(exporter.get_finished_spans()), markers


def read_back(spans: Sequence[SpanRecord]) -> list[SpanRecord]:
    """The spans as a --no-text store keeps them and reads them back (for rebuild)."""
    table, texts = SpanEncoder(keep_text=False).encode(spans, datetime.now(UTC))
    assert PREFIX not in " ".join(table.column("attributes").to_pylist())
    rows = zip(*(table.column(name).to_pylist() for name in ROW_COLUMNS))
    return [span_from_row(row, texts) for row in rows]


@pytest.mark.parametrize(("build", "stages"), [
    (openinference_trace, ["reranked", "reranked", "dropped"]),  # the reranker cut the third
    (genai_trace, ["retrieved", "retrieved"]),
])
def test_a_trace_read_back_without_text_keeps_its_chunks_sources_and_template(
        build: Callable[[Tracer, Markers, Sent], None], stages: list[str]) -> None:
    spans, _ = sdk_trace(build)
    first = normalize_trace(spans)
    again = normalize_trace(read_back(spans))
    assert first is not None and again is not None
    assert first.record.placements and not again.record.placements
    assert NOT_KEPT_WARNING in again.warnings

    def chunks(request: Any) -> list[tuple[Any, ...]]:
        return [(ch.id, ch.source_id, ch.retrieval_rank, ch.retrieval_score, ch.rerank_rank,
                 content_hash(ch.text), ch.text.chars if isinstance(ch.text, RedactedText)
                 else len(ch.text)) for ch in request.record.chunks]

    assert chunks(again) == chunks(first)
    assert all(isinstance(ch.text, RedactedText) for ch in again.record.chunks)
    # a chunk whose text was not kept cannot be looked for: not said to be missing from the prompt
    assert [ch.stage for ch in again.record.chunks] == stages
    for field in ("model", "template_id", "template_version", "prompt_tokens", "prompt_chars"):
        assert getattr(again.record, field) == getattr(first.record, field), field
    assert isinstance(again.record.question, RedactedText)
    assert isinstance(again.record.answer, RedactedText) and again.record.cited_ids is None
