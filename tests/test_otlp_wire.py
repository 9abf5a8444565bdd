"""An export's spans read from its protobuf bytes (collector/intake/_otlp_wire.c) are exactly
the spans read through the protobuf message (``spans_of`` on an ExportTraceServiceRequest),
value for value and type for type; and where the bytes hold what that reader leaves to the
message (a singular message sent twice, which protobuf merges; a oneof sent twice; a string
table index; a number outside its type), it says so and the message is read instead, with the
same result."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from midtrace.collector.intake import _otlp_wire
from midtrace.collector.intake.otlp import (
    PayloadError, ProtobufExport, _set_any, parse_json, parse_protobuf, spans_of)
from midtrace.schemas.conventions import PREFIX

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def typed(value: Any) -> Any:
    """The value with each leaf's type beside it (True == 1 and 0.0 == 0 in Python; NaN is
    not equal to itself)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    return (type(value).__name__, value)


def read(export: ExportTraceServiceRequest | ProtobufExport, prefix: str | None) -> Any:
    """What ``spans_of`` gives, every field typed, or the error it raises."""
    try:
        pairs = list(spans_of(export, prefix))
    except PayloadError as e:
        return ("PayloadError", str(e))
    return [typed(None if span is None else
                  [span.trace_id, span.span_id, span.parent_span_id, span.name, span.kind,
                   span.start_ns, span.end_ns, span.attributes, span.resource, span.scope,
                   span.status_code, span.dropped_attributes_count]) + typed(error)
            for span, error in pairs]


def same_both_ways(body: bytes) -> bool:
    """Both readers agree on ``body`` (with and without a prefix); whether the bytes were
    read by the wire reader (True) or left to the message (False)."""
    parsed = parse_protobuf(body)
    for prefix in (None, PREFIX, ""):
        assert read(parsed, prefix) == read(parsed.message, prefix)
    return _otlp_wire.spans(body, None) is not None


# --- every bundled sample, as protobuf --------------------------------------------------------

def sample_bodies() -> list[bytes]:
    bodies = []
    for path in sorted(SAMPLES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                bodies.append(parse_json(line).SerializeToString())
    return bodies


def test_every_sample_export_reads_the_same_from_its_bytes() -> None:
    bodies = sample_bodies()
    assert len(bodies) > 20
    read_from_bytes = [same_both_ways(body) for body in bodies]
    assert all(read_from_bytes)  # the SDKs' exports are all read without the message


# --- generated exports ------------------------------------------------------------------------

leaves = st.one_of(st.text(max_size=6), st.booleans(), st.integers(-2**63, 2**63 - 1),
                   st.floats(), st.binary(max_size=4), st.none())
values = st.recursive(
    leaves, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                    st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12)
keys = st.one_of(st.sampled_from([f"{PREFIX}chunk.ids", f"{PREFIX}answer", "gen_ai.prompt",
                                  "service.name", "midtrace", ""]), st.text(max_size=8))
attribute_lists = st.lists(st.tuples(keys, values), max_size=5)  # a key may come twice
ids = st.one_of(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8),
                st.sampled_from([b"", bytes(16), bytes(8), b"\x01" * 3]))


def set_attributes(target: Any, attributes: list[tuple[str, Any]]) -> None:
    for key, value in attributes:
        kv = target.add(key=key)
        if value is not None:
            _set_any(kv.value, value)


@st.composite
def exports(draw: st.DrawFn) -> bytes:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = request.resource_spans.add()
        if draw(st.booleans()):
            set_attributes(rs.resource.attributes, draw(attribute_lists))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            if draw(st.booleans()):
                ss.scope.name = draw(st.text(max_size=5))
                ss.scope.version = draw(st.text(max_size=3))
            for _ in range(draw(st.integers(0, 3))):
                span = ss.spans.add(
                    trace_id=draw(ids), span_id=draw(ids), name=draw(st.text(max_size=6)),
                    kind=draw(st.integers(-2**31, 2**31 - 1)),
                    start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                    dropped_attributes_count=draw(st.integers(0, 2**32 - 1)),
                    trace_state=draw(st.text(max_size=3)), flags=draw(st.integers(0, 2**32 - 1)))
                if draw(st.booleans()):
                    span.parent_span_id = draw(ids)
                set_attributes(span.attributes, draw(attribute_lists))
                if draw(st.booleans()):
                    span.status.code = draw(st.integers(-2**31, 2**31 - 1))
                    span.status.message = draw(st.text(max_size=3))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add(
                        name=draw(st.sampled_from(["gen_ai.user.message", "exception", ""])),
                        time_unix_nano=draw(st.sampled_from([0, 5, 2**64 - 1])))
                    set_attributes(event.attributes, draw(attribute_lists))
                if draw(st.booleans()):
                    link = span.links.add(trace_id=draw(ids), span_id=draw(ids))
                    set_attributes(link.attributes, draw(attribute_lists))
    return request.SerializeToString()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exports())
