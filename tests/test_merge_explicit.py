"""A trace that mixes conventions: midtrace attributes on the root, OpenInference below."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.normalize.merge_explicit import merge_explicit
from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.sample_traces.langchain_rag_app import KeywordRetriever, build_chain, select
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.decode import decode_trace
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord, RagRequest
from tests.zero_code import instrumented, provider_with, records

QUESTION = "Can I exchange shoes for another size?"
ANSWER = "Yes, within 14 days [1]."


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    with instrumented(provider):
        yield provider, exporter
    provider.shutdown()


def run(traced: tuple[TracerProvider, InMemorySpanExporter],
        own: RagRecord) -> tuple[RagRequest, RagRequest, RagRequest]:
    provider, exporter = traced
    with provider.get_tracer("app").start_as_current_span("handle_question") as root:
        record_request(root, own)
        build_chain(ANSWER, top_k=3).invoke(QUESTION)
    spans = records(exporter.get_finished_spans())
    assert len({s.trace_id for s in spans}) == 1
    mine, inferred = decode_trace(spans), normalize_openinference(spans)
    assert mine is not None and inferred is not None
    return mine, inferred, merge_explicit(mine, inferred)


# Computed at import, before any test instruments LangChain, so it adds no trace.
RETRIEVED = KeywordRetriever(k=6).invoke(QUESTION)


def docs() -> list[str]:
    return [d.page_content for d in RETRIEVED]


def test_request_fields_from_the_app_win_and_the_rest_is_inferred(traced: object) -> None:
    own = RagRecord(question="exchange shoes?", case_id="case-7", strategy="score_order",
                    outcome=Outcome(correct=False))
    _, inferred, merged = run(traced, own)  # type: ignore[arg-type]
    record = merged.record
    assert record.question == "exchange shoes?" and record.case_id == "case-7"
    assert record.strategy == "score_order" and record.outcome == Outcome(correct=False)
    assert record.answer == ANSWER and record.placements == inferred.record.placements
    assert record.chunks == inferred.record.chunks
    assert merged.convention == "openinference" and merged.tokens_estimated


def test_app_chunks_sent_with_text_keep_the_app_ids_and_labels(traced: object) -> None:
    texts = docs()
    own = RagRecord(chunks=(
        Chunk(id="policy-exchanges", stage="retrieved", label="direct_answer",
              authority="canonical", text=texts[0]),
        Chunk(id="policy-returns", stage="retrieved", label="supporting_background",
              text=texts[1])))
    _, inferred, merged = run(traced, own)  # type: ignore[arg-type]
    by_id = {c.id: c for c in merged.record.chunks}
    assert list(by_id)[:2] == ["policy-exchanges", "policy-returns"]
    assert len(by_id) == 6 and content_hash(texts[0]) not in by_id
    assert by_id["policy-exchanges"].label == "direct_answer"
    assert by_id["policy-exchanges"].stage == "in_prompt"
    assert by_id["policy-exchanges"].retrieval_rank == 1
    assert merged.record.placements[0] == Placement(
        "policy-exchanges", 0, *[getattr(inferred.record.placements[0], f) for f in
                                 ("token_start", "token_end", "char_start", "char_end")])
    assert merged.record.cited_ids == ("policy-exchanges",)


def test_app_positions_win_and_unlisted_chunks_are_left_out(traced: object) -> None:
    first = content_hash(docs()[0])
    own = RagRecord(chunks=(Chunk(id=first, label="direct_answer"),),
                    placements=(Placement(first, 0, token_start=10, token_end=40),))
    mine, _, merged = run(traced, own)  # type: ignore[arg-type]
    assert merged.record.placements == mine.record.placements
    assert [c.id for c in merged.record.chunks] == [first]
    assert merged.record.chunks[0].retrieval_rank == 1
    assert merged.convention == "midtrace" and not merged.tokens_estimated
    assert any("left out" in w for w in merged.warnings)


def test_app_ids_matching_nothing_keep_the_app_chunk_list_alone(traced: object) -> None:
    own = RagRecord(chunks=(Chunk(id="opaque-1", stage="in_prompt"),
                            Chunk(id="opaque-2", stage="dropped")))
    mine, _, merged = run(traced, own)  # type: ignore[arg-type]
    assert merged.record.chunks == mine.record.chunks
    assert merged.record.placements == mine.record.placements
    assert any("match none of the app's chunk ids" in w for w in merged.warnings)


def test_the_apps_prompt_token_count_rescales_inferred_offsets(traced: object) -> None:
    _, inferred, merged = run(traced, RagRecord(prompt_tokens=1000))  # type: ignore[arg-type]
    chars = inferred.record.prompt_chars
    assert chars is not None and merged.record.prompt_chars == chars
    in_prompt = select(RETRIEVED, 3, reorder=False)
    assert len(merged.record.placements) == len(in_prompt)
    for p in merged.record.placements:
        assert p.token_start == int((p.char_start or 0) * 1000 / chars)
    assert merged.record.evidence_tokens is not None and merged.record.evidence_tokens > (
        inferred.record.evidence_tokens or 0)
