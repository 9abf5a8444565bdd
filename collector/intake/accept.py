"""One trace export, however it arrived (OTLP/HTTP or OTLP/gRPC): check its spans, hand the
good ones to the writer and wait for their commit, then pass the batch on to any forward
targets. Counts what the health endpoint reports about the traffic itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from midtrace.collector.receive.forward import Batch, Forwarder
from midtrace.collector.receive.bodies import SpanCheck, SpanPairs, check_spans
from midtrace.collector.storage.store import WriteJob
from midtrace.collector.storage.writer import QueueFull, Writer
from midtrace.schemas.span import SpanRecord

ATTRIBUTE_LIMIT_ADVICE = (
    "spans arrived with attributes dropped by the sending SDK's attribute limit (128 per span "
    "by default); raise OTEL_ATTRIBUTE_COUNT_LIMIT (or OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT) in the "
    "app's environment. See the attribute_limits view.")


@dataclass
class CutSpans:
    spans: int = 0
    attributes: int = 0


@dataclass
class IntakeCounters:
    exports: int = 0
    spans_accepted: int = 0
    spans_refused: int = 0
    overloaded: int = 0
    cut_by_service: dict[str, CutSpans] = field(default_factory=dict)


class Intake:
    def __init__(self, writer: Writer, forwarders: Sequence[Forwarder] = ()) -> None:
        self.writer = writer
        self.forwarders = list(forwarders)
        self.counters = IntakeCounters()

    async def export(self, export: ExportTraceServiceRequest | SpanPairs, batch: Batch) -> SpanCheck:
        """Store the export's good spans; returns what was accepted and refused.

        Raises QueueFull (answer 503 / UNAVAILABLE) before anything is stored, and the
        writer's error when the commit fails.
        """
        check = check_spans(export)
        c = self.counters
        c.exports += 1
        c.spans_refused += len(check.rejected)
        if check.accepted:
            try:
                fut = self.writer.submit(WriteJob(spans=check.accepted))
            except QueueFull:
                c.overloaded += 1
                raise
            await asyncio.wrap_future(fut)
            c.spans_accepted += len(check.accepted)
            self._count_cut(check.accepted)
            for f in self.forwarders:
                f.offer(batch)
        return check

    def _count_cut(self, spans: Sequence[SpanRecord]) -> None:
        for s in spans:
            if s.dropped_attributes_count:
                cut = self.counters.cut_by_service.setdefault(s.service or "(no service.name)", CutSpans())
                cut.spans += 1
                cut.attributes += s.dropped_attributes_count

    def health(self) -> dict[str, object]:
        c = self.counters
        out: dict[str, object] = {
            "exports": c.exports, "spans_accepted": c.spans_accepted,
            "spans_refused": c.spans_refused, "overloaded": c.overloaded,
            "forward": [f.state.as_json() for f in self.forwarders],
        }
        if c.cut_by_service:
            out["attribute_limits"] = {
                "advice": ATTRIBUTE_LIMIT_ADVICE,
                "services": {svc: {"spans_cut": cut.spans, "attributes_dropped": cut.attributes}
                             for svc, cut in sorted(c.cut_by_service.items())},
            }
        return out
