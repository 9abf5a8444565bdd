"""OTel GenAI through the official `opentelemetry-instrumentation-openai-v2`, which records
message content as OTLP log records (GenAI events) in its event mode, not on the span.

A RAG app retrieves (a GenAI retrieval span it sets itself), asks a local stand-in for an
OpenAI-compatible endpoint through the real `openai` client, and exports with the real OTLP
exporters: spans to `/v1/traces`, log records to `/v1/logs` (or both over gRPC). The
collector joins each event to its LLM span, so the stored request has its prompt order,
slots, dropped chunk and citation as the app built them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from midtrace.client import open_client
from tests.fake_llm import FakeLLM
from tests.procs import Proc, start_collector

QUESTION = "How long do customers have to request a refund on an annual plan?"
DOCS = {  # id -> text, in retrieval order
    "warranty#1": "Hardware hubs carry a warranty of 30 days from delivery for defects.",
    "refund#2": "KEYFACT ANSWER: 14 days. Annual plans can be refunded within 14 days of the "
                "charge.",
    "billing#3": "Invoices are issued on the first business day of each month.",
    "plans#4": "Plans renew automatically at the end of each term unless cancelled.",
    "legacy#5": "A legacy note from 2023 mentioned a different refund period.",
}
IN_PROMPT = ["billing#3", "refund#2", "warranty#1", "plans#4"]  # the app's order; legacy#5 cut


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Proc]:
    proc = start_collector(tmp_path / "traces.duckdb", tmp_path / "collector.log")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM(usage_ratio=0.25)
    try:
        yield fake
    finally:
        fake.close()


def run_app(tracer_provider: TracerProvider, logger_provider: LoggerProvider, llm: FakeLLM,
            monkeypatch: pytest.MonkeyPatch, mode: str = "EVENT_ONLY") -> str:
    """One RAG request; returns its trace id."""
    # the instrumentation's event mode: the messages go in a log record, not on the span
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        tracer = tracer_provider.get_tracer("refund-bot")
        client = openai.OpenAI(base_url=llm.url, api_key="test-key", max_retries=0)
        with tracer.start_as_current_span("answer question") as root:
            with tracer.start_as_current_span("retrieve") as retrieval:
                retrieval.set_attribute("gen_ai.operation.name", "retrieval")
                retrieval.set_attribute("gen_ai.retrieval.query.text", QUESTION)
                retrieval.set_attribute("gen_ai.retrieval.documents", json.dumps(
                    [{"id": cid, "score": round(0.9 - 0.05 * i, 2), "content": text}
                     for i, (cid, text) in enumerate(DOCS.items())]))
            context = "\n".join(f"Document [{i}] {DOCS[cid]}"
                                for i, cid in enumerate(IN_PROMPT, start=1))
            client.chat.completions.create(model="gpt-4.1-mini", messages=[
                {"role": "system", "content": "Answer from the documents only; cite as [n]."},
                {"role": "user", "content": f"{context}\n\nQuestion: {QUESTION}"},
            ])
            trace_id = format(root.get_span_context().trace_id, "032x")
    finally:
        instrumentor.uninstrument()
    tracer_provider.shutdown()
    logger_provider.shutdown()
    return trace_id


def providers(span_exporter: object, log_exporter: object) -> tuple[TracerProvider, LoggerProvider]:
    resource = Resource.create({"service.name": "refund-bot"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))  # type: ignore[arg-type]
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))  # type: ignore[arg-type]
    return tracer_provider, logger_provider


def check_request(collector: Proc, trace_id: str, llm: FakeLLM) -> None:
    client = open_client(url=collector.url, fresh=True)
    try:
        trace = client.trace(trace_id)
    finally:
        client.close()
    assert trace is not None, "no request for the trace"
    request = trace["request"]
    assert request["convention"] == "genai" and request["model"] == "gpt-4.1-mini"
    assert request["question"] == QUESTION
    # the stand-in read slots 1, 2 and 4 and so found the fact at slot 2
    assert request["answer"] == "The answer is 14 days [2]." == llm_answer(llm)
    placements = sorted(trace["placements"], key=lambda p: p["prompt_index"])
    assert [p["chunk_id"] for p in placements] == IN_PROMPT
    assert [p["slot"] for p in placements] == [1, 2, 3, 4]
    stages = {c["chunk_id"]: c["stage"] for c in trace["chunks"]}
    assert stages == {**{cid: "in_prompt" for cid in IN_PROMPT}, "legacy#5": "dropped"}
    ranks = {c["chunk_id"]: c["retrieval_rank"] for c in trace["chunks"]}
    assert ranks == {cid: i for i, cid in enumerate(DOCS, start=1)}
    assert request["cited_ids"] == ["refund#2"]
    # the stand-in reports 7 completion tokens; the instrumentation puts them on the span
    assert request["output_tokens"] == 7
    # the system message comes first, then the documents: instructions before slot 1
    kinds = [s["kind"] for s in request["prompt_sections"]]
    assert kinds[0] == "instructions" and "question" in kinds


def llm_answer(llm: FakeLLM) -> str:
    from tests.fake_llm import answer_for
    assert len(llm.prompts) == 1
    return answer_for(llm.prompts[0], llm.rule)


def test_openai_v2_events_sent_as_log_records_over_http_join_their_spans(
        collector: Proc, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    tracer_provider, logger_provider = providers(
        OTLPSpanExporter(endpoint=collector.url + "/v1/traces", timeout=10),
        OTLPLogExporter(endpoint=collector.url + "/v1/logs", timeout=10))
    trace_id = run_app(tracer_provider, logger_provider, llm, monkeypatch)
    check_request(collector, trace_id, llm)
    health = httpx.get(collector.url + "/healthz", timeout=5).json()
    # one gen_ai.client.inference.operation.details record holds both messages and the answer
    assert health["logs"]["gen_ai_events"] == 1
    assert health["logs"]["other_records_ignored"] == 0


def test_content_on_the_span_needs_no_logs(collector: Proc, llm: FakeLLM,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    tracer_provider, logger_provider = providers(
        OTLPSpanExporter(endpoint=collector.url + "/v1/traces", timeout=10),
        OTLPLogExporter(endpoint=collector.url + "/v1/logs", timeout=10))
    trace_id = run_app(tracer_provider, logger_provider, llm, monkeypatch, mode="SPAN_ONLY")
    check_request(collector, trace_id, llm)
    assert httpx.get(collector.url + "/healthz", timeout=5).json()["logs"]["gen_ai_events"] == 0


def test_the_same_over_grpc(collector: Proc, llm: FakeLLM,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    tracer_provider, logger_provider = providers(
        GrpcSpans(endpoint=collector.grpc, insecure=True, timeout=10),
        GrpcLogs(endpoint=collector.grpc, insecure=True, timeout=10))
    trace_id = run_app(tracer_provider, logger_provider, llm, monkeypatch)
    check_request(collector, trace_id, llm)


def test_other_log_records_are_acknowledged_and_dropped(collector: Proc) -> None:
    body = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": [
        {"timeUnixNano": "1", "body": {"stringValue": "GET /health 200"},
         "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174"},
        {"timeUnixNano": "2", "eventName": "gen_ai.user.message",
         "body": {"kvlistValue": {"values": [{"key": "content",
                                              "value": {"stringValue": "hi"}}]}}},
    ]}]}]}
    answer = httpx.post(collector.url + "/v1/logs", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    health = httpx.get(collector.url + "/healthz", timeout=5).json()
    # a plain log line, and an event with no span to join: both dropped, nothing stored
    assert health["logs"] == {"exports": 1, "gen_ai_events": 0, "other_records_ignored": 2}
    bad = httpx.post(collector.url + "/v1/logs", content=b"{not json",
                     headers={"Content-Type": "application/json"}, timeout=10)
    assert bad.status_code == 400 and "not JSON" in bad.json()["message"]
    # a list that is a number was once a 500 (the hex ids were looked for in it)
    not_a_list = httpx.post(collector.url + "/v1/logs", json={"resourceLogs": [
        {"resource": {}, "scopeLogs": True}]}, timeout=10)
    assert not_a_list.status_code == 400, not_a_list.text
    assert "scopeLogs" in not_a_list.json()["message"]
    # a doubleValue of 400 digits was once a 500 (protobuf's JSON reader overflowed)
    huge = json.dumps(body).replace('{"stringValue": "hi"}', '{"doubleValue": 1' + "0" * 400 + "}")
    assert "0" * 400 in huge
    overflow = httpx.post(collector.url + "/v1/logs", content=huge.encode(),
                          headers={"Content-Type": "application/json"}, timeout=10)
    assert overflow.status_code == 400, overflow.text
    assert "beyond a double's range" in overflow.json()["message"]
