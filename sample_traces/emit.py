"""Write simulated requests as OTLP/JSON through the real OpenTelemetry SDK.

Each request becomes one trace: a root ``rag.request`` span, a ``retrieve`` child and an
``llm.chat`` child that carries the midtrace attributes, set by the same
``midtrace.schemas.encode.record_request`` an app calls. Ids come from a seeded IdGenerator and every
span has explicit start and end times, so the same input gives the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from midtrace.schemas.encode import record_request
from midtrace.collector.intake.file_exporter import OtlpJsonFileExporter
from midtrace.schemas.model import Outcome, RagRecord

SCOPE = "midtrace.sample_traces"
SCOPE_VERSION = "1"
REQUESTS_PER_LINE = 50


@dataclass(frozen=True)
class SimRequest:
    """One simulated request, ready to be emitted as a trace."""

    start: datetime
    record: RagRecord
    retrieve_ms: float
    llm_ms: float
    n_retrieved: int
    output_tokens: int
    late: tuple[Outcome, ...] = ()
    taxonomy: str = "ungraded"
    tags: frozenset[str] = field(default_factory=frozenset)


class SeededIdGenerator(IdGenerator):
    """Trace and span ids from a seeded PRNG: reproducible, never zero."""

    def __init__(self, seed: str) -> None:
        self._rng = random.Random(seed)

    def _nonzero(self, bits: int) -> int:
        while True:
            value = self._rng.getrandbits(bits)
            if value:
                return value

    def generate_span_id(self) -> int:
        return self._nonzero(64)

    def generate_trace_id(self) -> int:
        return self._nonzero(128)

    def is_trace_id_random(self) -> bool:
        return True


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(t: datetime) -> int:
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(frozen=True)
class FileJob:
    """One output file: its requests and the seed of its own id stream."""

    path: Path
    service: str
    id_seed: str
    requests: tuple[SimRequest, ...]


def write_trace_file(job: FileJob) -> list[str]:
    """Write one file, REQUESTS_PER_LINE requests per line; return the trace ids in order.

    Each file has its own TracerProvider and id stream, so files can be written in any
    order, or in parallel, and still come out byte for byte the same.
    """
    writer = _TraceWriter(job.service, job.id_seed)
    try:
        return writer.write_file(job.path, job.requests)
    finally:
        writer.close()


class _TraceWriter:
    def __init__(self, service: str, seed: str) -> None:
        # Resource(...) directly, not Resource.create: no SDK version or environment in the bytes.
        resource = Resource({"service.name": service, "midtrace.sample": "synthetic"})
        limits = SpanLimits(max_span_attributes=128, max_attribute_length=1_000_000)
        self._memory = InMemorySpanExporter()
        self._provider = TracerProvider(sampler=ALWAYS_ON, resource=resource,
                                        id_generator=SeededIdGenerator(seed),
                                        span_limits=limits, shutdown_on_exit=False)
        self._provider.add_span_processor(SimpleSpanProcessor(self._memory))
        self._tracer = self._provider.get_tracer(SCOPE, SCOPE_VERSION)

    def write_file(self, path: Path, requests: Iterable[SimRequest]) -> list[str]:
        exporter = OtlpJsonFileExporter(path)
        ids: list[str] = []
        try:
            pending = 0
            for req in requests:
                ids.append(self._emit(req))
                pending += 1
                if pending == REQUESTS_PER_LINE:
                    self._flush(exporter)
                    pending = 0
            self._flush(exporter)
        finally:
            exporter.shutdown()
        return ids

    def _flush(self, exporter: OtlpJsonFileExporter) -> None:
        spans = self._memory.get_finished_spans()
        if spans:
            exporter.export(spans)
        self._memory.clear()

    def _emit(self, req: SimRequest) -> str:
        rec = req.record
        t0 = req.start
        t_ret0 = t0 + timedelta(milliseconds=4)
        t_ret1 = t_ret0 + timedelta(milliseconds=req.retrieve_ms)
        t_llm0 = t_ret1 + timedelta(milliseconds=3)
        t_llm1 = t_llm0 + timedelta(milliseconds=req.llm_ms)
        t_end = t_llm1 + timedelta(milliseconds=2)
        root = self._tracer.start_span("rag.request", kind=trace.SpanKind.SERVER,
                                       start_time=_ns(t0))
        ctx = trace.set_span_in_context(root)
        retrieve = self._tracer.start_span("retrieve", context=ctx, start_time=_ns(t_ret0),
                                           attributes={"retrieval.top_k": req.n_retrieved})
        retrieve.end(end_time=_ns(t_ret1))
        llm = self._tracer.start_span("llm.chat", context=ctx, kind=trace.SpanKind.CLIENT,
                                      start_time=_ns(t_llm0))
        llm.set_attributes({
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": rec.model or "",
            "gen_ai.usage.input_tokens": rec.prompt_tokens or 0,
            "gen_ai.usage.output_tokens": req.output_tokens,
        })
        record_request(llm, rec)
        llm.end(end_time=_ns(t_llm1))
        root.end(end_time=_ns(t_end))
        return format(root.get_span_context().trace_id, "032x")

    def close(self) -> None:
        self._provider.shutdown()


def latency_ms(req: SimRequest) -> float:
    """End-to-end latency of a request as the trace above lays it out."""
    return round(4 + req.retrieve_ms + 3 + req.llm_ms + 2, 1)

