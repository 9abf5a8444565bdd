"""Record each sweep call as a trace, through the same encoder as any app.

A real TracerProvider builds the span and ``midtrace.schemas.encode.record_request`` sets midtrace's
attributes on it. The finished span then goes to a sink: the OTLP/HTTP exporter (a running
collector, ``--url``) or, for ``--db``, the collector's store, imported only then so this
module stays light. Export is synchronous and checked, so the journal never records a call
the sink did not take. Each trial's trace id is derived from its identity
(``results.trace_id_of``): a trial sent twice lands on one trace, not two requests.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind

from midtrace.collector.settings import ClickHouseURL
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import RagRecord

SERVICE = "midtrace-sweep"
SPAN_NAME = "sweep.chat"


class RecordError(Exception):
    """The sink did not take the spans; the message says where and why."""


class Sink(Protocol):
    def export(self, spans: Sequence[ReadableSpan]) -> None: ...
    def close(self) -> None: ...


class OtlpSink:
    """A running collector, through OpenTelemetry's own OTLP/HTTP exporter."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._exporter = OTLPSpanExporter(endpoint=self.url + "/v1/traces", headers=headers,
                                          timeout=timeout)

    def export(self, spans: Sequence[ReadableSpan]) -> None:
        if self._exporter.export(spans) is not SpanExportResult.SUCCESS:
            raise RecordError(f"the collector at {self.url} did not accept the traces (is it "
                              "running, and is --token right? its log says more)")

    def close(self) -> None:
        self._exporter.shutdown()


class StoreSink:
    """Write straight into a store no collector holds, through the collector's store: a
    DuckDB file, or a ClickHouse store (which collectors may be writing at the same time)."""

    def __init__(self, store: Path | ClickHouseURL, prices: Path | None = None) -> None:
        from midtrace.collector.storage.store import StoreError, open_writable

        try:  # the store prices what it holds with this table (docs/metrics.md, "Cost")
            self._store = open_writable(store, prices=prices)
        except StoreError as e:
            raise RecordError(str(e)) from e
        self.path = store

    def export(self, spans: Sequence[ReadableSpan]) -> None:
        from midtrace.collector.receive.bodies import check_spans
        from midtrace.collector.storage.store import WriteJob
        from midtrace.collector.intake.otlp import encode_sdk_spans

        check = check_spans(encode_sdk_spans(spans))
        if check.rejected:
            raise RecordError(f"spans refused: {check.message}")
        try:
            self._store.write([WriteJob(spans=check.accepted)])
        except Exception as e:  # the journal must not move past a write that failed
            raise RecordError(f"cannot write to {self.path}: {e}") from e

    def close(self) -> None:
        self._store.close()


class _TrialIds(IdGenerator):
    """Trace ids set by the recorder for each span; span ids random."""

    def __init__(self) -> None:
        self.next_trace_id = 0
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return self.next_trace_id or self._random.generate_trace_id()


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class Recorder:
    """Builds one span per call on a real TracerProvider and hands batches to a sink."""

    def __init__(self, sink: Sink, service: str = SERVICE) -> None:
        self.sink = sink
        self._ids = _TrialIds()
        self._keep = _Keep()
        self._lock = threading.Lock()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                       id_generator=self._ids, sampler=ALWAYS_ON)
        self.provider.add_span_processor(self._keep)
        self.tracer = self.provider.get_tracer("midtrace.sweep")

    def span(self, trace_id: str, record: RagRecord, start_ns: int, end_ns: int,
             extra: dict[str, Any] | None = None) -> ReadableSpan:
        """The finished span of one call (not yet sent)."""
        with self._lock:
            self._ids.next_trace_id = int(trace_id, 16)
            span = self.tracer.start_span(SPAN_NAME, context=Context(), kind=SpanKind.CLIENT,
                                          start_time=start_ns)
            self._ids.next_trace_id = 0
            record_request(span, record)
            if extra:
                span.set_attributes(extra)
            span.end(end_time=end_ns)
            return self._keep.ended.pop()

    def send(self, spans: Sequence[ReadableSpan]) -> None:
        if spans:
            self.sink.export(spans)

    def close(self) -> None:
        self.provider.shutdown()
        self.sink.close()
