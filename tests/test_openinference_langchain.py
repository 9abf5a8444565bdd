"""A real LangChain RAG chain, traced by OpenInference, read back by midtrace unchanged."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.sample_traces.langchain_rag_app import (
    DOCUMENTS,
    KeywordRetriever,
    build_chain,
    format_documents,
    long_context_reorder,
    select,
)
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import RagRequest
from tests.zero_code import prompt_string, records, traced_langchain, where

QUESTION = "How many days do I have to return an item for a refund?"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    with traced_langchain() as exp:
        yield exp


def run(exporter: InMemorySpanExporter, answer: str, **chain_args: object) -> RagRequest:
    build_chain(answer, **chain_args).invoke(QUESTION)  # type: ignore[arg-type]
    request = normalize_openinference(records(exporter.get_finished_spans()))
    assert request is not None
    return request


# Computed at import, before any test instruments LangChain, so it adds no trace.
RETRIEVED = KeywordRetriever(k=6).invoke(QUESTION)


def retrieved(k: int = 6) -> list[Document]:
    return RETRIEVED[:k]


def test_retrieved_documents_are_recorded_in_retriever_order(
        exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [1].", top_k=4)
    docs = retrieved()
    by_rank = sorted(request.record.chunks, key=lambda c: c.retrieval_rank or 0)
    assert [c.id for c in by_rank] == [content_hash(d.page_content) for d in docs]
    assert [c.retrieval_rank for c in by_rank] == [1, 2, 3, 4, 5, 6]
    assert [c.source_id for c in by_rank] == [d.metadata["source"] for d in docs]
    assert request.convention == "openinference" and request.record.question == QUESTION
    assert request.service == "policy-bot"


def test_prompt_order_and_offsets_match_the_real_prompt(exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [1].", top_k=4)
    in_prompt = select(retrieved(), 4, reorder=False)
    prompt = prompt_string(in_prompt, QUESTION)
    record = request.record
    assert record.prompt_chars == len(prompt)
    assert [p.chunk_id for p in record.placements] == [content_hash(d.page_content)
                                                       for d in in_prompt]
    assert [(p.char_start, p.char_end) for p in record.placements] == where(prompt, in_prompt)
    assert [p.prompt_index for p in record.placements] == [0, 1, 2, 3]


def test_documents_cut_by_top_k_are_dropped(exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [1].", top_k=4)
    stages = {c.retrieval_rank: c.stage for c in request.record.chunks}
    assert stages == {1: "in_prompt", 2: "in_prompt", 3: "in_prompt", 4: "in_prompt",
                      5: "dropped", 6: "dropped"}
    assert all(c.drop_reason is None for c in request.record.chunks)


def test_the_cited_document_is_marked_cited(exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "You have 30 days [2], per the older policy.", top_k=4)
    second = content_hash(select(retrieved(), 4, reorder=False)[1].page_content)
    assert request.record.cited_ids == (second,)
    assert {c.id: c.cited for c in request.record.chunks} == {
        c.id: c.id == second for c in request.record.chunks}
    assert request.record.answer == "You have 30 days [2], per the older policy."


def test_long_context_reorder_sets_the_prompt_order(exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [1].", reorder=True)
    placed_ranks = [next(c.retrieval_rank for c in request.record.chunks if c.id == p.chunk_id)
                    for p in request.record.placements]
    assert placed_ranks == [2, 4, 6, 5, 3, 1]
    in_prompt = long_context_reorder(retrieved())
    prompt = prompt_string(in_prompt, QUESTION)
    assert [(p.char_start, p.char_end) for p in request.record.placements] == where(prompt,
                                                                                    in_prompt)
    # [1] is the label of the first document in the prompt: retrieval rank 2.
    (cited,) = request.record.cited_ids or ()
    assert cited == content_hash(in_prompt[0].page_content)


def test_the_reorder_is_langchains_own_when_installed() -> None:
    reorder_module = pytest.importorskip("langchain_community.document_transformers")
    docs = [Document(page_content=str(i)) for i in range(1, 8)]
    theirs = reorder_module.LongContextReorder().transform_documents(docs)
    assert [d.page_content for d in long_context_reorder(docs)] == [
        d.page_content for d in theirs]


def test_token_offsets_are_scaled_by_the_reported_prompt_tokens(
        exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [1].", top_k=3, prompt_tokens=250)
    record = request.record
    assert request.tokens_estimated and record.prompt_tokens == 250
    ratio = 250 / (record.prompt_chars or 1)
    for p in record.placements:
        assert p.token_start == int((p.char_start or 0) * ratio)
        assert p.token_end == math.ceil((p.char_end or 0) * ratio)
    assert record.evidence_tokens == (record.placements[-1].token_end or 0) - (
        record.placements[0].token_start or 0)


def test_without_a_token_count_tokens_are_four_characters(
        exporter: InMemorySpanExporter) -> None:
    record = run(exporter, "Within 14 days [1].", top_k=2).record
    assert record.prompt_tokens == math.ceil((record.prompt_chars or 0) / 4)
    assert record.placements[0].token_start == (record.placements[0].char_start or 0) // 4


def test_span_arrival_order_does_not_matter(exporter: InMemorySpanExporter) -> None:
    build_chain("Within 14 days [2].", top_k=4, reorder=True).invoke(QUESTION)
    spans = records(exporter.get_finished_spans())
    expected = normalize_openinference(spans)
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(spans)
        assert normalize_openinference(spans) == expected


class Repeating(BaseRetriever):
    """Returns the same two documents; the chain below places the first one twice."""

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [DOCUMENTS[0], DOCUMENTS[6]]


def test_a_document_placed_twice_has_two_placements(exporter: InMemorySpanExporter) -> None:
    chain = build_chain("Within 14 days [1][3].", retriever=Repeating()
                        | RunnableLambda(lambda docs: [docs[0], docs[1], docs[0]]))
    chain.invoke(QUESTION)
    request = normalize_openinference(records(exporter.get_finished_spans()))
    assert request is not None
    first = content_hash(DOCUMENTS[0].page_content)
    assert [p.chunk_id for p in request.record.placements] == [
        first, content_hash(DOCUMENTS[6].page_content), first]
    assert len(request.record.chunks) == 2
    assert request.record.cited_ids == (first,)


class Wrapping(BaseRetriever):
    """A retriever over another one, keeping 3 of its 6 in a new order (as a compressor)."""

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        inner = KeywordRetriever(k=6).invoke(query, config={"callbacks": run_manager.get_child()})
        return [inner[4], inner[0], inner[2]]


def test_a_retriever_wrapping_another_is_read_as_a_reranker(
        exporter: InMemorySpanExporter) -> None:
    request = run(exporter, "Within 14 days [2].", retriever=Wrapping())
    by_rank = {c.retrieval_rank: c for c in request.record.chunks}
    assert len(by_rank) == 6
    assert {r: c.rerank_rank for r, c in by_rank.items()} == {
        1: 2, 2: None, 3: 3, 4: None, 5: 1, 6: None}
    assert {r: c.stage for r, c in by_rank.items()} == {
        1: "in_prompt", 2: "dropped", 3: "in_prompt", 4: "dropped", 5: "in_prompt",
        6: "dropped"}
    assert [p.chunk_id for p in request.record.placements] == [
        by_rank[5].id, by_rank[1].id, by_rank[3].id]


def test_a_completion_model_prompt_is_read_from_llm_prompts(
        exporter: InMemorySpanExporter) -> None:
    template = PromptTemplate.from_template("Documents:\n{context}\n\nQuestion: {question}\n")
    llm = FakeListLLM(responses=["14 days, see Document [2]."])
    docs = retrieved(3)
    chain = ({"context": KeywordRetriever(k=3) | RunnableLambda(format_documents),
              "question": lambda q: q} | template | llm)
    chain.invoke(QUESTION)
    request = normalize_openinference(records(exporter.get_finished_spans()))
    assert request is not None
    prompt = template.format(context=format_documents(docs), question=QUESTION)
    assert request.record.prompt_chars == len(prompt)
    assert [(p.char_start, p.char_end) for p in request.record.placements] == where(prompt, docs)
    assert request.record.answer == "14 days, see Document [2]."
    assert request.record.cited_ids == (content_hash(docs[1].page_content),)
    assert request.record.template_id is not None


def test_many_documents_lose_attributes_and_say_so(exporter: InMemorySpanExporter) -> None:
    many = [Document(page_content=f"Policy paragraph number {i} says something else.",
                     metadata={"title": f"P{i}"}) for i in range(80)]
    build_chain("Nothing relevant [1].", retriever=KeywordRetriever(documents=many, k=80),
                top_k=5).invoke(QUESTION)
    spans = records(exporter.get_finished_spans())
    assert any(s.dropped_attributes_count > 0 for s in spans)
    request = normalize_openinference(spans)
    assert request is not None
    assert any("OTEL_ATTRIBUTE_COUNT_LIMIT" in w and "128" in w for w in request.warnings)
    # The SDK evicted the oldest attributes (the span kind and the first documents); the
    # documents that survived keep their true ranks.
    ranks = sorted(c.retrieval_rank or 0 for c in request.record.chunks)
    assert ranks == list(range(ranks[0], 81)) and ranks[0] > 1


def test_a_trace_without_retrieval_is_not_a_rag_request(exporter: InMemorySpanExporter) -> None:
    FakeListLLM(responses=["hi"]).invoke("hello")
    request = normalize_openinference(records(exporter.get_finished_spans()))
    # kept as what it is: an LLM call with no retrieval, counted in no metric
    assert request is not None and request.kind == "llm_only"
    assert (request.record.question, request.record.answer, request.record.chunks) == (
        "hello", "hi", ())
    assert normalize_openinference([]) is None