def test_a_generated_export_reads_the_same_from_its_bytes(body: bytes) -> None:
    assert same_both_ways(body)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exports(), st.randoms(use_true_random=False))
@example(sample_bodies()[0], random.Random(3))
def test_bytes_overwritten_at_random_read_the_same_or_are_left_to_the_message(
        body: bytes, rng: random.Random) -> None:
    """Whatever protobuf's parser accepts after a few bytes are overwritten (a field number or
    a wire type changed, a length shortened), both readers agree on."""
    if not body:
        return
    mutated = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        mutated[rng.randrange(len(mutated))] = rng.randrange(256)
    try:
        parse_protobuf(bytes(mutated))
    except PayloadError:
        return  # refused as a whole, as before: the wire reader never sees it
    same_both_ways(bytes(mutated))


# --- what the wire reader leaves to the message -----------------------------------------------

def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field, by hand."""
    tag, size = number << 3 | 2, len(payload)
    return varint(tag) + varint(size) + payload


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def wrap_spans(*spans: bytes) -> bytes:
    """Spans (serialized) in one scope of one resource of an export."""
    return field(1, field(2, b"".join(field(2, s) for s in spans)))


def a_span(**fields: Any) -> Span:
    span = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="llm")
    for key, value in fields.items():
        setattr(span, key, value)
    return span


def any_value(value: Any) -> bytes:
    into = AnyValue()
    _set_any(into, value)
    return into.SerializeToString()


@pytest.mark.parametrize("body", [
    # a span's fields sent in two parts: protobuf merges them (the status twice, the last name)
    pytest.param(wrap_spans(a_span().SerializeToString() + field(15, b"\x18\x01")
                            + a_span(name="second").SerializeToString() + field(15, b"\x12\x01m")),
                 id="span-status-merged"),
    # an attribute whose AnyValue holds two members: the last one wins
    pytest.param(wrap_spans(a_span().SerializeToString() + field(9, field(1, b"midtrace.answer")
                 + field(2, any_value("text") + any_value(7)))), id="anyvalue-two-members"),
    # a KeyValue's value sent twice: merged
    pytest.param(wrap_spans(a_span().SerializeToString() + field(9, field(1, b"midtrace.k")
                 + field(2, any_value([1])) + field(2, any_value([2])))), id="keyvalue-value-twice"),
    # a resource sent twice: merged
    pytest.param(field(1, field(1, field(1, KeyValue(key="a").SerializeToString()))
                       + field(1, field(1, KeyValue(key="b").SerializeToString()))
                       + field(2, field(2, a_span().SerializeToString()))), id="resource-twice"),
    # a kind past int32, as a 64-bit varint: protobuf keeps its low 32 bits
    pytest.param(wrap_spans(a_span().SerializeToString() + b"\x30" + varint(2**32 + 3)),
                 id="kind-past-int32"),
    # a dropped attributes count past uint32
    pytest.param(wrap_spans(a_span().SerializeToString() + b"\x50" + varint(2**33)),
                 id="dropped-count-past-uint32"),
], )
def test_what_protobuf_would_read_otherwise_is_left_to_the_message(body: bytes) -> None:
    parse_protobuf(body)  # protobuf accepts each
    assert _otlp_wire.spans(body, None) is None
    assert not same_both_ways(body)


def test_a_string_table_index_is_refused_with_the_message_readers_words() -> None:
    kv = field(1, b"midtrace.answer") + field(2, b"\x40\x05")  # string_value_strindex = 5
    body = wrap_spans(a_span().SerializeToString() + field(9, kv))
    assert _otlp_wire.spans(body, None) is None
    parsed = parse_protobuf(body)
    with pytest.raises(PayloadError, match="string_value_strindex"):
        list(spans_of(parsed))


def test_a_prefix_keeps_only_the_keys_starting_with_it_and_reads_no_other_value() -> None:
    span = a_span()
    set_attributes(span.attributes, [(f"{PREFIX}answer", "a"), ("gen_ai.prompt", "p"),
                                     ("midtrac", "x"), (PREFIX, 1)])
    body = wrap_spans(span.SerializeToString())
    (record, _), = spans_of(parse_protobuf(body), PREFIX)
    assert record.attributes == {f"{PREFIX}answer": "a", PREFIX: 1}
    assert same_both_ways(body)


def test_the_reader_takes_any_bytes_like_body_and_refuses_a_prefix_that_is_no_text() -> None:
    body = wrap_spans(a_span().SerializeToString())
    assert _otlp_wire.spans(memoryview(body), None) == _otlp_wire.spans(bytearray(body), None)
    with pytest.raises(TypeError):
        _otlp_wire.spans(body, b"midtrace.")
    assert json.dumps(_otlp_wire.spans(b"", None)) == "[]"
