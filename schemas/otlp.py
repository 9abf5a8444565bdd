"""OTLP trace payloads <-> flat span records. The only module that touches protobuf.

OTLP/JSON differs from protobuf's canonical JSON mapping in one way that matters here
(OTLP spec, "JSON Protobuf Encoding"): trace and span ids are hex strings, not base64.
Enums are integers and keys lowerCamelCase, which protobuf's JSON parser already accepts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

AttrValue = Any  # str | bool | int | float | bytes | list | dict | None


class PayloadError(ValueError):
    """The payload as a whole cannot be read (not protobuf, not OTLP JSON)."""


@dataclass(frozen=True)
class SpanRecord:
    """One span, flattened: ids as lower-case hex, attributes as Python values."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    parent_span_id: str | None = None
    kind: int = 0
    resource: dict[str, AttrValue] = field(default_factory=dict)
    scope: str | None = None
    status_code: int = 0
    dropped_attributes_count: int = 0
    # midtrace's attributes as decoded (and so checked) at receipt, kept so the normalizer
    # does not decode them a second time; set with ``remember_record``.
    record: Any = field(default=None, compare=False, repr=False)

    def remember_record(self, record: Any) -> None:
        object.__setattr__(self, "record", record)

    @property
    def service(self) -> str | None:
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else None


def any_value(v: AnyValue) -> AttrValue:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "string_value":
        return v.string_value
    if which == "bool_value":
        return v.bool_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return v.double_value
    if which == "bytes_value":
        return v.bytes_value
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    raise PayloadError(f"unknown AnyValue field {which!r}")


def _attrs(kvs: Iterable[Any]) -> dict[str, AttrValue]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    try:
        return ExportTraceServiceRequest.FromString(body)
    except DecodeError as e:
        raise PayloadError(f"body is not a protobuf ExportTraceServiceRequest: {e}") from e


def _hex_ids_to_base64(obj: Any) -> None:
    """Rewrite OTLP/JSON hex ids in place into protobuf-JSON base64."""
    if isinstance(obj, dict):
        for key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"):
            value = obj.get(key)
            if isinstance(value, str) and value:
                try:
                    raw = bytes.fromhex(value)
                except ValueError as e:
                    raise PayloadError(f"{key} {value[:40]!r} is not hex") from e
                obj[key] = base64.b64encode(raw).decode("ascii")
        for value in obj.values():
            if isinstance(value, (dict, list)):
                _hex_ids_to_base64(value)
    elif isinstance(obj, list):
        for value in obj:
            _hex_ids_to_base64(value)


