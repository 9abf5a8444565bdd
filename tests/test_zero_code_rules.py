"""The rules of docs/zero-code.md for traces that are not one retrieval and one answer,
checked on real Haystack pipelines traced by OpenInference (the LLM is the local stand-in):

- multi-turn: the request is the last LLM call whose prompt holds a retrieved document; an
  earlier turn's documents still in that prompt are placed, and the question and the
  citation numbers are the last turn's;
- retrieval with no LLM call: a `retrieval_only` request with what was retrieved, no answer,
  a warning;
- an LLM call with no retrieval: an `llm_only` request with the call and no chunks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from haystack import Pipeline
from haystack.dataclasses import ChatMessage
from openinference.instrumentation.haystack import HaystackInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.normalize.inferred import NO_LLM_WARNING
from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.sample_traces import haystack_rag_app
from midtrace.sample_traces.policy_corpus import QUESTIONS, TEXT
from midtrace.schemas.model import RagRequest
from tests.fake_llm import FakeLLM
from tests.zero_code import provider_with, records

FIRST, SECOND = QUESTIONS[0].text, QUESTIONS[2].text


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    instrumentor = HaystackInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider, exporter
    finally:
        instrumentor.uninstrument()


def request_of(exporter: InMemorySpanExporter) -> RagRequest | None:
    return normalize_openinference(records(exporter.get_finished_spans()))


def ids(docs: list[Any]) -> list[str]:
    return [d.id for d in docs]


def test_multi_turn_is_the_last_turn_with_earlier_documents_placed(
        traced: tuple[TracerProvider, InMemorySpanExporter], llm: FakeLLM) -> None:
    provider, exporter = traced
    pipeline = haystack_rag_app.build_pipeline(llm.url)
    keep = {"prompt", "ranker", "retriever"}
    with provider.get_tracer("chat-app").start_as_current_span("conversation"):
        first = pipeline.run({"retriever": {"query": FIRST}, "prompt": {"question": FIRST}},
                             include_outputs_from=keep)
        # the second turn's prompt: the first turn's messages and answer, then the new turn
        history = [*first["prompt"]["prompt"], first["llm"]["replies"][0]]
        second = pipeline.run({"retriever": {"query": SECOND}, "prompt": {
            "question": SECOND,
            "template": [*history, ChatMessage.from_user(haystack_rag_app.USER)]}},
            include_outputs_from=keep)
    request = request_of(exporter)
    assert request is not None
    record = request.record
    assert record.question == SECOND
    answer = str(second["llm"]["replies"][0].text)
    assert record.answer == answer and len(llm.prompts) == 2
    # both turns' documents are in the final prompt, in the order they sit there
    first_in, second_in = ids(first["ranker"]["documents"]), ids(second["ranker"]["documents"])
    assert [p.chunk_id for p in record.placements] == first_in + second_in
    # retrieved in either turn and in neither prompt: dropped
    retrieved = set(ids(first["retriever"]["documents"]) + ids(second["retriever"]["documents"]))
    assert {c.id: c.stage for c in record.chunks} == {
        cid: "in_prompt" if cid in first_in + second_in else "dropped" for cid in retrieved}
    # "[1]" in the answer is this turn's Document [1], not the first turn's
    assert answer.startswith("The answer is")
    cited = [second_in[int(n) - 1] for n in re.findall(r"\[(\d+)\]", answer)]
    assert list(record.cited_ids or ()) == cited and cited[0] == second_in[0]
    assert first_in[0] not in cited


def test_retrieval_without_an_llm_call_is_kept_without_an_answer(
        traced: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    _, exporter = traced
    pipeline = Pipeline()
    pipeline.add_component("retriever", haystack_rag_app.InMemoryBM25Retriever(
        haystack_rag_app.store(), top_k=haystack_rag_app.RETRIEVE_K))
    pipeline.add_component("ranker", haystack_rag_app.LostInTheMiddleRanker(top_k=4))
    pipeline.connect("retriever.documents", "ranker.documents")
    out = pipeline.run({"retriever": {"query": FIRST}}, include_outputs_from={"retriever"})
    request = request_of(exporter)
    assert request is not None
    record = request.record
    assert (record.answer, record.model, record.placements, record.cited_ids) == (
        None, None, (), None)
    assert record.question == FIRST and NO_LLM_WARNING in request.warnings
    assert request.kind == "retrieval_only"
    kept = ids(out["ranker"]["documents"])
    # what the ranker kept is reranked; what it cut is dropped (cut by the ranker, not for
    # want of a prompt)
    assert {c.id: c.stage for c in record.chunks} == {
        cid: "reranked" if cid in kept else "dropped"
        for cid in ids(out["retriever"]["documents"])}
    assert all(c.text == TEXT[c.id] for c in record.chunks)


def test_an_llm_call_without_retrieval_is_an_llm_only_request(
        traced: tuple[TracerProvider, InMemorySpanExporter], llm: FakeLLM) -> None:
    _, exporter = traced
    pipeline = Pipeline()
    pipeline.add_component("prompt", haystack_rag_app.ChatPromptBuilder(
        template=[ChatMessage.from_user("Document [1] {{ note }}\n\nQuestion: {{ question }}")],
        required_variables=["note", "question"]))
    pipeline.add_component("llm", haystack_rag_app.OpenAIChatGenerator(
        api_key=haystack_rag_app.Secret.from_token("k"), model=haystack_rag_app.MODEL,
        api_base_url=llm.url, max_retries=0))
    pipeline.connect("prompt.prompt", "llm.messages")
    out = pipeline.run({"prompt": {"note": TEXT["returns"], "question": FIRST}})
    assert out["llm"]["replies"][0].text == "The answer is 14 days [1]."
    assert any(s.attributes.get("openinference.span.kind") == "LLM"
               for s in exporter.get_finished_spans())
    request = request_of(exporter)
    assert request is not None and request.kind == "llm_only"
    (body,) = llm.bodies
    record = request.record
    assert (record.answer, record.model, record.chunks, record.placements) == (
        out["llm"]["replies"][0].text, haystack_rag_app.MODEL, (), ())
    assert record.question == FIRST  # the pipeline's input names it
    assert record.prompt_chars == len(body["messages"][-1]["content"])
