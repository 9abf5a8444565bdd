"""OTLP/gRPC end to end, and overload: a burst larger than the writer's queue, sent by the
real exporters over HTTP and gRPC, lands completely once they have retried."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import grpc
import httpx
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from midtrace.collector.intake import otlp
from midtrace.schemas.model import Chunk, Placement, RagRecord
from tests.procs import start_collector
from tests.e2e.test_collector import FULL, finished_spans, rows

SERVICE_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def raw_grpc_export(address: str, body: bytes) -> tuple[grpc.StatusCode, bytes | None, str]:
    with grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
        call = ch.unary_unary(SERVICE_METHOD)
        try:
            answer = call(body, timeout=20)
        except grpc.RpcError as e:
            return e.code(), None, e.details() or ""
    return grpc.StatusCode.OK, answer, ""


def test_grpc_stores_what_http_stores_and_refuses_clearly(tmp_path: Path) -> None:
    db = tmp_path / "grpc.duckdb"
    proc = start_collector(db, tmp_path / "log")
    try:
        assert proc.grpc is not None
        spans = finished_spans(FULL)
        exporter = GrpcExporter(endpoint=proc.grpc, insecure=True, timeout=10)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        # Larger than gRPC's default 4 MiB receive limit: accepted like an HTTP body.
        huge = "evidence " * (6 * 1024 * 1024 // 9)
        big = otlp.encode_sdk_spans(finished_spans(RagRecord(
            question="big", chunks=(Chunk("huge", text=huge),),
            placements=(Placement("huge", 0, 0, 10),)))).SerializeToString()
        assert len(big) > 4 * 1024 * 1024
        code, _, details = raw_grpc_export(proc.grpc, big)
        assert code == grpc.StatusCode.OK, details
        code, _, details = raw_grpc_export(proc.grpc, b"\x00\xffgarbage")
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a protobuf" in details
        # One good span and one with a broken attribute: partial success names the bad one.
        good = otlp.encode_sdk_spans(finished_spans(RagRecord(question="partial")))
        bad = good.resource_spans[0].scope_spans[0].spans.add()
        bad.CopyFrom(good.resource_spans[0].scope_spans[0].spans[0])
        bad.trace_id = bytes.fromhex("ab" * 16)
        bad.attributes.add(key="midtrace.prompt.tokens").value.string_value = "12k"
        code, answer, details = raw_grpc_export(proc.grpc, good.SerializeToString())
        assert code == grpc.StatusCode.OK, details
        response = ExportTraceServiceResponse.FromString(answer or b"")
        assert response.partial_success.rejected_spans == 1
        assert "midtrace.prompt.tokens must be int" in response.partial_success.error_message
    finally:
        proc.stop()
    trace_id = format(spans[0].context.trace_id, "032x")
    assert {q for (q,) in rows(db, "SELECT question FROM requests")} == {
        "big", FULL.question, "partial"}
    assert rows(db, "SELECT trace_id, model, prompt_tokens FROM requests WHERE question = ?",
                [FULL.question]) == [(trace_id, "gpt-4.1-mini", 1200)]
    assert rows(db, "SELECT count(*) FROM chunks c JOIN requests r USING (request_id) "
                    "WHERE r.trace_id = ?", [trace_id]) == [(3,)]
    assert rows(db, "SELECT length(t.text) FROM chunks c JOIN chunk_texts t USING (text_hash) "
                    "WHERE c.chunk_id = 'huge'") == [(len(huge),)]


def batch_of_spans(n_traces: int, tag: str) -> list[Any]:
    spans: list[Any] = []
    for i in range(n_traces):
        text = f"{tag} chunk {i} " + "lorem ipsum " * 60
        spans += finished_spans(RagRecord(question=f"{tag}-{i}", chunks=(Chunk("a", text=text),),
                                          placements=(Placement("a", 0, 0, 50),)))
    return spans


MAX_BURSTS = 4  # bursts sent until one finds the queue full (see the test's docstring)


def test_a_burst_larger_than_the_queue_is_retried_and_nothing_is_lost(tmp_path: Path) -> None:
    """Whether a burst finds the queue full depends on how fast this machine sends it (the
    exporters encode in this process, one GIL): on a loaded machine the exports can arrive
    one by one. So bursts are sent until one has overloaded the collector, at most
    MAX_BURSTS, and every span of every burst must land."""
    db = tmp_path / "burst.duckdb"
    proc = start_collector(db, tmp_path / "log", "--queue-size", "1")
    threads_per_protocol, exports_per_thread, traces_per_export = 3, 3, 60
    results: list[SpanExportResult] = []

    def burst(round_: int) -> int:
        """One burst from every thread at once; the exports it sent."""
        work = []
        for proto in ("http", "grpc"):
            for t in range(threads_per_protocol):
                work.append((proto, [batch_of_spans(traces_per_export, f"r{round_}{proto}{t}e{e}")
                                     for e in range(exports_per_thread)]))
        barrier = threading.Barrier(len(work))

        def send(proto: str, batches: list[list[Any]]) -> None:
            assert proc.grpc is not None
            exporter = (HttpExporter(endpoint=proc.url + "/v1/traces", timeout=10)
                        if proto == "http" else GrpcExporter(endpoint=proc.grpc, insecure=True,
                                                               timeout=10))
            barrier.wait()
            for spans in batches:
                results.append(exporter.export(spans))
            exporter.shutdown()

        threads = [threading.Thread(target=send, args=w) for w in work]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return len(work) * exports_per_thread

    sent = 0
    try:
        for bursts in range(1, MAX_BURSTS + 1):
            sent += burst(bursts)
            health = httpx.get(proc.url + "/healthz").json()
            if health["overloaded"]:
                break
    finally:
        proc.stop()
    assert results == [SpanExportResult.SUCCESS] * sent
    assert health["overloaded"] > 0, (
        f"{bursts} bursts never filled the queue: the test proves nothing")
    expected = sent * traces_per_export
    assert rows(db, "SELECT count(*) FROM spans") == [(expected * 2,)]
    assert rows(db, "SELECT count(*) FROM requests") == [(expected,)]


def test_callers_whose_deadline_passes_never_hurt_the_writer(tmp_path: Path) -> None:
    """A gRPC deadline that passes before the commit cancels the caller's wait; the writer
    must go on committing, later exports must land and SIGTERM must still stop the process."""
    db = tmp_path / "deadline.duckdb"
    proc = start_collector(db, tmp_path / "log", "--queue-size", "16")
    body = otlp.encode_sdk_spans(batch_of_spans(200, "late")).SerializeToString()
    try:
        assert proc.grpc is not None
        codes = []
        with grpc.insecure_channel(proc.grpc) as ch:
            call = ch.unary_unary(SERVICE_METHOD)
            futures = [call.future(body, timeout=0.02) for _ in range(12)]
            for f in futures:
                try:
                    f.result()
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as e:
                    codes.append(e.code())
        assert grpc.StatusCode.DEADLINE_EXCEEDED in codes, "no deadline passed: the test proves nothing"
        exporter = GrpcExporter(endpoint=proc.grpc, insecure=True, timeout=10)
        assert exporter.export(batch_of_spans(3, "after")) == SpanExportResult.SUCCESS
        exporter.shutdown()
        health = httpx.get(proc.url + "/healthz", timeout=5)
        assert health.status_code == 200 and health.json()["status"] == "ready", health.text
    finally:
        assert proc.stop(timeout=30) == 0, proc.log()
    assert "Traceback" not in proc.log()
    assert rows(db, "SELECT count(*) FROM requests WHERE question LIKE 'after-%'") == [(3,)]


def test_a_burst_of_eight_stock_http_exporters_at_queue_size_two_loses_nothing(tmp_path: Path) -> None:
    """The stock OTLP/HTTP exporter gives up after a few retries (about 5 s at Retry-After: 1):
    the retry delay the collector asks for has to let every batch land within that."""
    db = tmp_path / "burst8.duckdb"
    proc = start_collector(db, tmp_path / "log", "--queue-size", "2")
    exporters, batches, traces = 8, 30, 10
    work = [[batch_of_spans(traces, f"x{t}b{b}") for b in range(batches)] for t in range(exporters)]
    results: list[SpanExportResult] = []
    barrier = threading.Barrier(exporters)

    def send(mine: list[list[Any]]) -> None:
        exporter = HttpExporter(endpoint=proc.url + "/v1/traces", timeout=10)
        barrier.wait()
        for spans in mine:
            results.append(exporter.export(spans))
        exporter.shutdown()

    try:
        threads = [threading.Thread(target=send, args=(w,)) for w in work]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        health = httpx.get(proc.url + "/healthz").json()
    finally:
        proc.stop()
    assert results.count(SpanExportResult.SUCCESS) == exporters * batches
    assert health["overloaded"] > 0, "the burst never filled the queue: the test proves nothing"
    assert rows(db, "SELECT count(*) FROM requests") == [(exporters * batches * traces,)]
