"""In front of production traffic: the shared token, forwarding to another backend, and the
SDK's attribute limit made visible."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.intake import otlp
from midtrace.collector.receive.forward import Batch, Forwarder
from midtrace.schemas.model import RagRecord
from tests.procs import Proc, start_collector
from tests.e2e.test_collector import finished_spans, rows
from tests.e2e.test_grpc_overload import SERVICE_METHOD

TOKEN = "s3cret-token"


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """A collector whose token comes from MIDTRACE_TOKEN."""
    tmp = tmp_path_factory.mktemp("guarded")
    proc = start_collector(tmp / "guarded.duckdb", tmp / "log", env={"MIDTRACE_TOKEN": TOKEN})
    yield proc
    proc.stop()


@pytest.mark.parametrize("method,path", [
    ("POST", "/v1/traces"), ("POST", "/v1/outcomes"), ("GET", "/api/v1/views/anything"),
    ("GET", "/no-such-route"),
])
def test_every_endpoint_but_healthz_wants_the_token(guarded: Proc, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        answer = httpx.request(method, guarded.url + path, headers=headers, content=b"{}")
        assert answer.status_code == 401, (headers, answer.text)
        assert "Authorization: Bearer" in answer.json()["error"]
    with_token = httpx.request(method, guarded.url + path, content=b"{}",
                               headers={"Authorization": f"Bearer {TOKEN}",
                                        "content-type": "application/json"})
    assert with_token.status_code != 401
    health = httpx.get(guarded.url + "/healthz")
    assert health.status_code == 200 and health.json()["token_required"] is True


def test_the_stock_exporters_send_the_token(guarded: Proc) -> None:
    assert guarded.grpc is not None
    spans = finished_spans(RagRecord(question="with token"))
    auth = {"authorization": f"Bearer {TOKEN}"}
    assert HttpExporter(endpoint=guarded.url + "/v1/traces", headers=auth).export(spans) == SpanExportResult.SUCCESS
    assert HttpExporter(endpoint=guarded.url + "/v1/traces").export(spans) == SpanExportResult.FAILURE
    assert GrpcExporter(endpoint=guarded.grpc, insecure=True, headers=auth).export(spans) == SpanExportResult.SUCCESS
    assert GrpcExporter(endpoint=guarded.grpc, insecure=True, timeout=5).export(spans) == SpanExportResult.FAILURE
    health = httpx.get(guarded.url + "/healthz").json()
    assert health["spans_accepted"] == 2 * len(spans)


def test_two_authorization_values_are_refused_on_both_transports(guarded: Proc) -> None:
    """HTTP servers read the first of two values and gRPC the last: neither may decide."""
    assert guarded.grpc is not None
    good, bad = f"Bearer {TOKEN}", "Bearer wrong"
    for pair in ([good, bad], [bad, good], [good, good]):
        answer = httpx.post(guarded.url + "/v1/outcomes", content=b'{"outcomes": []}',
                            headers=[("Authorization", v) for v in pair]
                            + [("content-type", "application/json")])
        assert answer.status_code == 401, (pair, answer.text)
        body = otlp.encode_sdk_spans(finished_spans(RagRecord(question="two"))).SerializeToString()
        with grpc.insecure_channel(guarded.grpc) as ch:
            with pytest.raises(grpc.RpcError) as refused:
                ch.unary_unary(SERVICE_METHOD)(body, timeout=10,
                                               metadata=[("authorization", v) for v in pair])
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, pair


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_an_empty_token_is_refused_from_the_flag_and_from_the_variable(tmp_path: Path, host: str) -> None:
    base = [sys.executable, "-m", "midtrace", "collector", "--db", str(tmp_path / "t.duckdb"),
            "--host", host, "--http-port", "0", "--grpc-port", "0"]
    for args, env in ((["--token", ""], {}), ([], {"MIDTRACE_TOKEN": ""})):
        done = subprocess.run(base + args, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env})
        assert done.returncode != 0, (args, env, done.stdout)
        assert "empty" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "t.duckdb").exists()


def many_attribute_spans(n: int) -> list[Any]:
    """Spans cut by the SDK's default limit of 128 attributes, as an app would send them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "chatty-app"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("retrieve") as span:
        for i in range(n):
            span.set_attribute(f"retrieval.documents.{i}.document.id", f"doc-{i}")
    return list(memory.get_finished_spans())


