"""Collectors on ClickHouse end to end, fed by the real OpenTelemetry SDK exporter.

A collector process on a chdb folder stores what a collector on a DuckDB file stores. Then
many collectors, one store: chdb holds a folder in one process only, so two collector
instances run in this process on one clickhouse-connect client (the code path a collector
takes per connection to a ClickHouse server), each with its own HTTP server on a free port,
and a trace whose spans are split between them converges to the request one collector
derives from all of them. Writing from several processes is ClickHouse's own guarantee, not
tested here (docs/clickhouse.md).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.receive.http import base_url, bind, create_app
from midtrace.collector.settings import CollectorSettings
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.clickhouse_store import ClickHouseStore
from midtrace.collector.storage.writer import Writer
from midtrace.schemas.encode import record_request
from tests.chdb_databases import connection_in
from tests.clickhouse_samples import same
from tests.e2e.test_collector import FULL
from tests.procs import Proc, read_trace, start_collector
from tests.sender import Sender

# What differs between two stores of the same traces: ids the store gives, arrival times
# (and the trace id, where two sends of one request are compared).
STORE_GIVEN = {"request_id", "outcome_id", "received_at", "graded_at", "time", "trace_id"}


def comparable(value: Any) -> Any:
    """A trace as the query API reads it, less what each store gives of its own."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in sorted(value.items()) if k not in STORE_GIVEN}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Where ``got`` is not ``expected`` as the engines' reads compare, by path."""
    if isinstance(expected, dict) and isinstance(got, dict):
        return [d for k in sorted(expected.keys() | got.keys())
                for d in differences(expected.get(k), got.get(k), f"{path}.{k}")]
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        return [d for i, (e, g) in enumerate(zip(expected, got))
                for d in differences(e, g, f"{path}[{i}]")]
    return [] if same(expected, got) else [f"{path}: DuckDB {expected!r}, ClickHouse {got!r}"]


def test_a_collector_on_clickhouse_stores_what_one_on_duckdb_stores(
        tmp_path: Path, collector: Proc) -> None:
    """The same request and outcome, sent by the SDK exporter to a collector on a DuckDB file
    and to one on a chdb folder, read back through each one's query API."""
    on_clickhouse = start_collector(f"chdb://{tmp_path}/chdb", tmp_path / "ch.log")  # type: ignore[arg-type]
    try:
        read = {}
        for name, proc in (("duckdb", collector), ("clickhouse", on_clickhouse)):
            sender = Sender(proc.url)
            trace_id = sender.send(FULL)
            sender.close()
            answer = httpx.post(proc.url + "/v1/outcomes", timeout=10, json={"outcomes": [
                {"trace_id": trace_id, "correct": True, "grader": "person", "reviewer": "ana",
                 "decisive_chunk_ids": ["refund-7"], "note": "late review"}]})
            assert answer.status_code == 200, answer.text
            read[name] = proc.trace(trace_id)
        assert read["clickhouse"]["request"]["question"] == FULL.question
        # as the engines' reads compare (tests/clickhouse_samples.py): a list ClickHouse
        # keeps empty is DuckDB's NULL one (docs/architecture.md, "Two engines")
        got, expected = comparable(read["clickhouse"]), comparable(read["duckdb"])
        assert differences(expected, got) == []
        health = httpx.get(on_clickhouse.url + "/healthz", timeout=5).json()
        assert health["status"] == "ready" and health["requests_written"] == 1
        assert health["derivation"]["pending_exports"] == 0  # acknowledged once derived
    finally:
        assert on_clickhouse.stop() == 0, on_clickhouse.log()
    assert "midtrace collector stopped" in on_clickhouse.log()


