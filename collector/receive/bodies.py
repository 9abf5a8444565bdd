"""Turn an OTLP/HTTP or outcomes request body into write jobs, or say what is wrong.

OTLP/HTTP spec (opentelemetry-proto, docs/specification.md, "OTLP/HTTP"): the body is a
protobuf or JSON ExportTraceServiceRequest, optionally gzip-encoded; an undecodable body is
answered 400 with a Status; spans that are individually invalid are reported through
``partial_success`` (rejected count and a message) while the rest are accepted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from midtrace.collector.intake.genai_events import (
    LogsRead, event_spans, parse_logs_json, parse_logs_protobuf)
from midtrace.schemas.conventions import MAX_INT
from midtrace.schemas.decode import (
    InvalidAttributes, check_record, decode_record, has_midtrace_attributes, utc_time)
from midtrace.schemas.model import GRADERS, Outcome
from midtrace.collector.intake.otlp import (
    PayloadError, ProtobufExport, SpanRecord, json_double, json_spans, load_json,
    may_hold_lone_surrogates, parse_protobuf, spans_of)

SpanPairs = list[tuple[SpanRecord | None, str | None]]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
REDACTED_PROTOBUF = PROTOBUF + "; midtrace-redacted=1"  # an intake log entry --no-text wrote
MAX_MESSAGES = 5
MAX_NS = 2**63 - 1  # times are stored as signed 64-bit nanoseconds (year 2262)


class BadInput(Exception):
    """The request as a whole is refused; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def decompress(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    enc = (encoding or "identity").strip().lower()
    if enc in ("identity", ""):
        return body
    if enc != "gzip":
        raise BadInput(415, f"Content-Encoding {enc!r} is not supported; send gzip or none")
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes + 1)
    except zlib.error as e:
        raise BadInput(400, f"body is not valid gzip: {e}") from e
    if len(out) > max_bytes:
        raise BadInput(413, f"decompressed body is larger than the limit of {max_bytes} bytes")
    if not d.eof:
        raise BadInput(400, "gzip body is truncated")
    return out


def parse_traces(body: bytes, content_type: str | None) -> SpanPairs:
    """The spans of an export body, each paired with the reason it cannot be read (or None)."""
    kind = media_type(content_type)
    try:
        if kind == PROTOBUF:
            return list(spans_of(parse_protobuf(body)))
        if kind == JSON:
            return list(json_spans(load_json(body), may_hold_lone_surrogates(body)))
    except PayloadError as e:
        raise BadInput(400, str(e)) from e
    raise BadInput(415, f"Content-Type {content_type!r} is not supported; send {PROTOBUF} or {JSON}")


def parse_logs(body: bytes, content_type: str | None) -> LogsRead:
    """The GenAI events of an OTLP logs export body, as span records, and how many other
    log records it held (collector/intake/genai_events.py)."""
    kind = media_type(content_type)
    try:
        if kind == PROTOBUF:
            return event_spans(parse_logs_protobuf(body))
        if kind == JSON:
            return event_spans(parse_logs_json(body))
    except PayloadError as e:
        raise BadInput(400, str(e)) from e
    raise BadInput(415, f"Content-Type {content_type!r} is not supported; send {PROTOBUF} or {JSON}")


def parse_trace_export(body: bytes, content_type: str | None) -> ProtobufExport | SpanPairs:
    """Like ``parse_traces``, but a protobuf body stays unread (its bytes and the message
    parsed from them): its spans are read by whoever takes it (Intake.export reads only what
    its checks need)."""
    if media_type(content_type) == PROTOBUF:
        try:
            return parse_protobuf(body)
        except PayloadError as e:
            raise BadInput(400, str(e)) from e
    return parse_traces(body, content_type)


@dataclass
class SpanCheck:
    accepted: list[SpanRecord] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.rejected:
            return ""
        shown = "; ".join(self.rejected[:MAX_MESSAGES])
        more = len(self.rejected) - MAX_MESSAGES
        return shown + (f"; and {more} more" if more > 0 else "")


def traces_answer(check: SpanCheck) -> ExportTraceServiceResponse:
    """The OTLP answer to a trace export: how many spans were refused, and why."""
    response = ExportTraceServiceResponse()
    if check.rejected:
        response.partial_success.rejected_spans = len(check.rejected)
        response.partial_success.error_message = check.message
    return response


def logs_answer(check: SpanCheck) -> ExportLogsServiceResponse:
    """The OTLP answer to a logs export: how many GenAI events were refused, and why."""
    response = ExportLogsServiceResponse()
    if check.rejected:
        response.partial_success.rejected_log_records = len(check.rejected)
        response.partial_success.error_message = check.message
    return response


def check_spans(spans: ProtobufExport | ExportTraceServiceRequest | SpanPairs
                | Iterable[tuple[SpanRecord | None, str | None]],
                keep_records: bool = True) -> SpanCheck:
    """Split an export's spans into the valid ones and messages for the refused ones.

    A span with midtrace's own attributes keeps the record they decode to, so that its
    normalizer does not decode them again; ``keep_records=False`` only checks them, for spans
    that a derive worker decodes again in its own process (nothing is built here)."""
    check = SpanCheck()
    pairs = (spans_of(spans) if isinstance(spans, (ProtobufExport, ExportTraceServiceRequest))
             else spans)
    for span, error in pairs:
        if span is None:
            check.rejected.append(error or "unreadable span")
            continue
        if span.dropped_attributes_count > MAX_INT:  # a count: "very many" is enough
            span = dataclasses.replace(span, dropped_attributes_count=MAX_INT)
        out_of_range = _out_of_range(span)
        if out_of_range:
            check.rejected.append(f"span {span.span_id} of trace {span.trace_id}: {out_of_range}")
            continue
        if has_midtrace_attributes(span.attributes):
            try:
                if keep_records:
                    span.remember_record(decode_record(span.attributes))
                else:
                    check_record(span.attributes)
            except InvalidAttributes as e:
                check.rejected.append(f"span {span.span_id} of trace {span.trace_id}: {e}")
                continue
        check.accepted.append(span)
    return check


