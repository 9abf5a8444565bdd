"""Send RAG requests to a collector through the real OpenTelemetry SDK and OTLP exporter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from midtrace.schemas.encode import outcome_attributes, record_request
from midtrace.schemas.model import Outcome, RagRecord


@dataclass
class Sender:
    """A TracerProvider exporting to ``url`` over OTLP/HTTP (protobuf), one batch per trace."""

    url: str
    service: str = "support-bot"

    def __post_init__(self) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": self.service}))
        self.exporter = OTLPSpanExporter(endpoint=self.url + "/v1/traces", timeout=10)
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("midtrace.tests")

    def send(self, record: RagRecord, start_ns: int | None = None) -> str:
        """One trace: a root span with a retrieve child and an llm child carrying ``record``."""
        with self.tracer.start_as_current_span("rag.request", start_time=start_ns) as root:
            with self.tracer.start_as_current_span("retrieve", start_time=start_ns):
                pass
            with self.tracer.start_as_current_span("llm.chat", start_time=start_ns) as llm:
                record_request(llm, record)
            trace_id = format(root.get_span_context().trace_id, "032x")
        if not self.provider.force_flush(10_000):
            raise RuntimeError(f"export of trace {trace_id} did not finish")
        self.wait_derived()
        return trace_id

    def wait_derived(self) -> None:
        """Acknowledged is not yet derived: wait as a reader would, with ``fresh=1``."""
        answer = httpx.get(self.url + "/api/v1/settings", params={"fresh": "1"}, timeout=15)
        if answer.status_code not in (200, 401):  # 401: a guarded collector, tested elsewhere
            raise RuntimeError(f"derivation did not catch up: {answer.status_code} {answer.text}")

    def send_many(self, records: Sequence[RagRecord]) -> list[str]:
        return [self.send(r) for r in records]

    def send_outcome_span(self, outcome: Outcome) -> str:
        with self.tracer.start_as_current_span("grade") as span:
            span.set_attributes(outcome_attributes(outcome))
            trace_id = format(span.get_span_context().trace_id, "032x")
        self.provider.force_flush(10_000)
        self.wait_derived()
        return trace_id

    def close(self) -> None:
        self.provider.shutdown()
