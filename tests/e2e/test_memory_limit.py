"""``--memory-limit``: DuckDB's cache held to a size, through the whole collector.

Under a limit the collector folds DuckDB's write-ahead log in at a quarter of it and lets at
most three eighths of it wait to be derived (database.writer_config, writer.backlog_bytes):
without that, blocks written since the last checkpoint filled the memory and DuckDB could no
longer commit. Recovery when DuckDB does run out of memory is tested in test_writer.py."""

from __future__ import annotations

import random
import string
from pathlib import Path

import grpc
import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.intake import otlp
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Placement, RagRecord
from tests.e2e.test_collector import rows
from tests.e2e.test_grpc_overload import batch_of_spans, raw_grpc_export
from tests.procs import start_collector

LIMIT = 64 << 20  # the least --memory-limit accepts


def record(i: int, rng: random.Random) -> RagRecord:
    """A request with 20 chunks of 1,500 characters of their own: about 30 KB of text."""
    chunks = tuple(Chunk(f"c{i}-{j}", retrieval_rank=j + 1, stage="in_prompt" if j < 8 else "retrieved",
                         text="".join(rng.choices(string.ascii_lowercase + " ", k=1500)))
                   for j in range(20))
    placements = tuple(Placement(c.id, k, 400 * k, 400 * k + 375) for k, c in enumerate(chunks[:8]))
    return RagRecord(question=f"question {i}?", answer=f"answer {i}", chunks=chunks,
                     placements=placements)


def test_a_collector_held_to_its_memory_limit_derives_everything_it_acknowledged(
        tmp_path: Path) -> None:
    db = tmp_path / "limited.duckdb"
    proc = start_collector(db, tmp_path / "collector.log", "--memory-limit", "64MiB")
    try:
        health = httpx.get(proc.url + "/healthz", timeout=10).json()
        assert health["memory_limit_bytes"] == LIMIT
        provider = TracerProvider(resource=Resource.create({"service.name": "limited"}))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=proc.url + "/v1/traces", timeout=30),
            max_queue_size=20_000, max_export_batch_size=256))
        tracer = provider.get_tracer("midtrace.tests")
        rng = random.Random(3)
        n = 3000  # about 90 MB of chunk text: past the limit, many times the log's quarter
        for i in range(n):
            with tracer.start_as_current_span("rag.request"):
                with tracer.start_as_current_span("llm.chat") as llm:
                    record_request(llm, record(i, rng))
        assert provider.force_flush(120_000)
        provider.shutdown()
        answer = httpx.get(proc.url + "/api/v1/requests", params={"fresh": "1", "limit": "1"},
                           timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["total"] == n
        health = httpx.get(proc.url + "/healthz", timeout=10).json()
        assert health["status"] == "ready"
        assert health["failed_jobs"] == 0
        # With the log at 256 MB and 96 MB let wait, DuckDB ran out of memory here (twice
        # in 3,000 requests) and the store had to be reopened.
        assert health["store_reopens"] == 0
    finally:
        proc.stop()
    assert rows(db, "SELECT count(*), count(DISTINCT text_hash) FROM chunks") == [(20 * n, 20 * n)]
    assert "Traceback" not in (tmp_path / "collector.log").read_text()


def test_an_export_larger_than_the_limit_lets_wait_is_refused_for_good_and_nothing_else(
        tmp_path: Path) -> None:
    """Held to 64MiB, DuckDB had no room for a 40 MB export: the append failed, the store had
    to be reopened, and the exporter retried the 503 in vain. Such an export is refused at
    once with an error no exporter retries (413 / RESOURCE_EXHAUSTED), the store untouched."""
    big_text = "".join(random.Random(5).choices(string.ascii_lowercase, k=1_000_000))
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("llm") as llm:
        record_request(llm, RagRecord(question="q", chunks=tuple(
            Chunk(f"big-{j}", stage="retrieved", text=f"{j} {big_text}") for j in range(30))))
    big = otlp.encode_sdk_spans(memory.get_finished_spans()).SerializeToString()
    assert len(big) > 3 * LIMIT // 8  # more than may wait, less than --max-body-mb
    small = otlp.encode_sdk_spans(batch_of_spans(5, "small")).SerializeToString()
    proc = start_collector(tmp_path / "big.duckdb", tmp_path / "collector.log",
                           "--memory-limit", "64MiB")
    try:
        answer = httpx.post(proc.url + "/v1/traces", content=big, timeout=60,
                            headers={"content-type": "application/x-protobuf"})
        assert answer.status_code == 413, answer.text
        assert "--memory-limit" in answer.text
        assert "retry-after" not in answer.headers
        assert proc.grpc is not None
        code, _, details = raw_grpc_export(proc.grpc, big)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "--memory-limit" in details
        answer = httpx.post(proc.url + "/v1/traces", content=small, timeout=60,
                            headers={"content-type": "application/x-protobuf"})
        assert answer.status_code == 200, answer.text
        requests = httpx.get(proc.url + "/api/v1/requests", params={"fresh": "1", "limit": "1"},
                             timeout=30).json()
        assert requests["total"] == 5
        health = httpx.get(proc.url + "/healthz", timeout=10).json()
        assert (health["status"], health["store_reopens"]) == ("ready", 0)
    finally:
        proc.stop()
