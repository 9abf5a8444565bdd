"""One trace export, however it arrived (OTLP/HTTP or OTLP/gRPC): check its spans (the
checks whose answer goes back to the exporter), append it to the intake log and wait for
that commit (the acknowledgement), then pass the batch on to any forward targets; the rows
are derived behind it (collector/storage/appender.py). Counts what the health endpoint
reports about the traffic itself. ``recover`` derives what a crash left in the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from midtrace.collector.intake.otlp import ProtobufExport, records_to_request, spans_of
from midtrace.collector.receive.bodies import (
    PROTOBUF, REDACTED_PROTOBUF, BadInput, SpanCheck, SpanPairs, check_spans)
from midtrace.collector.receive.forward import Batch, Forwarder
from midtrace.collector.storage.appender import Appender
from midtrace.collector.storage.intake_log import IntakeLog
from midtrace.collector.storage.raw_export import RawExport
from midtrace.collector.storage.redact import redact_span
from midtrace.collector.storage.derive import spans_of_raw
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.storage.database import first_line
from midtrace.collector.storage.writer import QueueFull, is_data_fault, write_by_trace
from midtrace.schemas.conventions import PREFIX
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)

# Intake counts as busy (Writer.intake_busy: the writer derives nothing in this process)
# for this long after an export arrives. Under a burst exports arrive every few ms.
BUSY_SECONDS = 0.1
ADMISSION_WAIT_SECONDS = 2.0
ADMISSION_POLL_SECONDS = 0.02

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
    overloaded: int = 0  # exports that found derivation behind and waited for room
    refused_overloaded: int = 0  # of those, answered 503 / UNAVAILABLE after the wait
    log_exports: int = 0
    gen_ai_events: int = 0  # log records kept: GenAI events of a span
    log_records_ignored: int = 0  # every other log record
    cut_by_service: dict[str, CutSpans] = field(default_factory=dict)


class Intake:
    def __init__(self, appender: Appender, forwarders: Sequence[Forwarder] = (),
                 keep_text: bool = True) -> None:
        self.appender = appender
        self.keep_text = keep_text
        self.forwarders = list(forwarders)
        self.counters = IntakeCounters()
        self._last_export_at = -BUSY_SECONDS

    def busy(self) -> bool:
        """Whether an export arrived in the last BUSY_SECONDS."""
        return time.monotonic() - self._last_export_at < BUSY_SECONDS

    async def export(self, export: ProtobufExport | SpanPairs, batch: Batch) -> SpanCheck:
        """Log the export's good spans durably; returns what was accepted and refused.

        Raises QueueFull (answer 503 / UNAVAILABLE) before anything is stored, and the
        intake log's error when its commit fails.
        """
        # With derive workers, a protobuf export is derived by a worker from its raw bytes:
        # intake reads only what its checks need (midtrace's own attributes, which it checks
        # without building records) and hands the writer no spans. Otherwise (no workers, an
        # OTLP/JSON export, ``--no-text``) intake's spans are what is derived; a worker given
        # them decodes midtrace's attributes itself, so intake keeps no records for it.
        self._last_export_at = time.monotonic()
        workers = self.appender.derives_raw
        raw_only = self.keep_text and workers and isinstance(export, ProtobufExport)
        check = check_spans(spans_of(export, PREFIX) if raw_only else export,
                            keep_records=not workers)
        c = self.counters
        c.exports += 1
        c.spans_refused += len(check.rejected)
        if check.accepted:
            raw = (RawExport(batch.body, batch.content_type, batch.content_encoding,
                             checked=not check.rejected)
                   if self.keep_text else redacted_export(check.accepted))
            fut = await self._admit(raw, () if raw_only else check.accepted, len(check.accepted))
            await asyncio.wrap_future(fut)
            c.spans_accepted += len(check.accepted)
            self._count_cut(check.accepted)
            for f in self.forwarders:
                f.offer(batch)
        return check

    async def export_events(self, spans: Sequence[SpanRecord], ignored: int) -> SpanCheck:
        """Log the GenAI events of a logs export (as span records, collector/intake/
        genai_events.py) durably, like an export's spans; the other log records are counted
        and dropped. The intake log keeps the span records, not the logs export, so recovery
        and rebuild read them as spans. Not forwarded: forwarding passes trace exports on."""
        self._last_export_at = time.monotonic()
        check = check_spans([(s, None) for s in spans])
        c = self.counters
        c.log_exports += 1
        c.log_records_ignored += ignored
        c.spans_refused += len(check.rejected)
        if check.accepted:
            kept = check.accepted if self.keep_text else [redact_span(s) for s in check.accepted]
            raw = RawExport(records_to_request(kept).SerializeToString(),
                            PROTOBUF if self.keep_text else REDACTED_PROTOBUF)
            fut = await self._admit(raw, check.accepted, len(check.accepted))
            await asyncio.wrap_future(fut)
            c.gen_ai_events += len(check.accepted)
        return check

    async def _admit(self, raw: RawExport, spans: Sequence[SpanRecord], count: int) -> Future[int]:
        """Hand the export to the appender; when derivation is behind, wait up to
        ADMISSION_WAIT_SECONDS for room before answering QueueFull. A stock exporter retries
        a 503 only a few times (about 5 s at Retry-After: 1): waiting here first lets a burst
        of exporters through in turn instead of letting the unlucky one give up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADMISSION_WAIT_SECONDS
        waited = False
        while True:
            try:
                return self.appender.submit(raw, spans, count)
            except QueueFull:
                if not waited:
                    waited = True
                    self.counters.overloaded += 1
                if loop.time() >= deadline:
                    self.counters.refused_overloaded += 1
                    raise
            await asyncio.sleep(ADMISSION_POLL_SECONDS)

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
            "refused_overloaded": c.refused_overloaded,
            "logs": {"exports": c.log_exports, "gen_ai_events": c.gen_ai_events,
                     "other_records_ignored": c.log_records_ignored},
            "forward": [f.state.as_json() for f in self.forwarders],
        }
        if c.cut_by_service:
            out["attribute_limits"] = {
                "advice": ATTRIBUTE_LIMIT_ADVICE,
                "services": {svc: {"spans_cut": cut.spans, "attributes_dropped": cut.attributes}
                             for svc, cut in sorted(c.cut_by_service.items())},
            }
        return out


