"""OTel GenAI semantic-convention traces, built through the real SDK, read by midtrace."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from midtrace.collector.normalize.genai import normalize_genai
from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.schemas.model import RagRequest
from tests.zero_code import provider_with, records

DOCS: list[dict[str, Any]] = [
    {"id": "faq-12", "score": 0.91, "content": "Orders ship within two business days."},
    {"id": "faq-07", "score": 0.85, "content": "Returns are accepted within 14 days."},
    {"id": "faq-31", "score": None, "content": "Gift cards never expire."},
    {"id": "faq-02", "score": 0.40, "content": "We ship to 30 countries."},
]
QUESTION = "How long do I have to return something?"


def system_prompt(order: Sequence[int]) -> str:
    return "Answer from these sources:\n" + "\n".join(
        f"[{n}] {DOCS[i]['content']}" for n, i in enumerate(order, start=1))


def send(tracer: Tracer, documents: Sequence[dict[str, Any]], order: Sequence[int],
         answer: str) -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
               "finish_reason": "stop"}]
    system = [{"type": "text", "content": system_prompt(order)}]
    with tracer.start_as_current_span("invoke_agent support"):
        with tracer.start_as_current_span("retrieval kb") as span:
            span.set_attributes({
                "gen_ai.operation.name": "retrieval",
                "gen_ai.data_source.id": "kb",
                "gen_ai.request.top_k": 4.0,
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(documents),
            })
        with tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attributes({
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 9,
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.system_instructions": json.dumps(system),
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(output),
            })


def normalized(documents: Sequence[dict[str, Any]] = DOCS, order: Sequence[int] = (1, 0, 2),
               answer: str = "Within 14 days [1].") -> RagRequest:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter, service="genai-bot")
    send(provider.get_tracer("test"), documents, order, answer)
    provider.shutdown()
    spans = records(exporter.get_finished_spans())
    assert normalize_openinference(spans) is None
    request = normalize_genai(spans)
    assert request is not None
    return request


def test_retrieved_documents_keep_their_ids_ranks_and_scores() -> None:
    request = normalized()
    chunks = request.record.chunks
    assert [(c.id, c.retrieval_rank, c.retrieval_score) for c in chunks] == [
        ("faq-12", 1, 0.91), ("faq-07", 2, 0.85), ("faq-31", 3, None), ("faq-02", 4, 0.40)]
    assert request.convention == "genai" and request.service == "genai-bot"
    assert request.record.question == QUESTION and request.record.model == "gpt-4o"


def test_prompt_order_offsets_and_tokens_come_from_the_chat_span() -> None:
    record = normalized().record
    prompt = system_prompt((1, 0, 2)) + "\n\n" + QUESTION
    assert record.prompt_chars == len(prompt) and record.prompt_tokens == 120
    assert [p.chunk_id for p in record.placements] == ["faq-07", "faq-12", "faq-31"]
    for p in record.placements:
        text = next(d["content"] for d in DOCS if d["id"] == p.chunk_id)
        assert str(text) == prompt[p.char_start:p.char_end]
        assert p.token_start == int((p.char_start or 0) * 120 / len(prompt))
        assert p.token_end == math.ceil((p.char_end or 0) * 120 / len(prompt))
    assert {c.id: c.stage for c in record.chunks}["faq-02"] == "dropped"


def test_the_cited_source_is_marked() -> None:
    record = normalized(answer="You have 14 days [1]; gift cards never expire [3].").record
    assert record.cited_ids == ("faq-07", "faq-31")
    assert {c.id: c.cited for c in record.chunks} == {
        "faq-12": False, "faq-07": True, "faq-31": True, "faq-02": False}
    assert record.answer == "You have 14 days [1]; gift cards never expire [3]."


def test_documents_without_text_stay_retrieved_with_a_warning() -> None:
    bare = [{"id": d["id"], "score": d["score"]} for d in DOCS]
    request = normalized(documents=bare)
    assert {c.stage for c in request.record.chunks} == {"retrieved"}
    assert request.record.placements == ()
    assert any("content" in w for w in request.warnings)
    assert request.record.answer == "Within 14 days [1]."


def test_integer_ids_a_text_field_and_legacy_prompt_attributes_are_read() -> None:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    tracer = provider.get_tracer("test")
    prompt = "Context:\n" + "\n".join(str(d["content"]) for d in DOCS[:2]) + "\nQ: " + QUESTION
    with tracer.start_as_current_span("rag"):
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attributes({"gen_ai.operation.name": "retrieval",
                                 "gen_ai.retrieval.documents": json.dumps(
                                     [{"id": 3, "text": DOCS[0]["content"]},
                                      {"id": 4, "text": DOCS[1]["content"]}])})
        with tracer.start_as_current_span("openai.chat") as span:
            span.set_attributes({"gen_ai.request.model": "gpt-3.5-turbo",
                                 "gen_ai.usage.prompt_tokens": 60,
                                 "gen_ai.prompt.0.role": "user",
                                 "gen_ai.prompt.0.content": prompt,
                                 "gen_ai.completion.0.role": "assistant",
                                 "gen_ai.completion.0.content": "Two days."})
    provider.shutdown()
    request = normalize_genai(records(exporter.get_finished_spans()))
    assert request is not None
    assert [p.chunk_id for p in request.record.placements] == ["3", "4"]
    assert request.record.prompt_tokens == 60 and request.record.answer == "Two days."
    assert request.record.cited_ids is None


def test_per_message_events_of_conventions_1_30_give_the_prompt_and_the_answer() -> None:
    """Instrumentations on GenAI conventions 1.30 send one log record per message
    (gen_ai.system.message, gen_ai.user.message, ...) and one per choice; the collector keeps
    them as children of their LLM span (collector/intake/genai_events.py)."""
    from midtrace.collector.intake.genai_events import event_spans, parse_logs_json
    from midtrace.schemas.span import SpanRecord

    trace, llm, retriever = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "aaa19b7ec3c1b174"
    docs = ["Refunds on annual plans: within 14 days of the charge.",
            "Hardware carries a 30 day warranty against defects."]
    spans = [
        SpanRecord(trace, retriever, "retrieve", 1_000, 2_000, {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": json.dumps([{"id": f"d{i}", "content": d}
                                                      for i, d in enumerate(docs)])}),
        SpanRecord(trace, llm, "chat m", 3_000, 9_000, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}),
    ]

    def record(name: str, time: int, body: dict[str, Any]) -> dict[str, Any]:
        def value(v: Any) -> dict[str, Any]:
            if isinstance(v, dict):
                return {"kvlistValue": {"values": [{"key": k, "value": value(x)}
                                                   for k, x in v.items()]}}
            return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}
        return {"timeUnixNano": str(time), "eventName": name, "traceId": trace,
                "spanId": llm, "body": value(body)}

    user = f"[1] {docs[1]}\n[2] {docs[0]}\n\nHow long is the refund window?"
    body = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [
        record("gen_ai.system.message", 4_000, {"content": "Cite as [n]."}),
        record("gen_ai.user.message", 4_001, {"content": user}),
        record("gen_ai.choice", 8_000, {"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant",
                                                    "content": "14 days [2]."}}),
    ]}]}]}).encode()
    events = event_spans(parse_logs_json(body))
    assert events.ignored == 0 and [e.parent_span_id for e in events.spans] == [llm] * 3
    # any order of arrival gives the same request
    for ordered in (spans + events.spans, events.spans[::-1] + spans[::-1]):
        request = normalize_genai(ordered)
        assert request is not None
        assert request.record.answer == "14 days [2]." and request.record.model == "m"
        assert [p.chunk_id for p in request.record.placements] == ["d1", "d0"]
        assert request.record.cited_ids == ("d0",)


def test_content_sent_as_events_on_the_span_reads_like_content_on_the_span() -> None:
    """Instrumentations that put the messages in span events, not attributes: the current
    operation-details event and the older gen_ai.content.prompt/completion pair; through the
    OTLP protobuf and JSON encodings alike."""
    from midtrace.collector.intake.otlp import json_spans, request_to_json

    messages = [{"role": "system", "parts": [{"type": "text", "content": system_prompt((1, 0, 2))}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "Within 14 days [1]."}]}]
    forms = {
        "gen_ai.client.inference.operation.details": {
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(output)},
        "gen_ai.content.prompt": {"gen_ai.prompt": json.dumps(
            [{"role": "system", "content": system_prompt((1, 0, 2))},
             {"role": "user", "content": QUESTION}])},
        "gen_ai.content.completion": {"gen_ai.completion": json.dumps(
            [{"role": "assistant", "content": "Within 14 days [1]."}])},
    }
    expected = normalized()  # the same request with the content as span attributes
    for events in (["gen_ai.client.inference.operation.details"],
                   ["gen_ai.content.prompt", "gen_ai.content.completion"]):
        exporter = InMemorySpanExporter()
        provider = provider_with(exporter, service="genai-bot")
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("invoke_agent support"):
            with tracer.start_as_current_span("retrieval kb") as span:
                span.set_attributes({"gen_ai.operation.name": "retrieval",
                                     "gen_ai.retrieval.documents": json.dumps(DOCS)})
            with tracer.start_as_current_span("chat gpt-4o") as span:
                span.set_attributes({"gen_ai.operation.name": "chat",
                                     "gen_ai.request.model": "gpt-4o"})
                for name in events:
                    span.add_event(name, forms[name])
                span.add_event("exception", {"exception.message": "not a GenAI event"})
        provider.shutdown()
        sdk_spans = exporter.get_finished_spans()
        from_protobuf = records(sdk_spans)
        assert len(from_protobuf) == 3 + len(events)  # a child per GenAI event, no other
        from midtrace.collector.intake.otlp import encode_sdk_spans
        from_json = [s for s, _ in json_spans(json.loads(request_to_json(
            encode_sdk_spans(sdk_spans))))]
        assert sorted(s.span_id for s in from_json) == sorted(s.span_id for s in from_protobuf)
        for spans in (from_protobuf, from_json):
            request = normalize_genai(spans)
            assert request is not None, events
            assert request.record.answer == "Within 14 days [1]."
            assert [p.chunk_id for p in request.record.placements] == [
                p.chunk_id for p in expected.record.placements]
            assert request.record.cited_ids == expected.record.cited_ids


def test_an_operation_name_that_is_no_string_is_read_as_absent() -> None:
    """Other conventions' attributes are read leniently: a span whose gen_ai.operation.name
    is a list (or a map) once made its whole trace fail to normalize."""
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter, service="genai-bot")
    send(provider.get_tracer("test"), DOCS, (1, 0, 2), "Within 14 days [1].")
    provider.shutdown()
    spans = records(exporter.get_finished_spans())
    chat = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat")
    odd = [dataclasses.replace(chat, span_id=f"{n:016x}", name="odd",
                               attributes={"gen_ai.operation.name": value})
           for n, value in ((1, ["chat", "embeddings"]), (2, {"name": "chat"}))]
    plain = normalize_genai(spans)
    request = normalize_genai(spans + odd)
    assert plain is not None and request is not None
    assert request.record.chunks == plain.record.chunks
    assert request.record.placements == plain.record.placements
