"""Chosen traces out of the database as OTLP/JSON lines, one ExportTraceServiceRequest per
trace: the format ``midtrace ingest`` (and OTel's file exporter) reads, for handing an
incident's traces to someone else or loading them into a fresh database.

A span comes out as midtrace kept it: ids, name, kind, times, status code, attributes
(texts restored from their references), resource and scope name. Texts dropped by
``--no-text`` come out as their ``[redacted: N characters]`` placeholder. Outcomes posted
to /v1/outcomes are not spans and are not part of the export.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from midtrace.collector.storage.retention import check_trace_id
from midtrace.collector.storage.store import Store
from midtrace.collector.intake.otlp import SpanRecord, records_to_request, request_to_json


def export_lines(store: Store, trace_ids: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """``(trace_id, json_line)`` per requested trace; the line is None for an unknown trace."""
    wanted = [check_trace_id(t) for t in trace_ids]
    by_trace = store.spans_of_traces(wanted)
    for trace_id in dict.fromkeys(wanted):
        spans = by_trace.get(trace_id)
        if not spans:
            yield trace_id, None
            continue
        ordered: list[SpanRecord] = sorted(spans.values(), key=lambda s: (s.start_ns, s.span_id))
        yield trace_id, request_to_json(records_to_request(ordered))
