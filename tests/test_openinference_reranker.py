"""OpenInference RERANKER spans and document ids, built with the real SDK and semconv names.

LangChain's instrumentation emits no RERANKER span, so these spans are set the way the
LlamaIndex and Haystack instrumentations set them, with openinference-semantic-conventions'
own attribute names.
"""

from __future__ import annotations

from collections.abc import Sequence

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.schemas.model import RagRequest
from tests.zero_code import provider_with, records

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
TEXTS = {f"kb-{i}": f"Knowledge base article {i}: " + ("details " * i) + "end." for i in range(1, 6)}


def doc_attrs(prefix: str, ids: Sequence[str],
              scores: Sequence[float]) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {}
    for i, (doc_id, score) in enumerate(zip(ids, scores)):
        attrs[f"{prefix}.{i}.{DocumentAttributes.DOCUMENT_ID}"] = doc_id
        attrs[f"{prefix}.{i}.{DocumentAttributes.DOCUMENT_SCORE}"] = score
        attrs[f"{prefix}.{i}.{DocumentAttributes.DOCUMENT_CONTENT}"] = TEXTS[doc_id]
        attrs[f"{prefix}.{i}.{DocumentAttributes.DOCUMENT_METADATA}"] = (
            f'{{"file_path": "kb/{doc_id}.md"}}')
    return attrs


def send(tracer: Tracer, with_llm: bool = True,
         extra: dict[str, AttributeValue] | None = None) -> None:
    retrieved = ["kb-1", "kb-2", "kb-3", "kb-4", "kb-5"]
    reranked = ["kb-4", "kb-1", "kb-5"]
    with tracer.start_as_current_span("query") as root:
        root.set_attributes({KIND: OpenInferenceSpanKindValues.CHAIN.value,
                             SpanAttributes.INPUT_VALUE: "What does article 4 say?"})
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attributes({KIND: OpenInferenceSpanKindValues.RETRIEVER.value,
                                 SpanAttributes.INPUT_VALUE: "article 4",
                                 **doc_attrs(SpanAttributes.RETRIEVAL_DOCUMENTS, retrieved,
                                             [0.9, 0.8, 0.7, 0.6, 0.5]),
                                 **(extra or {})})
        with tracer.start_as_current_span("rerank") as span:
            span.set_attributes({
                KIND: OpenInferenceSpanKindValues.RERANKER.value,
                RerankerAttributes.RERANKER_QUERY: "article 4",
                RerankerAttributes.RERANKER_TOP_K: 3,
                RerankerAttributes.RERANKER_MODEL_NAME: "cross-encoder",
                **doc_attrs(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, retrieved,
                            [0.9, 0.8, 0.7, 0.6, 0.5]),
                **doc_attrs(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, reranked,
                            [0.99, 0.42, 0.11])})
        if not with_llm:
            return
        context = "\n".join(f"<doc id={d}>{TEXTS[d]}</doc>" for d in reranked)
        messages = SpanAttributes.LLM_INPUT_MESSAGES
        with tracer.start_as_current_span("llm") as span:
            span.set_attributes({
                KIND: OpenInferenceSpanKindValues.LLM.value,
                SpanAttributes.LLM_MODEL_NAME: "gpt-4o-mini",
                SpanAttributes.LLM_TOKEN_COUNT_PROMPT: 180,
                SpanAttributes.LLM_COST_TOTAL: 0.0004,
                SpanAttributes.LLM_PROMPT_TEMPLATE_VERSION: "v3",
                SpanAttributes.LLM_PROMPT_TEMPLATE: "Use the documents.\n{context}",
                f"{messages}.0.{MessageAttributes.MESSAGE_ROLE}": "system",
                f"{messages}.0.{MessageAttributes.MESSAGE_CONTENT}": "Use the documents.\n"
                                                                     + context,
                f"{messages}.1.{MessageAttributes.MESSAGE_ROLE}": "user",
                f"{messages}.1.{MessageAttributes.MESSAGE_CONTENT}": "What does article 4 say?",
                f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}":
                    "It has details [doc-kb-4], see also [kb/kb-5.md].",
            })


def normalized(with_llm: bool = True,
               extra: dict[str, AttributeValue] | None = None) -> RagRequest:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    send(provider.get_tracer("test"), with_llm, extra)
    provider.shutdown()
    request = normalize_openinference(records(exporter.get_finished_spans()))
    assert request is not None
    return request


def test_document_ids_scores_and_rerank_ranks_are_kept() -> None:
    chunks = {c.id: c for c in normalized().record.chunks}
    assert list(chunks) == ["kb-1", "kb-2", "kb-3", "kb-4", "kb-5"]
    assert [chunks[i].retrieval_score for i in chunks] == [0.9, 0.8, 0.7, 0.6, 0.5]
    assert {i: (c.rerank_rank, c.rerank_score) for i, c in chunks.items()} == {
        "kb-1": (2, 0.42), "kb-2": (None, None), "kb-3": (None, None), "kb-4": (1, 0.99),
        "kb-5": (3, 0.11)}
    assert chunks["kb-4"].source_id == "kb/kb-4.md"


def test_the_prompt_follows_the_rerank_order_and_cut_documents_are_dropped() -> None:
    request = normalized()
    record = request.record
    assert [p.chunk_id for p in record.placements] == ["kb-4", "kb-1", "kb-5"]
    assert {c.id: c.stage for c in record.chunks} == {
        "kb-1": "in_prompt", "kb-2": "dropped", "kb-3": "dropped", "kb-4": "in_prompt",
        "kb-5": "in_prompt"}
    assert record.model == "gpt-4o-mini" and record.prompt_tokens == 180
    assert record.cost_usd == 0.0004 and record.template_version == "v3"
    assert record.question == "What does article 4 say?"


def test_citations_resolve_through_prompt_labels_and_source_ids() -> None:
    assert normalized().record.cited_ids == ("kb-4", "kb-5")


def test_before_the_llm_span_arrives_the_reranked_stage_is_reported() -> None:
    record = normalized(with_llm=False).record
    assert {c.id: c.stage for c in record.chunks} == {
        "kb-1": "reranked", "kb-2": "dropped", "kb-3": "dropped", "kb-4": "reranked",
        "kb-5": "reranked"}
    assert record.placements == () and record.answer is None and record.cited_ids is None


def test_a_list_index_that_is_no_decimal_number_is_not_a_document() -> None:
    # "²" is a digit to str.isdigit() but not to int(): such a key once failed the trace
    prefix = SpanAttributes.RETRIEVAL_DOCUMENTS
    odd = {f"{prefix}.\u00b2.{DocumentAttributes.DOCUMENT_CONTENT}": "not a document",
           f"{prefix}.9999999999.{DocumentAttributes.DOCUMENT_ID}": "too long an index"}
    assert normalized(extra=odd).record.chunks == normalized().record.chunks