def accepted_before(pairs: Iterable[tuple[SpanRecord | None, str | None]]) -> list[SpanRecord]:
    """What ``check_spans`` accepts of an export it has accepted whole before (intake's
    check, on the export's way to a derive worker), without checking the spans again: every
    span, with the same clamp of its dropped attributes count. A span that cannot be read
    (which that check would have refused) means the export is not the one checked: it is
    checked again."""
    pairs = list(pairs)
    if any(span is None for span, _ in pairs):
        return check_spans(pairs).accepted
    return [span if span.dropped_attributes_count <= MAX_INT  # type: ignore[union-attr]
            else dataclasses.replace(span, dropped_attributes_count=MAX_INT)
            for span, _ in pairs]


def _out_of_range(span: SpanRecord) -> str | None:
    """Why a span's numbers cannot be stored (BIGINT times, INTEGER codes and counts), or
    encoded again as OTLP protobuf (``--no-text``, forwarding), or None."""
    for what, value, top in (("start time", span.start_ns, MAX_NS), ("end time", span.end_ns, MAX_NS),
                             ("kind", span.kind, MAX_INT), ("status code", span.status_code, MAX_INT),
                             # a uint32 in protobuf; OTLP/JSON can send -1
                             ("dropped attributes count", span.dropped_attributes_count, MAX_INT)):
        if not 0 <= value <= top:
            return f"{what} {value} is out of range (0 to {top})"
    return None


# --- outcomes --------------------------------------------------------------------------------

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_OUTCOME_FIELDS = {
    "trace_id": str, "time": str, "correct": bool, "score": float, "decisive_chunk_ids": list,
    "required_constraints": list, "recalled_constraints": list, "reviewer": str, "note": str, "grader": str,
}


@dataclass
class OutcomeCheck:
    accepted: list[Outcome] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


def parse_outcomes(body: bytes) -> OutcomeCheck:
    """Read a ``{"outcomes": [...]}`` body; each bad item is refused with its index and reason."""
    try:
        obj = load_json(body)
    except PayloadError as e:
        raise BadInput(400, str(e)) from e
    if not isinstance(obj, dict) or not isinstance(obj.get("outcomes"), list):
        raise BadInput(400, 'body must be a JSON object {"outcomes": [...]}')
    extra = sorted(set(obj) - {"outcomes"})
    if extra:
        raise BadInput(400, f"unknown top-level field(s): {', '.join(extra)}")
    check = OutcomeCheck()
    for i, item in enumerate(obj["outcomes"]):
        try:
            check.accepted.append(outcome_from_json(item))
        except ValueError as e:
            check.errors.append({"index": i, "error": str(e)})
    return check


def outcome_from_json(item: Any) -> Outcome:
    if not isinstance(item, dict):
        raise ValueError("an outcome must be a JSON object")
    try:
        json.dumps(item, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
                         "escape)") from None
    unknown = sorted(set(item) - set(_OUTCOME_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(_OUTCOME_FIELDS)}")
    trace_id = item.get("trace_id")
    if not isinstance(trace_id, str) or not _TRACE_ID.match(trace_id) or set(trace_id) == {"0"}:
        raise ValueError(f"trace_id must be 32 hex characters, not all zero; got {trace_id!r}")
    for key, kind in _OUTCOME_FIELDS.items():
        value = item.get(key)
        if value is None:
            continue
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise ValueError(f"{key} must be {_kind_name(kind)}, got {type(value).__name__}")
        if kind is float and not math.isfinite(json_double(value, key)):
            raise ValueError(f"{key} must be a finite number, got {value}")  # JSON's NaN, Infinity
        if kind is list and not all(isinstance(v, str) for v in value):
            raise ValueError(f"{key} must be a list of strings")
    grader = item.get("grader")
    if grader is not None and grader not in GRADERS:
        raise ValueError(f"grader must be one of {', '.join(GRADERS)}, got {grader!r}")
    time = None
    if item.get("time") is not None:
        try:
            time = utc_time(item["time"])
        except ValueError as e:
            raise ValueError(f"time: {e}") from None

    def strings(key: str) -> tuple[str, ...] | None:
        value = item.get(key)
        return None if value is None else tuple(value)

    score = item.get("score")
    return Outcome(
        trace_id=trace_id.lower(), time=time, correct=item.get("correct"),
        score=None if score is None else float(score),
        decisive_chunk_ids=strings("decisive_chunk_ids"),
        required_constraints=strings("required_constraints"),
        recalled_constraints=strings("recalled_constraints"),
        reviewer=item.get("reviewer"), note=item.get("note"), grader=grader,
    )


def _kind_name(kind: type) -> str:
    return {str: "a string", bool: "true or false", float: "a number", list: "a list"}[kind]
