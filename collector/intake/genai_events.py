"""OTLP log records that are GenAI events -> span records the normalizer joins to their span.

The official OpenTelemetry GenAI instrumentations (``opentelemetry-instrumentation-openai-v2``
and its kin) record message content by default as *log records*, one per message: event
names ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
``gen_ai.tool.message`` and ``gen_ai.choice`` (semantic conventions 1.30), or one
``gen_ai.client.inference.operation.details`` record holding ``gen_ai.input.messages`` and
``gen_ai.output.messages`` (the latest conventions, ``event_only`` mode). Each carries the
trace and span id of the LLM call it belongs to.

Each such record becomes a span record: a child of that LLM span, named by the event, its
attributes the record's own plus the body as JSON under ``gen_ai.event.body`` and its place
in the export under ``gen_ai.event.index``. So the records travel the same way as spans do
(the intake log, derivation, rebuild, prune, ``--no-text``), and a trace whose spans and log
records arrive in separate exports, in either order, converges like any split trace. The
GenAI normalizer reads them as the call's messages (collector/normalize/genai.py).

Every other log record (no GenAI event name, or no trace and span id) is accepted and
ignored: an app that sends all its logs to midtrace loses nothing and stores nothing extra.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from midtrace.collector.intake.event_spans import event_child, is_genai_event
from midtrace.collector.intake.otlp import PayloadError, _attrs, _list, any_value
from midtrace.schemas.span import SpanRecord

EVENT_NAME_ATTRIBUTE = "event.name"  # where records older than LogRecord.event_name put it


@dataclass(frozen=True)
class LogsRead:
    spans: list[SpanRecord]
    ignored: int  # log records that are no GenAI event of a span


def parse_logs_protobuf(body: bytes) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as e:
        raise PayloadError(f"not an OTLP/protobuf logs export: {e}") from e
    return request


def parse_logs_json(body: bytes) -> ExportLogsServiceRequest:
    """OTLP/JSON logs: ids in hex (the JSON encoding's rule), everything else as protobuf's
    JSON mapping reads it."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise PayloadError(f"not JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceLogs", []), list):
        raise PayloadError("an OTLP/JSON logs export is an object with a 'resourceLogs' list")
    if "resource_logs" in obj and "resourceLogs" not in obj:
        raise PayloadError("OTLP/JSON field names are lowerCamelCase: 'resourceLogs', not "
                           "'resource_logs'")
    for record in _records(obj):
        for key in ("traceId", "spanId"):
            value = record.get(key)
            if isinstance(value, str) and value:
                try:
                    record[key] = _b64(bytes.fromhex(value))
                except ValueError as e:
                    raise PayloadError(f"log record {key} {value!r} is not hex") from e
    try:
        return json_format.ParseDict(obj, ExportLogsServiceRequest(), ignore_unknown_fields=True)
    except OverflowError:  # a doubleValue of hundreds of digits: float() of it overflows
        raise PayloadError("not an OTLP/JSON logs export: a number is beyond a double's range"
                           ) from None
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as e:
        raise PayloadError(f"not an OTLP/JSON logs export: {e}") from e


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _records(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The log record objects of an OTLP/JSON logs export. A list that is something else (a
    number, a string) holds none here; protobuf's JSON parser then refuses it by name."""
    for rl in _list(obj, "resourceLogs"):
        for sl in _list(rl, "scopeLogs"):
            for record in _list(sl, "logRecords"):
                if isinstance(record, dict):
                    yield record


def event_spans(request: ExportLogsServiceRequest) -> LogsRead:
    """The GenAI events of ``request`` as span records (see the module doc)."""
    spans: list[SpanRecord] = []
    ignored = 0
    index = 0
    for rl in request.resource_logs:
        resource = _attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            scope = sl.scope.name or None
            for record in sl.log_records:
                index += 1
                attrs = _attrs(record.attributes)
                name = record.event_name or attrs.get(EVENT_NAME_ATTRIBUTE)
                if (not is_genai_event(name) or not isinstance(name, str)
                        or len(record.trace_id) != 16 or not any(record.trace_id)
                        or len(record.span_id) != 8 or not any(record.span_id)):
                    ignored += 1
                    continue
                time = int(record.time_unix_nano or record.observed_time_unix_nano)
                body = any_value(record.body) if record.HasField("body") else None
                spans.append(event_child(record.trace_id.hex(), record.span_id.hex(), name,
                                         time, attrs, body, index, resource, scope))
    return LogsRead(spans, ignored)
