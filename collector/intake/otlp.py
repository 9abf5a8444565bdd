"""OTLP trace payloads <-> flat span records. The only module that touches protobuf (with
_otlp_wire.c, which reads an export's spans from its bytes for ``spans_of``).

OTLP/JSON differs from protobuf's canonical JSON mapping in one way that matters here
(OTLP spec, "JSON Protobuf Encoding"): trace and span ids are hex strings, not base64.
Enums are integers and keys lowerCamelCase, which protobuf's JSON parser already accepts.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from midtrace.collector.intake.event_spans import event_child, is_genai_event
from midtrace.jsonl import json_lines
from midtrace.schemas.span import AttrValue, SpanRecord

try:  # built from _otlp_wire.c at install time; without a C compiler the build leaves it out
    from midtrace.collector.intake import _otlp_wire
except ImportError:  # pragma: no cover - every export is then read through its message
    _otlp_wire = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning(
        "midtrace was installed without its compiled OTLP reader (no C compiler?): protobuf "
        "exports are read through protobuf's message, at about three times the CPU")

# How protobuf exports are read, as /healthz says it: "compiled" (_otlp_wire) or "message".
PROTOBUF_READER = "message" if _otlp_wire is None else "compiled"


class PayloadError(ValueError):
    """The payload as a whole cannot be read (not protobuf, not OTLP JSON)."""


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
        values = v.array_value.values
        if not values:
            return []
        # Arrays are nearly always of one kind: read each element through the first one's
        # field. A field that reads empty (0, "", or another kind set) is decoded in full,
        # so any array still decodes exactly (bench/ingest.py: own conventions).
        # An element that holds nothing (None: a chunk without a prompt index, say) is read
        # without a call: ``ByteSize`` is 0 only for an empty AnyValue.
        first = values[0].WhichOneof("value")
        if first == "string_value":
            return [x.string_value or (None if not x.ByteSize() else any_value(x)) for x in values]
        if first == "int_value":
            return [x.int_value or (None if not x.ByteSize() else any_value(x)) for x in values]
        if first == "double_value":
            return [x.double_value or (None if not x.ByteSize() else any_value(x)) for x in values]
        return [any_value(x) for x in values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    raise PayloadError(f"unknown AnyValue field {which!r}")


def _attrs(kvs: Iterable[Any], prefix: str | None = None) -> dict[str, AttrValue]:
    if prefix is not None:
        return {kv.key: any_value(kv.value) for kv in kvs if kv.key.startswith(prefix)}
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass(frozen=True)
class ProtobufExport:
    """A protobuf trace export: its bytes and the message protobuf's parser read from them.

    The parse is what checks the bytes (a body it refuses is refused); ``spans_of`` then reads
    the spans from the bytes themselves where it can (``_otlp_wire``), at a fraction of the
    cost of reading them through the message."""

    body: bytes
    message: ExportTraceServiceRequest


def parse_protobuf(body: bytes) -> ProtobufExport:
    try:
        return ProtobufExport(body, ExportTraceServiceRequest.FromString(body))
    except DecodeError as e:
        raise PayloadError(f"body is not a protobuf ExportTraceServiceRequest: {e}") from e


def _span_objects(obj: Any) -> Iterator[dict[str, Any]]:
    """The span and link objects of an OTLP/JSON request: the only places ids live."""
    for rs in _list(obj, "resourceSpans", "resource_spans"):
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            for span in _list(ss, "spans"):
                if isinstance(span, dict):
                    yield span
                    yield from (link for link in _list(span, "links") if isinstance(link, dict))


def _list(obj: Any, *keys: str) -> list[Any]:
    if isinstance(obj, dict):
        for key in keys:
            value = obj.get(key)
            if isinstance(value, list):
                return value
    return []


_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _hex_ids_to_base64(obj: Any) -> None:
    """Rewrite OTLP/JSON hex ids in place into protobuf-JSON base64."""
    for span in _span_objects(obj):
        for key in _ID_KEYS:
            value = span.get(key)
            if isinstance(value, str) and value:
                try:
                    raw = bytes.fromhex(value)
                except ValueError as e:
                    raise PayloadError(f"{key} {value[:40]!r} is not hex") from e
                span[key] = base64.b64encode(raw).decode("ascii")


def parse_json_obj(obj: Any) -> ExportTraceServiceRequest:
    if not isinstance(obj, dict):
        raise PayloadError("OTLP/JSON body must be a JSON object with resourceSpans")
    _hex_ids_to_base64(obj)
    _refuse_snake_case(obj)
    try:
        return json_format.ParseDict(obj, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as e:
        raise PayloadError(f"body is not OTLP/JSON: {e}") from e


def parse_json(body: bytes | str) -> ExportTraceServiceRequest:
    return parse_json_obj(load_json(body))


def iter_json_docs(text: str) -> Iterator[tuple[int, Any]]:
    """The JSON documents of an OTLP JSON file: one per line (file exporter) or one per file.

    Yields ``(line_number, object)``, or ``(line_number, PayloadError)`` for a line that is
    not JSON, so one bad line does not cost the lines around it. Lines end at "\n", "\r"
    and "\r\n" only (midtrace/jsonl.py), and a byte order mark at a line's start is skipped.
    """
    stripped = text.strip()
    if not stripped:
        return
    try:
        yield 1, json.loads(stripped)
        return
    except json.JSONDecodeError:
        pass
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line.removeprefix("\ufeff"))  # files joined by cat
        except json.JSONDecodeError as e:
            yield number, PayloadError(f"line {number}: not JSON: {e}")


def iter_json_lines(text: str) -> Iterator[tuple[int, ExportTraceServiceRequest | PayloadError]]:
    """Like ``iter_json_docs``, each document parsed into an ExportTraceServiceRequest."""
    for number, doc in iter_json_docs(text):
        if isinstance(doc, PayloadError):
            yield number, doc
            continue
        try:
            yield number, parse_json_obj(doc)
        except PayloadError as e:
            yield number, PayloadError(f"line {number}: {e}")


# What ``_otlp_wire.spans`` and ``_read_message`` give: per resource its attributes and its
# scopes, per scope its name (None when empty) and its spans, each span a _WireSpan.
_WireEvent = tuple[str, int, dict[str, AttrValue]]  # name, time_unix_nano, attributes
_WireSpan = tuple[bytes, bytes, bytes | None, str, int, int, int, dict[str, AttrValue], int, int,
                  list[_WireEvent]]  # ids (trace, span, parent), name, kind, start, end,
#                                      attributes, status code, dropped count, events
_Wire = list[tuple[dict[str, AttrValue], list[tuple[str | None, list[_WireSpan]]]]]


def spans_of(request: ExportTraceServiceRequest | ProtobufExport, prefix: str | None = None,
             ) -> Iterator[tuple[SpanRecord | None, str | None]]:
    """Flatten a request into span records.

    Yields ``(record, None)`` for each readable span and ``(None, reason)`` for each span that
    cannot be read (a bad trace or span id): such a span is rejected, its neighbours kept.
    With ``prefix``, span and event attributes are read only where their key starts with it:
    records enough to check a span (its midtrace attributes), at a fraction of the cost.
    An export parsed from bytes (``parse_protobuf``) is read from those bytes by
    ``_otlp_wire`` unless it holds something that reader leaves to the message.
    """
    wire: _Wire | None = None
    if isinstance(request, ProtobufExport):
        if _otlp_wire is not None:
            wire = _otlp_wire.spans(request.body, prefix)
        request = request.message
    return _records(wire if wire is not None else _read_message(request, prefix))


def spans_of_parsed_before(body: bytes) -> Iterator[tuple[SpanRecord | None, str | None]]:
    """``spans_of(parse_protobuf(body))`` for a body ``parse_protobuf`` has accepted before
    (intake's, on its way to a derive worker): read from the bytes without parsing them
    again, unless the compiled reader leaves them to the message."""
    if _otlp_wire is not None and (wire := _otlp_wire.spans(body, None)) is not None:
        return _records(wire)
    return spans_of(parse_protobuf(body))


def _records(wire: Iterable[tuple[dict[str, AttrValue], list[tuple[str | None, list[_WireSpan]]]]],
             ) -> Iterator[tuple[SpanRecord | None, str | None]]:
    for resource, scopes in wire:
        for scope, spans in scopes:
            for trace_id, span_id, parent, name, kind, start, end, attributes, status, dropped, \
                    events in spans:
                if len(trace_id) != 16 or not any(trace_id):
                    yield None, f"span {name!r}: trace id must be 16 bytes, not all zero"
                    continue
                if len(span_id) != 8 or not any(span_id):
                    yield None, f"span {name!r}: span id must be 8 bytes, not all zero"
                    continue
                trace_hex, span_hex = trace_id.hex(), span_id.hex()
                yield SpanRecord(
                    trace_id=trace_hex,
                    span_id=span_hex,
                    parent_span_id=parent.hex() if parent else None,
                    name=name,
                    kind=kind,
                    start_ns=start,
                    end_ns=end,
                    attributes=attributes,
                    resource=resource,
                    scope=scope,
                    status_code=status,
                    dropped_attributes_count=dropped,
                ), None
                for i, (event_name, time_ns, event_attributes) in enumerate(events, start=1):
                    if is_genai_event(event_name):  # its content: a child the normalizer joins
                        yield event_child(trace_hex, span_hex, event_name, time_ns or end,
                                          event_attributes, None, i, resource, scope), None


def _read_message(request: ExportTraceServiceRequest, prefix: str | None) -> Iterator[
        tuple[dict[str, AttrValue], list[tuple[str | None, list[_WireSpan]]]]]:
    """What ``_otlp_wire.spans`` reads from the bytes, read through the message instead."""
    for rs in request.resource_spans:
        yield _attrs(rs.resource.attributes), [
            (ss.scope.name or None, [
                (span.trace_id, span.span_id, span.parent_span_id or None, span.name,
                 int(span.kind), int(span.start_time_unix_nano), int(span.end_time_unix_nano),
                 _attrs(span.attributes, prefix), int(span.status.code),
                 int(span.dropped_attributes_count),
                 [(event.name, int(event.time_unix_nano), _attrs(event.attributes, prefix))
                  for event in span.events])
                for span in ss.spans])
            for ss in rs.scope_spans]


# --- OTLP/JSON straight to span records ---------------------------------------------------
# protobuf's json_format is pure Python and costs ~10x the flattening itself, so the
# collector reads OTLP/JSON directly. Rules from the OTLP spec ("JSON Protobuf Encoding"):
# ids are hex, int64 values may be strings, enums are integers (names are accepted too),
# unknown fields are ignored.

_SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
               "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _json_int(value: Any, what: str, enum: dict[str, int] | None = None) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if enum is not None and value in enum:
            return enum[value]
        try:
            return int(value)
        except ValueError:
            pass
    raise ValueError(f"{what} must be an integer, got {value!r:.40}")


def json_double(value: int | float, what: str) -> float:
    """A JSON number as a double; ValueError naming ``what`` for an integer past a double's
    range (JSON allows any length, and float() of it raises OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{what} {str(value)[:20]}... is beyond a double's range") from None


def json_any_value(v: Any) -> AttrValue:
    if not isinstance(v, dict) or not v:
        return None
    if "stringValue" in v:
        return str(v["stringValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        n = _json_int(v["intValue"], "intValue")
        if not -(1 << 63) <= n < 1 << 63:  # AnyValue.int_value is an int64, as in protobuf
            raise ValueError(f"intValue {str(n)[:24]} is out of range (a 64-bit integer)")
        return n
    if "doubleValue" in v:
        d = v["doubleValue"]
        if isinstance(d, str):
            return float(d)  # "NaN", "Infinity", "-Infinity"
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            return json_double(d, "doubleValue")
        raise ValueError(f"doubleValue must be a number, got {d!r:.40}")
    if "arrayValue" in v:
        return [json_any_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return _json_attrs((v["kvlistValue"] or {}).get("values") or [])
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    return None


def _json_attrs(kvs: Any) -> dict[str, AttrValue]:
    if not isinstance(kvs, list):
        raise ValueError("attributes must be a list of {key, value}")
    out: dict[str, AttrValue] = {}
    for kv in kvs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise ValueError("each attribute must be an object with a string key")
        out[kv["key"]] = json_any_value(kv.get("value"))
    return out


def _json_id(value: Any, size: int, what: str) -> str:
    if not isinstance(value, str) or len(value) != 2 * size:
        raise ValueError(f"{what} must be {2 * size} hex characters, got {value!r:.40}")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ValueError(f"{what} {value!r:.40} is not hex") from None
    if not any(raw):
        raise ValueError(f"{what} must not be all zero")
    return value.lower()


def _refuse_snake_case(obj: dict[str, Any]) -> None:
    """OTLP/JSON keys are lowerCamelCase; a snake_case body would otherwise be read as an
    empty export and answered 200 with nothing stored."""
    if "resourceSpans" not in obj and "resource_spans" in obj:
        raise PayloadError("OTLP/JSON keys are lowerCamelCase: send 'resourceSpans', not "
                           "'resource_spans' (OTLP spec, JSON Protobuf Encoding)")
    for rs in _list(obj, "resourceSpans"):
        if isinstance(rs, dict) and "scopeSpans" not in rs and "scope_spans" in rs:
            raise PayloadError("OTLP/JSON keys are lowerCamelCase: send 'scopeSpans', not "
                               "'scope_spans' (OTLP spec, JSON Protobuf Encoding)")


# A \uD800-\uDFFF escape: JSON allows it, UTF-8 (and so the store) cannot hold it alone.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def may_hold_lone_surrogates(body: bytes) -> bool:
    return _SURROGATE_ESCAPE.search(body) is not None


def _lone_surrogate(record: SpanRecord) -> bool:
    try:
        json.dumps([record.name, record.scope, record.attributes, record.resource],
                   ensure_ascii=False, default=repr).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_spans(obj: Any, check_surrogates: bool = True) -> Iterator[tuple[SpanRecord | None, str | None]]:
    """Flatten an OTLP/JSON ExportTraceServiceRequest object like ``spans_of`` does.

    A span that cannot be stored (a bad id, a value out of range, a string holding a lone
    UTF-16 surrogate) is refused with its reason, its neighbours kept. ``check_surrogates``
    may be False when the body has no surrogate escape (see ``may_hold_lone_surrogates``).
    """
    if not isinstance(obj, dict):
        raise PayloadError("OTLP/JSON body must be a JSON object with resourceSpans")
    _refuse_snake_case(obj)
    resource_spans = obj.get("resourceSpans", [])
    if not isinstance(resource_spans, list):
        raise PayloadError("resourceSpans must be a list")
    for rs in resource_spans:
        if not isinstance(rs, dict):
            yield None, "resourceSpans entries must be objects"
            continue
        try:
            resource = _json_attrs(((rs or {}).get("resource") or {}).get("attributes") or [])
        except (ValueError, AttributeError) as e:
            raise PayloadError(f"resource: {e}") from e
        for ss in _list(rs, "scopeSpans"):
            if not isinstance(ss, dict):
                yield None, "scopeSpans entries must be objects"
                continue
            scope_obj = ss.get("scope") or {}
            scope = scope_obj.get("name") if isinstance(scope_obj, dict) else scope_obj
            if scope is not None and not isinstance(scope, str):
                for _ in _list(ss, "spans") or [None]:
                    yield None, f"scope must be an object whose name is a string, got {scope!r:.40}"
                continue
            for span in _list(ss, "spans"):
                name = span.get("name", "") if isinstance(span, dict) else ""
                try:
                    if not isinstance(span, dict):
                        raise ValueError("a span must be a JSON object")
                    parent = span.get("parentSpanId") or None
                    record = SpanRecord(
                        trace_id=_json_id(span.get("traceId"), 16, "trace id"),
                        span_id=_json_id(span.get("spanId"), 8, "span id"),
                        parent_span_id=_json_id(parent, 8, "parent span id") if parent else None,
                        name=str(name),
                        kind=_json_int(span.get("kind"), "kind", _SPAN_KINDS),
                        start_ns=_json_int(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                        end_ns=_json_int(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                        attributes=_json_attrs(span.get("attributes") or []),
                        resource=resource,
                        scope=scope or None,
                        status_code=_json_int((span.get("status") or {}).get("code"), "status code",
                                              _STATUS_CODES),
                        dropped_attributes_count=_json_int(span.get("droppedAttributesCount"),
                                                           "droppedAttributesCount"),
                    )
                except (ValueError, TypeError, AttributeError, RecursionError) as e:
                    yield None, f"span {str(name)[:60]!r}: {e}"
                    continue
                if check_surrogates and _lone_surrogate(record):
                    yield None, (f"span {str(name)[:60]!r} of trace {record.trace_id}: a string "
                                 "holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)")
                    continue
                yield record, None
                if span.get("events"):  # most spans have none: no generator for them
                    yield from _json_event_children(record, span["events"], check_surrogates)


def _json_event_children(span: SpanRecord, events: Any, check_surrogates: bool
                         ) -> Iterator[tuple[SpanRecord | None, str | None]]:
    """The GenAI events on an OTLP/JSON span as its children (collector/intake/event_spans.py)."""
    if not isinstance(events, list):
        return
    for i, event in enumerate(events, start=1):
        if not isinstance(event, dict) or not is_genai_event(event.get("name")):
            continue
        try:
            child = event_child(
                span.trace_id, span.span_id, str(event["name"]),
                _json_int(event.get("timeUnixNano"), "event timeUnixNano") or span.end_ns,
                _json_attrs(event.get("attributes") or []), None, i, span.resource, span.scope)
        except (ValueError, TypeError, AttributeError, RecursionError) as e:
            yield None, f"event {str(event.get('name'))[:60]!r} of span {span.span_id}: {e}"
            continue
        if check_surrogates and _lone_surrogate(child):
            yield None, f"event {child.name!r} of span {span.span_id}: a lone UTF-16 surrogate"
            continue
        yield child, None


def load_json(body: bytes | str) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise PayloadError("body is JSON nested too deeply to read") from None
    except ValueError as e:  # not JSON, not UTF-8, or an integer of thousands of digits
        raise PayloadError(f"body is not JSON midtrace can read: {e}") from e


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """One ExportTraceServiceRequest as an OTLP/JSON line (hex ids, integer enums)."""
    obj = json_format.MessageToDict(request, use_integers_for_enums=True)
    _base64_ids_to_hex(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _base64_ids_to_hex(obj: Any) -> None:
    for span in _span_objects(obj):
        for key in ("traceId", "spanId", "parentSpanId"):
            value = span.get(key)
            if isinstance(value, str) and value:
                span[key] = base64.b64decode(value).hex()


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
