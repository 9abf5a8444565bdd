"""How the intake log keeps an export: compressed when it came uncompressed, as it came
otherwise, and always read back as it came."""

from __future__ import annotations

import gzip

import pytest

from midtrace.collector.intake import otlp
from midtrace.collector.receive.bodies import REDACTED_PROTOBUF, BadInput
from midtrace.collector.storage.derive import spans_of_raw
from midtrace.collector.storage.raw_export import (
    COMPACT_MIN_BYTES, STORED_ZSTD, RawExport, as_received, compact)
from midtrace.schemas.conventions import MAX_INT
from tests.e2e.test_grpc_overload import batch_of_spans
from tests.test_otlp_wire import sample_bodies

PROTOBUF = "application/x-protobuf"


def body_of(n: int, tag: str) -> bytes:
    return otlp.encode_sdk_spans(batch_of_spans(n, tag)).SerializeToString()


def test_an_uncompressed_body_is_kept_compressed_and_read_back_as_it_came() -> None:
    export = RawExport(body_of(40, "zip"), PROTOBUF)
    kept = compact(export)
    assert kept.content_encoding == STORED_ZSTD
    assert len(kept.body) < len(export.body) / 3
    assert kept.size == export.size == len(export.body)  # what the backlog counts: as received
    assert as_received(kept) == export
    assert compact(kept) == kept  # kept once, not twice
    assert {s.span_id for s in spans_of_raw(kept)} == {s.span_id for s in spans_of_raw(export)}


def test_a_gzipped_small_or_redacted_body_is_kept_as_it_came() -> None:
    body = body_of(40, "gz")
    gzipped = RawExport(gzip.compress(body), PROTOBUF, "gzip")
    assert compact(gzipped) == gzipped and gzipped.size == len(gzipped.body)
    small = RawExport(b"\x0a" * (COMPACT_MIN_BYTES - 1), PROTOBUF)
    assert compact(small) == small
    redacted = RawExport(body, REDACTED_PROTOBUF)  # --no-text: no text in it, read as stored
    assert compact(redacted) == redacted


def test_a_damaged_compressed_body_is_refused_with_a_reason() -> None:
    kept = compact(RawExport(body_of(40, "hurt"), PROTOBUF))
    for damaged in (kept.body[:-20], kept.body[:8] + b"\x00" * 40):
        with pytest.raises(BadInput, match="compressed body cannot be read"):
            spans_of_raw(RawExport(damaged, PROTOBUF, STORED_ZSTD))


def test_a_compressed_body_claiming_a_huge_size_is_refused_before_it_is_read() -> None:
    kept = compact(RawExport(body_of(40, "huge"), PROTOBUF))
    lying = RawExport((1 << 62).to_bytes(8, "little") + kept.body[8:], PROTOBUF, STORED_ZSTD)
    with pytest.raises(BadInput, match="larger than the limit"):
        spans_of_raw(lying)


def _spans(export: RawExport) -> list[tuple[str, str, object, int]]:
    return [(s.trace_id, s.span_id, s.attributes, s.dropped_attributes_count)
            for s in spans_of_raw(export)]


def test_a_checked_export_gives_a_worker_the_spans_checking_again_would() -> None:
    """``checked`` (intake's checks refused none of its spans) lets a worker skip both the
    checks and protobuf's parse; on every sample the spans are the same, and compacting
    keeps the mark."""
    for body in sample_bodies():
        export = RawExport(body, PROTOBUF)
        checked = RawExport(body, PROTOBUF, checked=True)
        assert compact(checked).checked and as_received(compact(checked)).checked
        assert _spans(compact(checked)) == _spans(export) != []


def test_a_checked_export_with_an_unreadable_span_is_checked_again() -> None:
    """The mark trusts intake's check of these very bytes; a span that cannot be read means
    the bytes are not those, and the export is checked as if it had no mark."""
    request = otlp.encode_sdk_spans(batch_of_spans(3, "odd"))
    bad = request.resource_spans[0].scope_spans[0].spans[1]
    bad.trace_id = b"\x00" * 16  # refused: "trace id must be 16 bytes, not all zero"
    request.resource_spans[0].scope_spans[0].spans[2].dropped_attributes_count = 2**32 - 1
    body = request.SerializeToString()
    unchecked = _spans(RawExport(body, PROTOBUF))
    assert len(unchecked) == len(request.resource_spans[0].scope_spans[0].spans) - 1
    assert _spans(RawExport(body, PROTOBUF, checked=True)) == unchecked
    assert max(count for *_, count in unchecked) == MAX_INT  # clamped, as a check clamps it


def test_a_checked_export_clamps_a_dropped_count_as_the_check_does() -> None:
    request = otlp.encode_sdk_spans(batch_of_spans(2, "cut"))
    request.resource_spans[0].scope_spans[0].spans[0].dropped_attributes_count = 2**32 - 1
    body = request.SerializeToString()
    checked = _spans(RawExport(body, PROTOBUF, checked=True))
    assert checked == _spans(RawExport(body, PROTOBUF))
    assert checked[0][3] == MAX_INT