def test_forwarding_to_a_live_and_a_dead_backend_and_attribute_limits(tmp_path: Path) -> None:
    downstream = start_collector(tmp_path / "downstream.duckdb", tmp_path / "down.log")
    dead = f"http://127.0.0.1:{dead_port()}"
    upstream = start_collector(tmp_path / "upstream.duckdb", tmp_path / "up.log",
                               env={"MIDTRACE_FORWARD": f"{downstream.url},{dead}"})
    try:
        assert upstream.grpc is not None
        http = HttpExporter(endpoint=upstream.url + "/v1/traces")
        grpc_exporter = GrpcExporter(endpoint=upstream.grpc, insecure=True)
        sent_spans = 0
        for i in range(6):
            spans = finished_spans(RagRecord(question=f"forwarded {i}"))
            exporter = http if i % 2 else grpc_exporter
            started = time.monotonic()
            assert exporter.export(spans) == SpanExportResult.SUCCESS
            assert time.monotonic() - started < 2, "a dead forward target slowed ingest down"
            sent_spans += len(spans)
        cut = many_attribute_spans(140)
        assert cut[0].dropped_attributes == 12
        assert http.export(cut) == SpanExportResult.SUCCESS
        sent_spans += 1

        def down_spans() -> bool:
            return httpx.get(downstream.url + "/healthz").json()["spans_written"] == sent_spans

        wait_for(down_spans, "the downstream collector to hold every forwarded span")

        def forward_state() -> list[dict[str, Any]] | None:
            states = httpx.get(upstream.url + "/healthz").json()["forward"]
            done = all(s["sent"] + s["failed"] + s["dropped"] == 7 for s in states)
            return states if done else None

        live, gone = sorted(wait_for(forward_state, "forwarding to settle"),
                            key=lambda s: s["url"] != downstream.url + "/v1/traces")
        assert (live["sent"], live["failed"], live["dropped"]) == (7, 0, 0)
        assert gone["url"] == dead + "/v1/traces" and gone["sent"] == 0
        assert gone["failed"] + gone["dropped"] == 7 and "Connect" in gone["last_error"]
        limits = httpx.get(upstream.url + "/healthz").json()["attribute_limits"]
        assert limits["services"] == {"chatty-app": {"spans_cut": 1, "attributes_dropped": 12}}
        assert "OTEL_ATTRIBUTE_COUNT_LIMIT" in limits["advice"]
    finally:
        upstream.stop()
        downstream.stop()
    expected = [(f"forwarded {i}",) for i in range(6)]
    # The cut retriever span is forwarded too (as a request with no question: retrieval only).
    assert rows(tmp_path / "downstream.duckdb", "SELECT question FROM requests "
                "WHERE question IS NOT NULL ORDER BY 1") == expected
    assert rows(tmp_path / "downstream.duckdb", "SELECT count(*) FROM requests") == [(7,)]
    (view,) = rows(tmp_path / "upstream.duckdb", "SELECT * FROM attribute_limits")
    assert view[:3] == ("chatty-app", 1, 12) and "OTEL_ATTRIBUTE_COUNT_LIMIT" in view[4]


def test_a_full_forward_queue_drops_the_oldest_and_never_blocks() -> None:
    forwarder = Forwarder(f"http://127.0.0.1:{dead_port()}", max_queue=2).start()
    started = time.monotonic()
    for i in range(10):
        forwarder.offer(Batch(b"x" * i, "application/x-protobuf"))
    assert time.monotonic() - started < 0.5
    assert forwarder.state.dropped >= 7
    forwarder.close(drain_seconds=0)
    state = forwarder.state
    assert state.sent == 0 and state.failed + state.dropped == 10


def test_shutdown_with_a_slow_target_keeps_to_the_two_seconds_the_docs_promise() -> None:
    """A target that accepts the connection and never answers must not hold the stop."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        forwarder = Forwarder(f"http://127.0.0.1:{silent.getsockname()[1]}").start()
        forwarder.offer(Batch(b"x", "application/x-protobuf"))
        wait_for(lambda: forwarder.state.queued == 1, "the batch to be taken")
        time.sleep(0.2)  # the send is in flight, waiting for an answer that never comes
        started = time.monotonic()
        forwarder.close(drain_seconds=2.0)
        took = time.monotonic() - started
    assert took < 3.0, f"shutdown took {took:.1f} s"
    assert forwarder.state.sent == 0


def test_a_retry_after_that_is_no_ascii_number_keeps_the_forwarder_going() -> None:
    """Retry-After "²" (a digit to str.isdigit(), not to float()) once killed the forward
    thread: every later batch stayed queued and was dropped."""
    answers = ["busy", "ok", "ok"]

    class Target(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            if answers.pop(0) == "busy":
                self.send_response(503)
                self.send_header("Retry-After", "\u00b2")  # one latin-1 byte, 0xB2
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Target) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        forwarder = Forwarder(f"http://127.0.0.1:{server.server_address[1]}").start()
        try:
            forwarder.offer(Batch(b"x", "application/x-protobuf"))
            forwarder.offer(Batch(b"y", "application/x-protobuf"))
            wait_for(lambda: forwarder.state.sent == 2, "both batches to be forwarded")
        finally:
            forwarder.close(drain_seconds=0)
            server.shutdown()
    assert forwarder.state.failed == 0 and answers == []