def redacted_export(spans: Sequence[SpanRecord]) -> RawExport:
    """What the intake log keeps of an export under ``--no-text``: its accepted spans with
    every free text replaced by its hash and length (collector/storage/redact.py), so no
    text reaches the file even for the moment before the spans are derived. The rows are
    derived from the spans in hand, text and all, as before."""
    request = records_to_request([redact_span(s) for s in spans])
    return RawExport(request.SerializeToString(), REDACTED_PROTOBUF)


def recover(store: Store, progress: Callable[[int, int], None] | None = None) -> int:
    """Derive the exports a stop left in the intake log (acknowledged, never derived).

    Returns how many there were. An entry that cannot be read again is logged and dropped.
    """
    intake_log = IntakeLog(store.conn)
    try:
        pending = intake_log.pending()
    finally:
        intake_log.close()
    for done, entry in enumerate(pending, start=1):
        try:
            spans = spans_of_raw(entry.export)
        except Exception as e:  # BadInput, or a redacted entry that cannot be read back
            log.error("intake log entry %d cannot be read again, dropped: %s", entry.export_id,
                      e.message if isinstance(e, BadInput) else e)
            spans = []  # the empty job only takes the entry out of the log
        job = WriteJob(spans=spans, export_id=entry.export_id)
        try:
            store.write([job])
        except Exception as e:
            if not is_data_fault(e):
                raise
            log.error("intake log entry %d could not be derived whole (%s); deriving its traces "
                      "one at a time", entry.export_id, first_line(e))
            write_by_trace(store, job)
        if progress is not None:
            progress(done, len(pending))
    return len(pending)