class InProcessCollector:
    """A collector instance in this process: its writer on a ClickHouseStore of the shared
    connection, its HTTP server on a free loopback port in a thread of its own."""

    def __init__(self, conn: clickhouse.Connection) -> None:
        settings = CollectorSettings(db="chdb://in-process")
        self.writer = Writer(ClickHouseStore(conn), max_queue=64).start()
        sock = bind("127.0.0.1", 0)
        self.url = base_url(sock)
        config = uvicorn.Config(create_app(self.writer, settings), log_level="warning",
                                access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[sock])), daemon=True)
        self.thread.start()
        for _ in range(100):
            if self.server.started:
                break
            threading.Event().wait(0.05)
        assert self.server.started

    def send(self, spans: list[ReadableSpan]) -> None:
        exporter = OTLPSpanExporter(endpoint=self.url + "/v1/traces", timeout=30)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()

    def trace(self, trace_id: str) -> dict[str, Any]:
        return read_trace(self.url, trace_id)

    def settle(self, timeout: float = 120) -> None:
        """Wait until every export this collector acknowledged is derived: ``fresh=1`` waits
        up to 10 s a call, and on chdb all collectors of this process share one engine."""
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(self.url + "/api/v1/facets", params={"fresh": "1"}, timeout=30)
            if answer.status_code != 503 or time.monotonic() > deadline:
                assert answer.status_code == 200, answer.text
                return

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.writer.close()


@pytest.fixture
def two_collectors(chdb_folder: Path) -> Iterator[tuple[InProcessCollector, InProcessCollector]]:
    conn = connection_in(chdb_folder, "collectors_shared")
    pair = (InProcessCollector(conn), InProcessCollector(conn))
    yield pair
    for c in pair:
        c.stop()


@pytest.fixture
def one_collector(chdb_folder: Path) -> Iterator[InProcessCollector]:
    single = InProcessCollector(connection_in(chdb_folder, "collectors_single"))
    yield single
    single.stop()


def recorded_traces(n: int, seed: int) -> dict[str, list[ReadableSpan]]:
    """``n`` traces as the SDK records them (a root, a retrieve and an llm span each, the
    llm span carrying a request), by trace id; nothing exported yet."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "split-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("midtrace.tests")
    rng = random.Random(seed)
    for _ in range(n):
        with tracer.start_as_current_span("rag.request"):
            with tracer.start_as_current_span("retrieve"):
                pass
            with tracer.start_as_current_span("llm.chat") as llm:
                record_request(llm, FULL if rng.random() < 0.5 else
                               FULL.__class__(**{**FULL.__dict__, "chunks": FULL.chunks[:2],
                                                 "placements": FULL.placements[:2]}))
    by_trace: dict[str, list[ReadableSpan]] = {}
    for span in memory.get_finished_spans():
        by_trace.setdefault(format(span.context.trace_id, "032x"), []).append(span)
    provider.shutdown()
    return by_trace


def test_a_trace_split_between_two_collectors_converges(
        two_collectors: tuple[InProcessCollector, InProcessCollector],
        one_collector: InProcessCollector) -> None:
    """Each trace's spans go to both collectors at once, split at random (the llm span to
    either), from several exporter threads; every trace reads as one collector given all of
    its spans derives it, from either collector, and is stored once."""
    traces = recorded_traces(24, seed=5)
    rng = random.Random(11)
    parts = []
    for spans in traces.values():
        cut = rng.randint(1, len(spans) - 1)
        shuffled = rng.sample(spans, len(spans))
        parts += [(two_collectors[0], shuffled[:cut]), (two_collectors[1], shuffled[cut:])]
        one_collector.send(spans)
    rng.shuffle(parts)
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda part: part[0].send(part[1]), parts))
    for c in (*two_collectors, one_collector):  # each waits only for what it acknowledged
        c.settle()
    for trace_id in sorted(traces):
        expected = comparable(one_collector.trace(trace_id))
        assert expected["request"] is not None
        for c in two_collectors:
            assert differences(expected, comparable(c.trace(trace_id))) == [], trace_id
    counts = httpx.get(two_collectors[1].url + "/api/v1/facets", params={"fresh": "1"},
                       timeout=10).json()
    assert sum(counts["kinds"].values()) == len(traces), counts


def test_an_outcome_sent_to_another_collector_is_merged_by_trace_id(
        two_collectors: tuple[InProcessCollector, InProcessCollector]) -> None:
    a, b = two_collectors
    traces = recorded_traces(1, seed=3)
    (trace_id, spans), = traces.items()
    a.send(spans)
    answer = httpx.post(b.url + "/v1/outcomes", timeout=10, json={"outcomes": [
        {"trace_id": trace_id, "correct": False, "grader": "person", "reviewer": "lee",
         "decisive_chunk_ids": ["warranty-2"]}]})
    assert answer.status_code == 200, answer.text
    merged = a.trace(trace_id)["outcome"]
    assert (merged["correct"], merged["grader"], merged["decisive_chunk_ids"]) == (
        False, "person", ["warranty-2"])

