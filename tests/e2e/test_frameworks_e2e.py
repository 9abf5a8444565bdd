"""LlamaIndex, Haystack and DSPy RAG pipelines, traced by their stock OpenInference
instrumentations, answered by a local stand-in LLM endpoint, exported by the real OTLP/HTTP
exporter to a real collector process: the stored request has the prompt order, slots,
dropped chunks and citations the pipeline really built.

A retrieval-only and an LLM-only Haystack pipeline check the rules for traces that are not
one retrieval and one answer (docs/zero-code.md): each a request of its kind, listed, in no
metric.

What the pipeline built is read from the prompt the stand-in received and the answer it
gave; the expected order is also computed without the framework (LongContextReorder's and
LostInTheMiddleRanker's documented rules), so a change in either shows up here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from haystack import Pipeline
from haystack.dataclasses import ChatMessage
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.dspy import DSPyInstrumentor
from openinference.instrumentation.haystack import HaystackInstrumentor
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.client import open_client
from midtrace.collector.query.reads import Filters
from midtrace.collector.normalize.inferred import NO_LLM_WARNING
from midtrace.sample_traces import dspy_rag_app, haystack_rag_app, llamaindex_rag_app
from midtrace.sample_traces.policy_corpus import QUESTIONS, SOURCE, TEXT, keyword_scores
from midtrace.schemas.chunk_hash import content_hash
from tests.fake_llm import FakeLLM, joined_messages
from tests.procs import Proc
from tests.zero_code import provider_with

RATIO = 0.3  # the stand-in reports prompt tokens = characters * RATIO (not the 4-a-token guess)
CITE = re.compile(r"\[(\d+)\]")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM(usage_ratio=RATIO)
    try:
        yield fake
    finally:
        fake.close()


def traced(collector: Proc, instrumentor: Any, run: Any, **config: Any) -> str:
    """Run ``run()`` instrumented, exporting span by span to the collector; the trace id."""
    seen = InMemorySpanExporter()
    provider = provider_with(OTLPSpanExporter(endpoint=collector.url + "/v1/traces",
                                              timeout=10), service="policy-bot")
    provider.add_span_processor(SimpleSpanProcessor(seen))
    instrumentor.instrument(tracer_provider=provider, **config)
    try:
        run()
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    (trace_id,) = {format(s.context.trace_id, "032x") for s in seen.get_finished_spans()}
    return trace_id


def check(trace: dict[str, Any], prompt: str, answer: str, question: str,
          retrieved: list[str], in_prompt: list[str], model: str,
          prompt_tokens: int, ids: dict[str, str] | None = None) -> dict[str, Any]:
    """The stored request against the prompt and answer the pipeline really produced.

    ``prompt`` is the prompt as midtrace reads it: each message's text, a blank line
    between. ``prompt_tokens``: what the stored request should say. ``ids``: the chunk id
    midtrace gives each policy, when the instrumentation sends no document id.
    """
    request = trace["request"]
    if ids is not None:  # compare by policy
        trace = {**trace, "chunks": [{**c, "chunk_id": ids[c["chunk_id"]]} for c in trace["chunks"]],
                 "placements": [{**p, "chunk_id": ids[p["chunk_id"]]} for p in trace["placements"]]}
    assert (request["convention"], request["model"], request["service"]) == (
        "openinference", model, "policy-bot")
    assert request["question"] == question and request["answer"] == answer
    assert request["prompt_chars"] == len(prompt)
    assert request["prompt_tokens"] == prompt_tokens
    # the order the documents really have in the prompt the stand-in received
    assert sorted(in_prompt, key=lambda pid: prompt.index(TEXT[pid])) == in_prompt
    placements = sorted(trace["placements"], key=lambda p: p["prompt_index"])
    assert [p["chunk_id"] for p in placements] == in_prompt
    assert [p["slot"] for p in placements] == list(range(1, len(in_prompt) + 1))
    assert [(p["char_start"], p["char_end"]) for p in placements] == [
        (prompt.index(TEXT[pid]), prompt.index(TEXT[pid]) + len(TEXT[pid])) for pid in in_prompt]
    chunks = {c["chunk_id"]: c for c in trace["chunks"]}
    assert sorted(chunks, key=lambda pid: chunks[pid]["retrieval_rank"]) == retrieved
    assert {pid: c["stage"] for pid, c in chunks.items()} == {
        pid: "in_prompt" if pid in in_prompt else "dropped" for pid in retrieved}
    assert {pid: c["source_id"] for pid, c in chunks.items()} == {
        pid: SOURCE[pid] if ids is None else None for pid in retrieved}
    cited = [in_prompt[int(n) - 1] for n in CITE.findall(answer)]
    assert cited, answer  # every question here is answered with a citation
    assert [(ids or {}).get(c, c) for c in request["cited_ids"]] == cited
    assert request["warnings"] in (None, [])
    return request


QUESTION = QUESTIONS[0]


def test_a_llamaindex_citation_query_engine(collector: Proc, llm: FakeLLM) -> None:
    engine = llamaindex_rag_app.build_engine(llm.url)
    answers: list[str] = []
    trace_id = traced(collector, LlamaIndexInstrumentor(),
                      lambda: answers.append(str(engine.query(QUESTION.text))))
    (prompt,) = llm.prompts
    in_prompt = llamaindex_rag_app.kept_in_prompt_order(QUESTION.text)
    retrieved = [pid for pid, _ in keyword_scores(QUESTION.text)[:llamaindex_rag_app.TOP_K]]
    assert len(in_prompt) < len(retrieved)  # the similarity cutoff dropped some
    # the prompt tokens the completion span reports, as the endpoint counted them
    request = check(collector.trace(trace_id), prompt, answers[0], QUESTION.text, retrieved,
                    in_prompt, llamaindex_rag_app.MODEL, int(len(prompt) * RATIO))
    # the template is LlamaIndex's text_qa_template, recorded on its predict span
    assert request["template_id"].startswith("sha256:")


def test_llamaindex_with_prompts_hidden_reads_the_template_variables(
        collector: Proc, llm: FakeLLM) -> None:
    # OPENINFERENCE_HIDE_PROMPTS: the completion span's llm.prompts is redacted; the prompt
    # is still the predict span's template filled with its variables.
    question = QUESTIONS[1].text
    engine = llamaindex_rag_app.build_engine(llm.url)
    answers: list[str] = []
    trace_id = traced(collector, LlamaIndexInstrumentor(),
                      lambda: answers.append(str(engine.query(question))),
                      config=TraceConfig(hide_prompts=True))
    (prompt,) = llm.prompts
    in_prompt = llamaindex_rag_app.kept_in_prompt_order(question)
    retrieved = [pid for pid, _ in keyword_scores(question)[:llamaindex_rag_app.TOP_K]]
    # the predict span has no token count: the 4-characters-a-token estimate
    check(collector.trace(trace_id), prompt, answers[0], question, retrieved, in_prompt,
          llamaindex_rag_app.MODEL, round(len(prompt) / 4))


def lost_in_the_middle(ranked: list[str]) -> list[str]:
    """LostInTheMiddleRanker's documented order: the best at both ends, the worst in the
    middle (ranks 1..4 -> 1, 3, 4, 2)."""
    return ranked[0::2] + ranked[1::2][::-1]


def test_a_haystack_pipeline_with_lost_in_the_middle(collector: Proc, llm: FakeLLM) -> None:
    question = QUESTION.text
    pipeline = haystack_rag_app.build_pipeline(llm.url)
    outputs: list[dict[str, Any]] = []

    def run() -> None:
        outputs.append(pipeline.run({"retriever": {"query": question},
                                     "prompt": {"question": question}},
                                    include_outputs_from={"retriever", "ranker"}))

    trace_id = traced(collector, HaystackInstrumentor(), run)
    (user,) = llm.prompts  # the stand-in reads the last message; midtrace joins them all
    (body,) = llm.bodies
    prompt = joined_messages(body)
    assert prompt == haystack_rag_app.SYSTEM + "\n\n" + user
    (out,) = outputs
    retrieved = [d.id for d in out["retriever"]["documents"]]
    in_prompt = [d.id for d in out["ranker"]["documents"]]
    assert len(retrieved) == haystack_rag_app.RETRIEVE_K
    assert in_prompt == lost_in_the_middle(retrieved[:haystack_rag_app.RANKER_K])
    answer = str(out["llm"]["replies"][0].text)
    trace = collector.trace(trace_id)
    check(trace, prompt, answer, question, retrieved, in_prompt, haystack_rag_app.MODEL,
          int(len(user) * RATIO))  # the stand-in counts the last message only
    # the ranker's output order is the rerank order; the two it cut have none
    ranks = {c["chunk_id"]: c["rerank_rank"] for c in trace["chunks"]}
    assert ranks == {pid: in_prompt.index(pid) + 1 if pid in in_prompt else None
                     for pid in retrieved}
    sections = [s["kind"] for s in trace["request"]["prompt_sections"]]
    assert sections[0] == "instructions" and "question" in sections


def test_a_dspy_retrieve_then_predict_module(collector: Proc, llm: FakeLLM) -> None:
    question = QUESTIONS[1].text
    answers: list[str] = []

    def run() -> None:
        with dspy_rag_app.configured(llm.url) as rag:
            answers.append(rag(question=question).answer)

    trace_id = traced(collector, DSPyInstrumentor(), run)
    (body,) = llm.bodies
    # DSPy's ChatAdapter: a system message describing the fields, then the user message
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    prompt = joined_messages(body)
    trace = collector.trace(trace_id)
    retrieved = [pid for pid, _ in keyword_scores(question)[:dspy_rag_app.RETRIEVE_K]]
    # Retrieve records passages only (no id, score or metadata): chunks are content hashes
    by_hash = {content_hash(TEXT[pid]): pid for pid in retrieved}
    # the stored answer is the module's answer field, not the raw "[[ ## answer ## ]]" reply
    (raw,) = llm.replies
    assert raw.startswith("[[ ## answer ## ]]") and answers[0] in raw
    # DSPy's instrumentation records no token counts: the 4-characters-a-token estimate
    check(trace, prompt, answers[0], question, retrieved, dspy_rag_app.in_prompt(question),
          dspy_rag_app.MODEL, round(len(prompt) / 4), ids=by_hash)
    # no retrieval scores or ranks beyond the order: DSPy records none
    assert {c["retrieval_score"] for c in trace["chunks"]} == {None}



def test_retrieval_only_and_llm_only_traces_stay_what_they_are(
        collector: Proc, db_path: Path, llm: FakeLLM) -> None:
    question = QUESTION.text
    search = Pipeline()  # a search endpoint: retrieval, no model
    search.add_component("retriever", haystack_rag_app.InMemoryBM25Retriever(
        haystack_rag_app.store(), top_k=haystack_rag_app.RETRIEVE_K))
    chat = Pipeline()  # a chat turn with no retrieval
    chat.add_component("prompt", haystack_rag_app.ChatPromptBuilder(
        template=[ChatMessage.from_user("Document [1] {{ note }}\n\nQuestion: {{ question }}")],
        required_variables=["note", "question"]))
    chat.add_component("llm", haystack_rag_app.OpenAIChatGenerator(
        api_key=haystack_rag_app.Secret.from_token("k"), model=haystack_rag_app.MODEL,
        api_base_url=llm.url, max_retries=0))
    chat.connect("prompt.prompt", "llm.messages")
    found: list[Any] = []
    search_trace = traced(collector, HaystackInstrumentor(), lambda: found.extend(
        search.run({"retriever": {"query": question}})["retriever"]["documents"]))
    replies: list[str] = []
    chat_trace = traced(collector, HaystackInstrumentor(), lambda: replies.append(chat.run(
        {"prompt": {"note": TEXT["returns"], "question": question}})["llm"]["replies"][0].text))
    # the requests list shows both, each with its kind and no failure class
    client = open_client(url=collector.url, fresh=True)
    try:
        listed = client.requests(Filters())
        overview = client.view("overview")
    finally:
        client.close()
    assert sorted(zip(listed["trace_id"], listed["kind"],
                      listed["taxonomy_class"].isna())) == sorted(
        [(search_trace, "retrieval_only", True), (chat_trace, "llm_only", True)])
    assert overview.empty or not overview["requests"].fillna(0).any()  # no RAG request
    collector.stop()
    with duckdb.connect(str(db_path), read_only=True) as conn:
        requests = conn.execute("SELECT trace_id, kind, answer, model, warnings FROM requests "
                                "ORDER BY kind DESC").fetchall()
        chunks = conn.execute("SELECT chunk_id, stage FROM chunks ORDER BY retrieval_rank").fetchall()
        spans = dict(conn.execute("SELECT trace_id, count(*) FROM spans GROUP BY trace_id")
                     .fetchall())
        rag = conn.execute("SELECT count(*) FROM request_facts").fetchall()
    (search_row, chat_row) = requests
    # the search is a request with what it retrieved, no answer, and says why
    assert search_row[:4] == (search_trace, "retrieval_only", None, None)
    assert NO_LLM_WARNING in search_row[4]
    assert chunks == [(d.id, "retrieved") for d in found]
    # the chat turn is an LLM-only request: its answer and model, no chunk
    assert chat_row[:4] == (chat_trace, "llm_only", replies[0], haystack_rag_app.MODEL)
    assert spans[chat_trace] >= 2 and spans[search_trace] >= 1
    assert rag == [(0,)]  # neither counts in the metrics
