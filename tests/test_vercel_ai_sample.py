"""sample_traces/vercel_ai_rag.jsonl: a real Vercel AI SDK app's `ai.*` traces, read back with
positions, drops and citations, checked against what the app did (vercel_ai/expected.json,
written by the recorder beside the traces), not against an earlier reading."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from midtrace.collector.intake.otlp import SpanRecord, iter_json_lines, spans_of
from midtrace.collector.normalize.inferred import NOT_KEPT_WARNING
from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.normalize.vercel_ai import (
    normalize_vercel_ai, prompt_messages, tool_result_documents)
from midtrace.schemas.model import RagRequest
from tests.test_redact import read_back

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
FIXTURE = SAMPLES / "vercel_ai_rag.jsonl"
EXPECTED = json.loads((SAMPLES / "vercel_ai" / "expected.json").read_text())
# the same app through @ai-sdk/otel's default integration: OTel GenAI spans
GENAI_FIXTURE = SAMPLES / "vercel_ai" / "genai_rag.jsonl"
GENAI_EXPECTED = json.loads((SAMPLES / "vercel_ai" / "expected_genai.json").read_text())


def traces_in(path: Path) -> dict[str, list[SpanRecord]]:
    traces: dict[str, list[SpanRecord]] = defaultdict(list)
    for _, export in iter_json_lines(path.read_text()):
        assert not isinstance(export, Exception), export
        for span, error in spans_of(export):
            assert span is not None, error
            traces[span.trace_id].append(span)
    return traces


@pytest.fixture(scope="module")
def traces() -> dict[str, list[SpanRecord]]:
    return traces_in(FIXTURE)


def check_request(request: RagRequest, app: dict[str, Any], convention: str = "vercel_ai") -> None:
    """One stored request against what the app did in it."""
    record = request.record
    assert (request.convention, request.service, request.tokens_estimated) == (
        convention, EXPECTED["service"], True)
    assert request.warnings == ()
    assert (record.question, record.answer, record.model) == (
        app["question"], app["answer"], app["model"])
    assert record.prompt_tokens == app["prompt_tokens"]
    ranked = sorted(record.chunks, key=lambda c: c.retrieval_rank or 0)
    assert [c.id for c in ranked] == app["retrieved"]
    assert [c.retrieval_rank for c in ranked] == list(range(1, len(app["retrieved"]) + 1))
    assert [c.retrieval_score for c in ranked] == app["scores"]
    assert [p.chunk_id for p in record.placements] == app["in_prompt"]
    assert [p.prompt_index for p in record.placements] == list(range(len(app["in_prompt"])))
    assert {c.id: c.stage for c in record.chunks} == {
        cid: "dropped" if cid in app["dropped"] else "in_prompt" for cid in app["retrieved"]}
    assert {c.id: c.source_id for c in record.chunks} == app["source"]
    # each placement covers its policy's text (no policy text has a character JSON escapes)
    for p in record.placements:
        assert (p.char_end or 0) - (p.char_start or 0) == len(app["text"][p.chunk_id])
    # an answer with no citation marker leaves the citations unknown, not empty
    assert record.cited_ids == (tuple(app["cited"]) if app["cited"] else None)


def test_every_request_is_read_as_the_app_made_it(traces: dict[str, list[SpanRecord]]) -> None:
    assert sorted(traces) == sorted(r["trace_id"] for r in EXPECTED["requests"])
    for app in EXPECTED["requests"]:
        request = normalize_trace(traces[app["trace_id"]])
        assert request is not None, app["question"]
        check_request(request, app)


@pytest.mark.parametrize("without_tool_spans", [False, True])
def test_the_default_integration_is_read_through_the_genai_conventions(
        without_tool_spans: bool) -> None:
    # ai 7's default telemetry: chat spans, execute_tool spans with gen_ai.tool.call.result,
    # an invoke_agent span around the steps. Without the tool spans, the tool responses in
    # the answering chat's input messages are read instead.
    traces = traces_in(GENAI_FIXTURE)
    assert sorted(traces) == sorted(r["trace_id"] for r in GENAI_EXPECTED["requests"])
    for app in GENAI_EXPECTED["requests"]:
        spans = traces[app["trace_id"]]
        operations = {s.attributes.get("gen_ai.operation.name") for s in spans}
        assert "invoke_agent" in operations  # with the question and answer: no call of its own
        assert ("execute_tool" in operations) == (app["shape"] == "tool")
        if without_tool_spans:
            spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") != "execute_tool"]
        request = normalize_trace(spans)
        assert request is not None and request.kind == "rag", app["question"]
        check_request(request, app, "genai")


def test_an_agent_span_is_no_call_of_its_own_whatever_messages_it_carries() -> None:
    # An instrumentation may record the whole conversation on the agent span; it still ends
    # after the chat that answered and reports the tokens of every step together.
    app = next(a for a in GENAI_EXPECTED["requests"] if a["shape"] == "tool")
    spans = traces_in(GENAI_FIXTURE)[app["trace_id"]]
    chats = sorted((s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"),
                   key=lambda s: s.end_ns)
    (agent,) = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    assert agent.end_ns > chats[-1].end_ns
    assert agent.attributes["gen_ai.usage.input_tokens"] != app["prompt_tokens"]
    agent = replace(agent, attributes={
        **agent.attributes, "gen_ai.input.messages": chats[-1].attributes["gen_ai.input.messages"]})
    request = normalize_trace([agent if s.span_id == agent.span_id else s for s in spans])
    assert request is not None
    assert request.record.prompt_tokens == app["prompt_tokens"]  # the chat's, not the agent's


def test_the_sample_covers_both_shapes_drops_and_positions() -> None:
    apps = EXPECTED["requests"]
    assert {(a["shape"], a["api"]) for a in apps} == {
        ("context", "generateText"), ("context", "streamText"), ("tool", "generateText")}
    # a budget cut dropped policies, once the one that answers
    assert sum(bool(a["dropped"]) for a in apps) >= 2
    assert any(a["decisive"] in a["dropped"] for a in apps)
    slots = {a["in_prompt"].index(a["decisive"]) + 1 for a in apps if a["decisive"] in a["in_prompt"]}
    assert len(slots) >= 4  # the answering policy at several places in the prompt
    assert any(a["decisive"] not in a["retrieved"] for a in apps)  # never retrieved


def test_a_context_app_without_a_retrieval_span_is_an_llm_only_request(
        traces: dict[str, list[SpanRecord]]) -> None:
    # The AI SDK records no retrieval the app does itself: without the app's own span the
    # prompt's policies cannot be told from the rest of it, so the trace is an LLM call with
    # no retrieval (in no metric).
    for app in EXPECTED["requests"]:
        if app["shape"] == "context":
            spans = [s for s in traces[app["trace_id"]] if s.name != "retrieve"]
            for request in (normalize_vercel_ai(spans), normalize_trace(spans)):
                assert request is not None and request.kind == "llm_only"
                assert request.record.chunks == () and request.record.answer == app["answer"]


def test_the_answering_call_is_the_step_after_the_tool(traces: dict[str, list[SpanRecord]]) -> None:
    for app in EXPECTED["requests"]:
        if app["shape"] != "tool":
            continue
        spans = traces[app["trace_id"]]
        steps = sorted((s for s in spans if s.name == "ai.generateText.doGenerate"),
                       key=lambda s: s.end_ns)
        assert len(steps) == 2
        # the first step only called the tool; its prompt holds no policy
        assert steps[0].attributes["ai.response.text"] == ""
        request = normalize_trace(spans)
        assert request is not None and request.record.answer == app["answer"] != ""


@pytest.mark.parametrize(("result", "expected"), [
    (["Refunds take 5 days.", " ", "Returns within 14 days."],
     [(1, None, "Refunds take 5 days."), (3, None, "Returns within 14 days.")]),
    ('[{"id": "a", "score": 0.9, "content": "A text"}, {"id": "b", "text": "B text"}]',
     [(1, "a", "A text"), (2, "b", "B text")]),
    ({"documents": [{"pageContent": "LangChain style", "metadata": {"source": "s.md"}}]},
     [(1, None, "LangChain style")]),
    ({"results": [{"id": 7, "page_content": "seven"}, {"title": "no text"}, 3]},
     [(1, "7", "seven")]),
    ({"temperature": 21, "unit": "C"}, []),
    ("not json at all", []),
    ([1, 2, 3], []),
])
def test_documents_are_read_from_common_tool_result_shapes(
        result: Any, expected: list[tuple[int, str | None, str]]) -> None:
    got = tool_result_documents(result)
    assert [(rank, d.doc_id, d.text) for rank, d in got] == expected


def test_a_source_in_a_tool_result_is_the_chunk_source() -> None:
    ((_, doc),) = tool_result_documents([{"content": "x", "metadata": {"source": "a.md"}}])
    assert doc.source_id == "a.md"
    ((_, doc),) = tool_result_documents([{"content": "x", "url": "https://e.x/a"}])
    assert doc.source_id == "https://e.x/a"


def test_prompt_messages_read_text_parts_and_tool_results_as_sent() -> None:
    messages = [
        {"role": "system", "content": "Answer from the results."},
        {"role": "user", "content": [{"type": "text", "text": "Q?"},
                                     {"type": "image", "image": "..."}]},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "1",
                                           "toolName": "search", "input": {"q": "Q"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "1", "toolName": "search",
             "output": {"type": "json", "value": [{"text": "caf\u00e9 \"quoted\""}]}},
            {"type": "tool-result", "toolCallId": "2", "toolName": "old", "result": "plain"}]},
    ]
    assert prompt_messages(json.dumps(messages)) == [
        ("system", "Answer from the results."), ("user", "Q?"),
        ("tool", '[{"text":"caf\u00e9 \\"quoted\\""}]'), ("tool", "plain")]


def test_a_trace_read_back_without_text_keeps_its_chunks_model_and_prompt_size(
        traces: dict[str, list[SpanRecord]]) -> None:
    for app in EXPECTED["requests"]:
        spans = traces[app["trace_id"]]
        first, again = normalize_trace(spans), normalize_trace(read_back(spans))
        assert first is not None and again is not None
        assert (again.convention, again.record.model) == ("vercel_ai", app["model"])
        assert [(c.id, c.retrieval_rank) for c in again.record.chunks] == [
            (cid, rank) for rank, cid in enumerate(app["retrieved"], start=1)]
        assert again.record.prompt_chars == first.record.prompt_chars
        assert again.record.prompt_tokens == app["prompt_tokens"]
        assert NOT_KEPT_WARNING in again.warnings and not again.record.placements


def test_a_second_tool_call_is_a_second_retrieval_with_a_warning(
        traces: dict[str, list[SpanRecord]]) -> None:
    app = next(a for a in EXPECTED["requests"] if a["shape"] == "tool")
    spans = traces[app["trace_id"]]
    (call,) = [s for s in spans if s.name == "ai.toolCall"]
    # the same search once more, earlier, returning the policies in reverse
    again = replace(call, span_id="f" * 16, start_ns=call.start_ns - 1, end_ns=call.end_ns - 1,
                    attributes={**call.attributes, "ai.toolCall.result": json.dumps(
                        json.loads(str(call.attributes["ai.toolCall.result"]))[::-1])})
    request = normalize_trace([*spans, again])
    assert request is not None
    assert request.warnings == ("2 retrievals (search_policies, search_policies); each "
                                "chunk's retrieval rank is from the first retrieval that "
                                "returned it",)
    ranks = {c.id: c.retrieval_rank for c in request.record.chunks}
    assert ranks == {cid: len(app["retrieved"]) - i for i, cid in enumerate(app["retrieved"])}
    assert [p.chunk_id for p in request.record.placements] == app["in_prompt"]


def test_output_tokens_are_the_answering_calls(traces: dict[str, list[SpanRecord]]) -> None:
    """requests.output_tokens: ai.usage.outputTokens of the model call that answered (the
    last to end; the sample's calls report it)."""
    from midtrace.collector.normalize.vercel_ai import LLM_OPERATIONS, operation

    for trace_id, spans in traces.items():
        calls = sorted((s for s in spans if operation(s) in LLM_OPERATIONS),
                       key=lambda s: s.end_ns)
        reported = calls[-1].attributes["ai.usage.outputTokens"]
        request = normalize_trace(spans)
        assert request is not None and isinstance(reported, int) and reported > 0
        assert request.record.output_tokens == reported, trace_id