def parse_json_obj(obj: Any) -> ExportTraceServiceRequest:
    if not isinstance(obj, dict):
        raise PayloadError("OTLP/JSON body must be a JSON object with resourceSpans")
    _hex_ids_to_base64(obj)
    try:
        return json_format.ParseDict(obj, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise PayloadError(f"body is not OTLP/JSON: {e}") from e


def parse_json(body: bytes | str) -> ExportTraceServiceRequest:
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PayloadError(f"body is not JSON: {e}") from e
    return parse_json_obj(obj)


def iter_json_lines(text: str) -> Iterator[tuple[int, ExportTraceServiceRequest | PayloadError]]:
    """Requests in an OTLP JSON file: one per line (file exporter) or one per file.

    Yields ``(line_number, request)``, or ``(line_number, PayloadError)`` for a line that
    cannot be read, so one bad line does not cost the lines around it.
    """
    stripped = text.strip()
    if not stripped:
        return
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        whole = None
    if whole is not None:
        try:
            yield 1, parse_json_obj(whole)
        except PayloadError as e:
            yield 1, e
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, parse_json(line)
        except PayloadError as e:
            yield number, PayloadError(f"line {number}: {e}")


def spans_of(request: ExportTraceServiceRequest) -> Iterator[tuple[SpanRecord | None, str | None]]:
    """Flatten a request into span records.

    Yields ``(record, None)`` for each readable span and ``(None, reason)`` for each span that
    cannot be read (a bad trace or span id): such a span is rejected, its neighbours kept.
    """
    for rs in request.resource_spans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name or None
            for span in ss.spans:
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    yield None, f"span {span.name!r}: trace id must be 16 bytes, not all zero"
                    continue
                if len(span.span_id) != 8 or not any(span.span_id):
                    yield None, f"span {span.name!r}: span id must be 8 bytes, not all zero"
                    continue
                parent = span.parent_span_id.hex() if span.parent_span_id else None
                yield SpanRecord(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=parent,
                    name=span.name,
                    kind=int(span.kind),
                    start_ns=int(span.start_time_unix_nano),
                    end_ns=int(span.end_time_unix_nano),
                    attributes=_attrs(span.attributes),
                    resource=resource,
                    scope=scope,
                    status_code=int(span.status.code),
                    dropped_attributes_count=int(span.dropped_attributes_count),
                ), None


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """One ExportTraceServiceRequest as an OTLP/JSON line (hex ids, integer enums)."""
    obj = json_format.MessageToDict(request, use_integers_for_enums=True)
    _base64_ids_to_hex(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _base64_ids_to_hex(obj: Any) -> None:
    if isinstance(obj, dict):
        for key in ("traceId", "spanId", "parentSpanId"):
            value = obj.get(key)
            if isinstance(value, str) and value:
                obj[key] = base64.b64decode(value).hex()
        for value in obj.values():
            if isinstance(value, (dict, list)):
                _base64_ids_to_hex(value)
    elif isinstance(obj, list):
        for value in obj:
            _base64_ids_to_hex(value)


def encode_sdk_spans(spans: Sequence[Any]) -> ExportTraceServiceRequest:
    """Encode finished SDK spans with the SDK's own OTLP encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans)


def _set_any(target: AnyValue, value: AttrValue) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, list):
        array = target.array_value
        array.SetInParent()
        for item in value:
            _set_any(array.values.add(), item)
    elif isinstance(value, dict):
        if set(value) == {"bytes_base64"}:  # how the store keeps a bytes value in JSON
            target.bytes_value = base64.b64decode(value["bytes_base64"])
            return
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        for k, v in value.items():
            kv = kvlist.values.add(key=k)
            _set_any(kv.value, v)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as an OTLP AnyValue")


def records_to_request(spans: Sequence[SpanRecord]) -> ExportTraceServiceRequest:
    """Span records back into one ExportTraceServiceRequest, grouped by resource and scope."""
    request = ExportTraceServiceRequest()
    groups: dict[str, tuple[dict[str, AttrValue], dict[str | None, list[SpanRecord]]]] = {}
    for s in spans:
        key = json.dumps(s.resource, sort_keys=True, default=repr)
        groups.setdefault(key, (s.resource, {}))[1].setdefault(s.scope, []).append(s)
    for resource, scopes in groups.values():
        rs = request.resource_spans.add()
        for k, v in resource.items():
            _set_any(rs.resource.attributes.add(key=k).value, v)
        for scope, members in scopes.items():
            ss = rs.scope_spans.add()
            if scope:
                ss.scope.name = scope
            for s in members:
                span = ss.spans.add(
                    trace_id=bytes.fromhex(s.trace_id), span_id=bytes.fromhex(s.span_id),
                    name=s.name, kind=s.kind, start_time_unix_nano=s.start_ns,  # type: ignore[arg-type]
                    end_time_unix_nano=s.end_ns,
                    dropped_attributes_count=s.dropped_attributes_count)
                if s.parent_span_id:
                    span.parent_span_id = bytes.fromhex(s.parent_span_id)
                span.status.code = s.status_code  # type: ignore[assignment]
                for k, v in s.attributes.items():
                    _set_any(span.attributes.add(key=k).value, v)
    return request
