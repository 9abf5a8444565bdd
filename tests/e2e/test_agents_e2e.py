"""An OpenAI Agents SDK app that retrieves through a function tool, traced by the stock
OpenInference instrumentation (openinference-instrumentation-openai-agents), answered by a
local stand-in LLM endpoint that calls the tool and then answers from its result, exported
by the real OTLP/HTTP exporter to a real collector process (its derive workers).

The stored request is the LLM call that answered; its chunks are the documents of the tool's
JSON result, placed where they sit, JSON-escaped, in the final prompt; a chat of two turns
whose older tool results the SDK's ToolOutputTrimmer cut to a preview has the first turn's
documents dropped and the second's placed. A tool-calling loop written by hand on the openai
client, traced by openinference-instrumentation-openai, has no tool span: the documents are
read from the tool message of the call that answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.sample_traces import agents_rag_app
from midtrace.sample_traces.policy_corpus import POLICIES, QUESTIONS
from tests.e2e.test_frameworks_e2e import RATIO, traced
from tests.fake_llm import FakeLLM, joined_messages
from tests.procs import Proc
from tests.zero_code import provider_with


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM(usage_ratio=RATIO)
    try:
        yield fake
    finally:
        fake.close()


def escaped(text: str, ensure_ascii: bool = True) -> str:
    """A document's text as a JSON string holds it (json.dumps' default: ASCII escapes)."""
    return json.dumps(text, ensure_ascii=ensure_ascii)[1:-1]


def tool_results(body: dict) -> list[list[dict[str, Any]]]:
    """The documents of each tool message of a chat request, as the tool returned them."""
    out = []
    for m in body["messages"]:
        if m["role"] == "tool":
            try:
                out.append(json.loads(m["content"])["results"])
            except ValueError:  # an older turn's result, trimmed to a preview
                out.append([])
    return out


def where(prompt: str, docs: list[dict[str, Any]],
          ensure_ascii: bool = True) -> list[tuple[str, int, int]]:
    """``(id, start, end)`` of every whole occurrence of each document in the prompt, in
    prompt order."""
    out = []
    for d in docs:
        text = escaped(d["text"], ensure_ascii)
        at = prompt.find(text)
        while at >= 0:
            out.append((d["id"], at, at + len(text)))
            at = prompt.find(text, at + len(text))
    return sorted(set(out), key=lambda o: o[1])


def check_placements(trace: dict[str, Any], expected: list[tuple[str, int, int]]) -> None:
    placements = sorted(trace["placements"], key=lambda p: p["prompt_index"])
    assert [(p["chunk_id"], p["char_start"], p["char_end"]) for p in placements] == expected
    assert [p["slot"] for p in placements] == list(range(1, len(expected) + 1))


# Quotes, a line break and accented letters: the tool's JSON escapes them (\", \n, \u00e9)
POLICIES_WITH_ESCAPES = tuple(
    (pid, source, text.replace("original packaging", "\"original packaging\"")
     .replace("Customers may", "Customers (in the EU, Norway and Réunion)\nmay"))
    for pid, source, text in POLICIES)


@pytest.mark.parametrize("policies", [POLICIES, POLICIES_WITH_ESCAPES],
                         ids=["plain", "escaped"])
def test_an_agent_whose_search_tool_returns_json_documents(
        collector: Proc, llm: FakeLLM, policies: tuple[tuple[str, str, str], ...]) -> None:
    question = QUESTIONS[0].text
    agent = agents_rag_app.build_agent(llm.url, policies)
    answers: list[str] = []
    trace_id = traced(collector, OpenAIAgentsInstrumentor(),
                      lambda: answers.append(agents_rag_app.ask(agent, question)))
    first, last = llm.bodies  # the tool call, then the answer from the tool's result
    prompt = joined_messages(last)
    (results,) = tool_results(last)
    assert [d["id"] for d in results] == [d["id"] for d in agents_rag_app.search(question, policies)]
    if policies is POLICIES_WITH_ESCAPES:  # the documents sit in the prompt escaped only
        assert all(d["text"] not in prompt for d in results if "\n" in d["text"])
    trace = collector.trace(trace_id)
    request = trace["request"]
    assert (request["convention"], request["model"], request["service"]) == (
        "openinference", agents_rag_app.MODEL, "policy-bot")
    assert request["question"] == question and request["answer"] == answers[0]
    assert request["prompt_chars"] == len(prompt)
    assert request["prompt_tokens"] == int(len(prompt) * RATIO)  # the answering call's usage
    assert request["warnings"] in (None, [])
    expected = where(prompt, results)
    assert [cid for cid, _, _ in expected] == [d["id"] for d in results]
    check_placements(trace, expected)
    chunks = {c["chunk_id"]: c for c in trace["chunks"]}
    assert {cid: (c["retrieval_rank"], c["retrieval_score"], c["source_id"], c["stage"])
            for cid, c in chunks.items()} == {
        d["id"]: (rank, d["score"], d["source"], "in_prompt")
        for rank, d in enumerate(results, start=1)}
    # the stand-in cites by id: "14 days [returns]"
    assert request["cited_ids"] == ["returns"] and "[returns]" in answers[0]
    assert len(first["messages"]) == 2  # the first call saw no document: not the request
    # the question is the user's message, not its copy in the tool call and result after it
    assert prompt.count(question) > 1
    (asked,) = [s for s in request["prompt_sections"] if s["kind"] == "question"]
    assert asked["token_end"] <= min(p["token_start"] for p in trace["placements"])


def test_a_two_turn_chat_with_older_tool_results_trimmed(collector: Proc, llm: FakeLLM) -> None:
    questions = [QUESTIONS[0].text, QUESTIONS[2].text]
    agent = agents_rag_app.build_agent(llm.url)
    answers: list[str] = []
    trace_id = traced(collector, OpenAIAgentsInstrumentor(),
                      lambda: answers.extend(agents_rag_app.chat(agent, questions)))
    assert len(llm.bodies) == 4  # per turn: the tool call, then the answer
    last = llm.bodies[-1]
    prompt = joined_messages(last)
    earlier, latest = tool_results(last)
    assert earlier == []  # the first turn's result is only a preview now
    first_turn = agents_rag_app.search(questions[0])
    assert all(escaped(d["text"]) not in prompt for d in first_turn
               if d["id"] not in {e["id"] for e in latest})
    trace = collector.trace(trace_id)
    request = trace["request"]
    assert request["question"] == questions[1] and request["answer"] == answers[1]
    assert request["prompt_chars"] == len(prompt)
    check_placements(trace, where(prompt, latest))
    stages = {c["chunk_id"]: c["stage"] for c in trace["chunks"]}
    assert stages == {**{d["id"]: "dropped" for d in first_turn},
                      **{d["id"]: "in_prompt" for d in latest}}
    assert "dropped" in stages.values()
    cited = [d["id"] for d in latest if f"[{d['id']}]" in answers[1]]
    assert cited and request["cited_ids"] == sorted(
        cited, key=lambda cid: answers[1].index(f"[{cid}]"))
    # two tool calls are two retrievals: each chunk keeps the first one's rank
    assert any(w.startswith("2 tool results with documents") for w in request["warnings"])


def tool_loop(llm_url: str, question: str) -> str:
    """A tool-calling loop written by hand on the openai client: the model calls the search
    tool until it answers."""
    client = OpenAI(base_url=llm_url, api_key="sample-key", max_retries=0)
    tools = [{"type": "function", "function": {
        "name": agents_rag_app.TOOL, "description": "Search the store's policy documents.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}}]
    messages: list[Any] = [{"role": "system", "content": agents_rag_app.INSTRUCTIONS},
                           {"role": "user", "content": question}]
    while True:
        reply = client.chat.completions.create(model=agents_rag_app.MODEL, messages=messages,
                                               tools=tools)  # type: ignore[arg-type]
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            query = json.loads(call.function.arguments)["query"]  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(
                {"results": agents_rag_app.search(query, POLICIES_WITH_ESCAPES)},
                ensure_ascii=False)})


def test_a_hand_written_tool_loop_on_the_openai_client(collector: Proc, llm: FakeLLM) -> None:
    # openinference-instrumentation-openai traces the LLM calls only: the documents are read
    # from the tool message of the call that answered. The app's own request span (a web
    # framework's, say) makes the calls one trace.
    question = QUESTIONS[1].text
    seen = InMemorySpanExporter()
    provider = provider_with(OTLPSpanExporter(endpoint=collector.url + "/v1/traces",
                                              timeout=10), service="policy-bot")
    provider.add_span_processor(SimpleSpanProcessor(seen))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with provider.get_tracer("policy-bot").start_as_current_span("POST /ask"):
            answer = tool_loop(llm.url, question)
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    (trace_id,) = {format(s.context.trace_id, "032x") for s in seen.get_finished_spans()}
    assert {(s.attributes or {}).get("openinference.span.kind")
            for s in seen.get_finished_spans()} == {
        None, "LLM"}  # no TOOL span
    last = llm.bodies[-1]
    prompt = joined_messages(last)
    (results,) = tool_results(last)
    trace = collector.trace(trace_id)
    request = trace["request"]
    assert request["question"] == question and request["answer"] == answer
    assert request["prompt_chars"] == len(prompt) and request["warnings"] in (None, [])
    # ensure_ascii=False: accents as they are, quotes and line breaks escaped
    expected = where(prompt, results, ensure_ascii=False)
    assert [cid for cid, _, _ in expected] == [d["id"] for d in results]
    check_placements(trace, expected)
    assert {c["chunk_id"]: (c["retrieval_rank"], c["retrieval_score"], c["stage"])
            for c in trace["chunks"]} == {
        d["id"]: (rank, d["score"], "in_prompt") for rank, d in enumerate(results, start=1)}
    cited = [d["id"] for d in results if f"[{d['id']}]" in answer]
    assert cited and request["cited_ids"] == cited


def test_a_search_tool_the_instrumentation_makes_a_retriever(collector: Proc,
                                                             llm: FakeLLM) -> None:
    # tool_span_kinds makes the function tool a RETRIEVER span, which lists a bare list of
    # results as documents; the instrumentation reads only a `content` key into
    # document.content, so these documents (under `text`) come with ids and scores but no
    # text: their text is read from the tool's result
    question = QUESTIONS[2].text
    agent = agents_rag_app.build_agent(llm.url, bare=True)
    answers: list[str] = []
    trace_id = traced(collector, OpenAIAgentsInstrumentor(),
                      lambda: answers.append(agents_rag_app.ask(agent, question)),
                      tool_span_kinds={agents_rag_app.TOOL: "RETRIEVER"})
    prompt = joined_messages(llm.bodies[-1])
    (results,) = [json.loads(m["content"]) for m in llm.bodies[-1]["messages"]
                  if m["role"] == "tool"]
    trace = collector.trace(trace_id)
    request = trace["request"]
    assert request["question"] == question and request["answer"] == answers[0]
    assert request["warnings"] in (None, [])
    check_placements(trace, where(prompt, results))
    assert {c["chunk_id"]: (c["retrieval_rank"], c["retrieval_score"], c["stage"])
            for c in trace["chunks"]} == {
        d["id"]: (rank, d["score"], "in_prompt") for rank, d in enumerate(results, start=1)}
