"""The collector end to end: a real process, the real OTLP exporter, rows read from the file."""

from __future__ import annotations

import gzip
import json
import math
import signal
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.collector.intake import otlp
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Outcome, Placement, PromptSection, RagRecord
from tests.procs import Proc, site_packages_mapped, start_collector
from tests.sender import Sender

FULL = RagRecord(
    question="What is the refund window for annual plans?",
    answer="Annual plans can be refunded within 30 days [warranty-2].",
    model="gpt-4.1-mini", template_id="support", template_version="v2", strategy="score_order",
    experiment_id="exp-1", condition="rank_2", case_id="refund-window", confidence=0.9,
    answer_constraints=("annual plans",), cited_ids=("warranty-2",),
    unresolved_conflicts=("30 vs 14 days",), prompt_tokens=1200, output_tokens=85,
    prompt_chars=4800,
    evidence_tokens=900, latency_ms=812.5, cost_usd=0.0042, verifier_result="fail",
    chunks=(
        Chunk("warranty-2", source_id="warranty.md", source_position=2, retrieval_rank=1,
              retrieval_score=0.91, rerank_rank=1, rerank_score=0.88, label="conflicting",
              authority="canonical", updated=date(2025, 3, 1), decisive=False, cited=True,
              text="Hardware is covered by a 30-day warranty."),
        Chunk("refund-7", source_id="refunds.md", source_position=7, retrieval_rank=2,
              retrieval_score=0.87, rerank_rank=2, rerank_score=0.85, label="direct_answer",
              authority="canonical", updated=date(2026, 4, 12), decisive=True, cited=False,
              text="Annual plans are refundable within 14 days of purchase."),
        Chunk("old-note", source_id="migration.md", retrieval_rank=3, retrieval_score=0.5,
              stage="dropped", drop_reason="budget", label="irrelevant", authority="deprecated"),
    ),
    placements=(Placement("warranty-2", 0, 100, 400), Placement("refund-7", 1, 400, 700),
                Placement("warranty-2", 2, 700, 1000)),
    outcome=Outcome(correct=False, decisive_chunk_ids=("refund-7",), reviewer="app"),
    prompt_sections=(PromptSection("instructions", 0, 100), PromptSection("question", 1000, 1080),
                     PromptSection("format", 1080, 1200)),
)


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def test_every_field_of_a_request_survives(collector: Proc, db_path: Path) -> None:
    sender = Sender(collector.url, service="support-bot")
    trace_id = sender.send(FULL)
    sender.close()
    # the export was read by the C reader built at install (collector/intake/_otlp_wire.c)
    assert httpx.get(collector.url + "/healthz", timeout=5).json()["protobuf_reader"] == "compiled"
    collector.stop()
    (req,) = rows(db_path, "SELECT * EXCLUDE (request_id, time) FROM requests")
    assert req == (
        trace_id, "support-bot", "gpt-4.1-mini", "support", "v2", "score_order", "exp-1",
        "rank_2", "refund-window", FULL.question, FULL.answer, 0.9, ["annual plans"],
        ["warranty-2"], ["30 vs 14 days"], 1200, 4800, 900, False, 812.5, 0.0042, "fail",
        "midtrace", None, [{"kind": "instructions", "token_start": 0, "token_end": 100},
                           {"kind": "question", "token_start": 1000, "token_end": 1080},
                           {"kind": "format", "token_start": 1080, "token_end": 1200}],
        85, "rag")
    chunks = rows(db_path, "SELECT c.* EXCLUDE (request_id, text_hash), t.text FROM chunks c "
                           "LEFT JOIN chunk_texts t USING (text_hash) ORDER BY ordinal")
    assert chunks == [
        ("warranty-2", 0, "in_prompt", None, "warranty.md", 2, 1, 0.91, 1, 0.88, "conflicting",
         "canonical", date(2025, 3, 1), False, True, 41, "Hardware is covered by a 30-day warranty."),
        ("refund-7", 1, "in_prompt", None, "refunds.md", 7, 2, 0.87, 2, 0.85, "direct_answer",
         "canonical", date(2026, 4, 12), True, False, 55,
         "Annual plans are refundable within 14 days of purchase."),
        ("old-note", 2, "dropped", "budget", "migration.md", None, 3, 0.5, None, None,
         "irrelevant", "deprecated", None, None, None, None, None),
    ]
    assert rows(db_path, "SELECT chunk_id, prompt_index, token_start, token_end FROM placements "
                         "ORDER BY prompt_index") == [
        ("warranty-2", 0, 100, 400), ("refund-7", 1, 400, 700), ("warranty-2", 2, 700, 1000)]
    assert rows(db_path, "SELECT trace_id, correct, decisive_chunk_ids, reviewer FROM request_outcomes") == [
        (trace_id, False, ["refund-7"], "app")]


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_collector_on_a_duckdb_file_works_without_pandas(tmp_path: Path, workers: str) -> None:
    """pyarrow would import pandas as soon as the collector converted values to or from Arrow
    (about 33 MB of its memory) though it converts them without it: the collector keeps
    pandas out. Deriving in the collector process itself (``--derive-workers 0``) or in a
    worker, taking outcomes and answering every kind of query, it loads none."""
    proc = start_collector(tmp_path / "traces.duckdb", tmp_path / "collector.log",
                           "--derive-workers", workers)
    try:
        sender = Sender(proc.url, service="support-bot")
        trace_id = sender.send(FULL)
        sender.close()
        posted = httpx.post(proc.url + "/v1/outcomes", json={"outcomes": [
            {"trace_id": trace_id, "time": "2026-11-02T10:00:00Z", "correct": True}]})
        assert posted.status_code == 200, posted.text
        trace = proc.trace(trace_id)
        assert trace["request"]["question"] == FULL.question
        assert [c["text"] for c in trace["chunks"]][:2] == [c.text for c in FULL.chunks[:2]]
        api = proc.url + "/api/v1/"
        listed = httpx.get(api + "requests", params={"fresh": "1", "traffic": "all"},
                           timeout=30).json()
        assert [r["trace_id"] for r in listed["rows"]] == [trace_id]
        assert listed["rows"][0]["time"].startswith(str(datetime.now(UTC).year))
        for view in httpx.get(api + "views", timeout=30).json()["views"]:
            for fmt in ("json", "arrow"):
                answer = httpx.get(view["url"].replace("/api/v1/", api),
                                   params={"format": fmt, "group_by": "week", "traffic": "all"},
                                   timeout=30)
                assert answer.status_code == 200, (view["name"], fmt, answer.text)
        for path in ("facets", "settings", f"prompts/{trace_id}"):
            assert httpx.get(api + path, timeout=30).status_code == 200, path
        mapped = site_packages_mapped(proc.process.pid)
        assert {"duckdb", "pyarrow"} <= mapped, mapped  # the check sees what it loads
        assert "pandas" not in mapped, "the collector loaded pandas"
    finally:
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()


def finished_spans(record: RagRecord) -> list[Any]:
    """A root span and an LLM child carrying ``record``, finished but not yet exported."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "split"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("rag.request"):
        with tracer.start_as_current_span("llm.chat") as llm:
            record_request(llm, record)
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("order", ["child_first", "root_first"])
def test_split_trace_in_either_order_is_one_request(collector: Proc, db_path: Path,
                                                    order: str) -> None:
    child, root = finished_spans(RagRecord(question="split?", chunks=(Chunk("a"),),
                                           placements=(Placement("a", 0, 0, 10),)))
    exporter = OTLPSpanExporter(endpoint=collector.url + "/v1/traces")
    first, second = (child, root) if order == "child_first" else (root, child)
    assert exporter.export([first]) == SpanExportResult.SUCCESS
    assert exporter.export([second]) == SpanExportResult.SUCCESS
    collector.stop()
    trace_id = format(root.context.trace_id, "032x")
    root_start = datetime.fromtimestamp(root.start_time / 1e9, tz=UTC)
    assert rows(db_path, "SELECT trace_id, question, time FROM requests") == [
        (trace_id, "split?", root_start)]
    assert rows(db_path, "SELECT count(*) FROM spans") == [(2,)]


def test_retried_export_duplicates_nothing(collector: Proc, db_path: Path) -> None:
    spans = finished_spans(FULL)
    exporter = OTLPSpanExporter(endpoint=collector.url + "/v1/traces")
    for _ in range(3):
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    collector.stop()
    assert rows(db_path, "SELECT count(*) FROM requests") == [(1,)]
    assert rows(db_path, "SELECT count(*) FROM chunks") == [(3,)]
    assert rows(db_path, "SELECT count(*) FROM placements") == [(3,)]
    assert rows(db_path, "SELECT count(*) FROM outcomes") == [(1,)]


def test_outcome_before_its_trace_and_merge_rule(collector: Proc, db_path: Path) -> None:
    spans = finished_spans(FULL)  # carries correct=False, reviewer="app" as span attributes
    trace_id = format(spans[0].context.trace_id, "032x")
    posted = httpx.post(collector.url + "/v1/outcomes", json={"outcomes": [
        {"trace_id": trace_id, "time": "2026-11-02T10:00:00Z", "correct": True, "note": "first"},
        {"trace_id": trace_id, "time": "2026-11-01T10:00:00Z", "correct": False, "reviewer": "kim"},
    ]})
    assert posted.status_code == 200, posted.text
    assert posted.json() == {"accepted": 2, "rejected": 0, "errors": []}
    assert OTLPSpanExporter(endpoint=collector.url + "/v1/traces").export(spans) == SpanExportResult.SUCCESS
    collector.stop()
    # Posted outcomes beat span attributes; among posted ones the newer time wins each field.
    assert rows(db_path, "SELECT correct, reviewer, note, decisive_chunk_ids, n_outcomes "
                         "FROM request_outcomes") == [(True, "kim", "first", ["refund-7"], 3)]


def test_kill_9_after_acknowledgement_loses_nothing(collector: Proc, db_path: Path) -> None:
    sender = Sender(collector.url)
    trace_ids = [sender.send(RagRecord(question=f"q{i}", chunks=(Chunk("a"),),
                                       placements=(Placement("a", 0, 0, 5),))) for i in range(25)]
    collector.stop(signal.SIGKILL)
    sender.close()
    stored = {t for (t,) in rows(db_path, "SELECT trace_id FROM requests")}
    assert stored == set(trace_ids)


def otlp_json(record: RagRecord) -> dict[str, Any]:
    return json.loads(otlp.request_to_json(otlp.encode_sdk_spans(finished_spans(record))))


GOOD = RagRecord(question="good", chunks=(Chunk("a"),), placements=(Placement("a", 0, 0, 5),))


def with_bad_span(bad_attrs: list[dict[str, Any]]) -> bytes:
    """One export holding a good trace and a span whose attributes are broken."""
    body = otlp_json(GOOD)
    bad = otlp_json(GOOD)["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    bad["traceId"] = "ab" * 16
    bad["attributes"] = bad_attrs
    body["resourceSpans"][0]["scopeSpans"][0]["spans"].append(bad)
    return json.dumps(body).encode()


def with_bad_fields(**fields: Any) -> bytes:
    """One export holding a good trace and a span with these span fields."""
    body = otlp_json(GOOD)
    bad = otlp_json(GOOD)["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    bad["traceId"] = "ab" * 16
    bad.update(fields)
    body["resourceSpans"][0]["scopeSpans"][0]["spans"].append(bad)
    return json.dumps(body).encode()


def with_extra_scope(scope_spans: list[Any]) -> bytes:
    """One export holding a good trace and another resource with these scopeSpans."""
    body = otlp_json(GOOD)
    body["resourceSpans"].append({"resource": {}, "scopeSpans": scope_spans})
    return json.dumps(body).encode()


def kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def ints(*values: int) -> dict[str, Any]:
    return {"arrayValue": {"values": [{"intValue": str(v)} for v in values]}}


def strs(*values: str) -> dict[str, Any]:
    return {"arrayValue": {"values": [{"stringValue": v} for v in values]}}


IDS = kv("midtrace.chunk.ids", strs("a", "b"))
BAD_INPUT = [
    # name, body, content type, content encoding, status, message fragment, good spans kept
    ("neither protobuf nor json", b"\x00\xffgarbage", "application/x-protobuf", None, 400,
     "not a protobuf", False),
    ("json that is not json", b"{not json", "application/json", None, 400, "not JSON", False),
    ("wrong content type", b"{}", "text/plain", None, 415, "not supported", False),
    ("truncated gzip", gzip.compress(json.dumps(otlp_json(GOOD)).encode())[:-12],
     "application/json", "gzip", 400, "truncated", False),
    ("bad trace id", "zz" * 16, "application/json", None, 200, "is not hex", True),
    ("short trace id", "abcd", "application/json", None, 200, "trace id must be 32 hex", True),
    ("short protobuf trace id", "short-proto", "application/x-protobuf", None, 200,
     "trace id must be 16 bytes", True),
    ("string where a number belongs", with_bad_span([kv("midtrace.prompt.tokens", {"stringValue": "12k"})]),
     "application/json", None, 200, "midtrace.prompt.tokens must be int", True),
    # once a 500 for the whole export: in UTC this time falls past year 9999
    ("outcome time past year 9999", with_bad_span([
        kv("midtrace.outcome.correct", {"boolValue": True}),
        kv("midtrace.outcome.time", {"stringValue": "9999-12-31T23:59:59-23:59"})]),
     "application/json", None, 200, "midtrace.outcome.time: '9999-12-31T23:59:59-23:59' is out of range", True),
    ("negative token offsets", with_bad_span([IDS, kv("midtrace.chunk.token_starts", ints(-3, 5)),
                                              kv("midtrace.chunk.token_ends", ints(5, 9))]),
     "application/json", None, 200, "must not be negative", True),
    ("overlapping token offsets", with_bad_span([IDS, kv("midtrace.chunk.token_starts", ints(0, 5)),
                                                 kv("midtrace.chunk.token_ends", ints(10, 20))]),
     "application/json", None, 200, "offsets overlap", True),
    ("unequal array lengths", with_bad_span([IDS, kv("midtrace.chunk.labels", strs("direct_answer"))]),
     "application/json", None, 200, "must all have the same length", True),
    # Values that once lost the whole batch with a 500: refused per span, the rest kept.
    ("start time past 2^63", with_bad_fields(startTimeUnixNano=str(2**63 + 1)),
     "application/json", None, 200, "start time 9223372036854775809 is out of range", True),
    ("a negative dropped attributes count", with_bad_fields(droppedAttributesCount=-1),
     "application/json", None, 200, "dropped attributes count -1 is out of range", True),
    ("protobuf start time past 2^63", "big-time-proto", "application/x-protobuf", None, 200,
     "out of range", True),
    # derived by a worker from the export's bytes: what intake refused must stay refused there
    ("protobuf string where a number belongs", "contract-proto", "application/x-protobuf", None,
     200, "midtrace.prompt.tokens must be int", True),
    ("token offset of 2^40", with_bad_span([IDS, kv("midtrace.chunk.token_starts", ints(0, 2**40)),
                                            kv("midtrace.chunk.token_ends", ints(5, 2**40 + 5))]),
     "application/json", None, 200, "midtrace.chunk.token_starts[1] is out of range", True),
    ("rank of 2^40", with_bad_span([IDS, kv("midtrace.chunk.retrieval_ranks", ints(1, 2**40))]),
     "application/json", None, 200, "midtrace.chunk.retrieval_ranks[1] is out of range", True),
    ("prompt tokens of 2^40", with_bad_span([kv("midtrace.prompt.tokens", {"intValue": str(2**40)})]),
     "application/json", None, 200, "midtrace.prompt.tokens is out of range", True),
    ("a lone surrogate", with_bad_span([kv("midtrace.request.question", {"stringValue": "\ud800"})]),
     "application/json", None, 200, "lone UTF-16 surrogate", True),
    ("a scope name that is a list", with_extra_scope([{"scope": {"name": ["a"]}, "spans": [
        otlp_json(GOOD)["resourceSpans"][0]["scopeSpans"][0]["spans"][0] | {"traceId": "cd" * 16}]}]),
     "application/json", None, 200, "scope must be an object whose name is a string", True),
    ("scopeSpans of strings", with_extra_scope(["not a scope"]),
     "application/json", None, 200, "scopeSpans entries must be objects", True),
    ("a double of 400 digits", with_bad_span([kv("d", {"doubleValue": "D"})]).replace(
        b'"D"', b"7" * 400), "application/json", None, 200, "beyond a double's range", True),
    ("an integer of 5,000 digits", with_bad_span([kv("n", {"intValue": "N"})]).replace(
        b'"N"', b"7" * 5000), "application/json", None, 400, "not JSON midtrace can read", False),
    ("JSON nested 100,000 deep", b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "application/json", None, 400, "nested too deeply", False),
    ("snake_case keys", json.dumps({"resource_spans": otlp_json(GOOD)["resourceSpans"]}).encode(),
     "application/json", None, 400, "lowerCamelCase", False),
    ("resourceSpans that is a number", b'{"resourceSpans": 5}', "application/json", None, 400,
     "resourceSpans must be a list", False),
]


def body_with_trace_id(trace_id: str) -> bytes:
    """A good trace plus one span whose trace id is ``trace_id``."""
    body = otlp_json(GOOD)
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(dict(spans[0], traceId=trace_id, spanId="02" * 8))
    return json.dumps(body).encode()


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_refused_clearly_and_loses_nothing_else(collector: Proc, db_path: Path,
                                                             case: tuple[Any, ...]) -> None:
    name, body, content_type, encoding, status, fragment, kept = case
    if body == "short-proto":
        export = otlp.encode_sdk_spans(finished_spans(GOOD))
        bad = export.resource_spans[0].scope_spans[0].spans.add()
        bad.CopyFrom(export.resource_spans[0].scope_spans[0].spans[0])
        bad.trace_id = b"\x01\x02"
        body = export.SerializeToString()
    elif body == "big-time-proto":
        export = otlp.encode_sdk_spans(finished_spans(GOOD))
        bad = export.resource_spans[0].scope_spans[0].spans.add()
        bad.CopyFrom(export.resource_spans[0].scope_spans[0].spans[0])
        bad.trace_id = bytes.fromhex("ef" * 16)
        bad.start_time_unix_nano = 2**63 + 1
        body = export.SerializeToString()
    elif body == "contract-proto":
        export = otlp.encode_sdk_spans(finished_spans(GOOD))
        bad = export.resource_spans[0].scope_spans[0].spans.add()
        bad.CopyFrom(export.resource_spans[0].scope_spans[0].spans[0])
        bad.trace_id = bytes.fromhex("ef" * 16)
        tokens = bad.attributes.add()
        tokens.key, tokens.value.string_value = "midtrace.prompt.tokens", "12k"
        body = export.SerializeToString()
    elif isinstance(body, str):
        body = body_with_trace_id(body)
    headers = {"content-type": content_type}
    if encoding:
        headers["content-encoding"] = encoding
    answer = httpx.post(collector.url + "/v1/traces", content=body, headers=headers, timeout=10)
    assert answer.status_code == status, answer.text
    if status != 200 or content_type == "application/json":
        assert fragment in answer.text
    if status == 200 and content_type == "application/json":
        partial = answer.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "1" and fragment in partial["errorMessage"]
    elif status == 200:
        response = ExportTraceServiceResponse.FromString(answer.content)
        assert response.partial_success.rejected_spans == 1
        assert fragment in response.partial_success.error_message
    # The collector goes on accepting good data after any of these.
    sender = Sender(collector.url)
    after = sender.send(GOOD)
    sender.close()
    collector.stop()
    questions = rows(db_path, "SELECT trace_id FROM requests")
    assert (after,) in questions
    assert len(questions) == (2 if kept else 1)
    assert rows(db_path, "SELECT count(*) FROM spans WHERE trace_id = ?", ["ef" * 16]) == [(0,)]


def test_without_text_a_negative_dropped_count_is_refused_per_span(tmp_path: Path) -> None:
    """OTLP/JSON can send a droppedAttributesCount of -1, which protobuf (a uint32) cannot
    hold: under --no-text, where the export is kept re-encoded as protobuf, the whole batch
    was once answered 500 and lost."""
    db = tmp_path / "no-text.duckdb"
    proc = start_collector(db, tmp_path / "log", "--no-text")
    try:
        answer = httpx.post(proc.url + "/v1/traces", timeout=10,
                            content=with_bad_fields(droppedAttributesCount=-1),
                            headers={"content-type": "application/json"})
        assert answer.status_code == 200, answer.text
        partial = answer.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "1", partial
        assert "dropped attributes count -1 is out of range" in partial["errorMessage"]
    finally:
        proc.stop()
    assert rows(db, "SELECT count(*) FROM requests") == [(1,)]
    assert rows(db, "SELECT min(dropped_attributes_count) FROM spans") == [(0,)]


def test_without_text_a_long_json_integer_and_a_deep_value_are_kept(tmp_path: Path) -> None:
    """Under --no-text the export is logged redacted, as protobuf: a JSON text holding an
    integer past 64 bits once had the whole batch answered 500 and lost, and a value nested
    50 deep was logged past what a protobuf reader accepts (lost if the collector stopped
    before deriving it)."""
    deep: dict[str, Any] = {"stringValue": "words"}
    for _ in range(50):
        deep = {"kvlistValue": {"values": [kv("a", deep)]}}
    docs = json.dumps([{"id": 10**30, "score": 0.5, "content": "secret words"}])
    db = tmp_path / "no-text.duckdb"
    proc = start_collector(db, tmp_path / "log", "--no-text")
    try:
        answer = httpx.post(proc.url + "/v1/traces", timeout=10, headers={"content-type": "application/json"},
                            content=with_bad_span([kv("input.value", {"stringValue": docs}),
                                                   kv("app.deep", deep)]))
        assert answer.status_code == 200, answer.text
        assert answer.json().get("partialSuccess", {}).get("rejectedSpans") in (None, "0")
    finally:
        proc.stop()
    assert rows(db, "SELECT count(*) FROM requests") == [(1,)]
    (stored,) = rows(db, "SELECT attributes FROM spans WHERE trace_id = ?", ["ab" * 16])
    attributes = json.loads(stored[0])
    assert attributes["input.value"]["$redacted"]["json"][0]["id"] == str(10**30)
    assert "secret" not in stored[0]
    levels, value = 0, attributes["app.deep"]
    while isinstance(value, dict):
        levels, value = levels + 1, value["a"]
    assert value is None and levels == 20, (levels, value)  # redact.MAX_DEPTH


def test_an_array_of_mixed_types_is_stored_with_the_spans_around_it(collector: Proc,
                                                                     db_path: Path) -> None:
    """OTLP has an array's values of one type, but an exporter may send ["a", 3]: such a
    span (no midtrace attribute, so no contract refuses it) once failed its whole export's
    derivation, acknowledged and then never stored."""
    mixed = {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "3"},
                                       {"stringValue": "long " * 60}]}}
    answer = httpx.post(collector.url + "/v1/traces", timeout=10,
                        content=with_bad_span([kv("app.tags", mixed)]),
                        headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.json().get("partialSuccess", {}).get("rejectedSpans") in (None, "0")
    listed = httpx.get(collector.url + "/api/v1/requests", params={"fresh": 1}, timeout=15)
    assert listed.status_code == 200, listed.text  # everything acknowledged is derived
    health = httpx.get(collector.url + "/healthz", timeout=5).json()
    assert health["failed_jobs"] == 0, health
    collector.stop()
    assert rows(db_path, "SELECT count(*) FROM requests") == [(1,)]
    (stored,) = rows(db_path, "SELECT attributes FROM spans WHERE trace_id = ?", ["ab" * 16])
    tags = json.loads(stored[0])["app.tags"]
    assert tags[:2] == ["a", 3] and len(tags) == 3


def test_body_over_the_limit_is_413(tmp_path: Path) -> None:
    from tests.procs import start_collector

    proc = start_collector(tmp_path / "small.duckdb", tmp_path / "log", "--max-body-mb", "1")
    try:
        big = httpx.post(proc.url + "/v1/traces", content=b"x" * (1024 * 1024 + 1),
                         headers={"content-type": "application/x-protobuf"})
        assert big.status_code == 413 and "larger than the limit" in big.text
        bomb = gzip.compress(b"\x00" * (3 * 1024 * 1024))
        unzipped = httpx.post(proc.url + "/v1/traces", content=bomb, headers={
            "content-type": "application/x-protobuf", "content-encoding": "gzip"})
        assert unzipped.status_code == 413
    finally:
        proc.stop()


def test_large_and_strange_text_is_stored_exactly(collector: Proc, db_path: Path) -> None:
    huge = "policy " * (10 * 1024 * 1024 // 7)
    strange = "naïve café \u0000 NUL, emoji \U0001f600, RTL \u202e, <b>html</b>"
    record = RagRecord(question=strange, answer=strange,
                       chunks=(Chunk("huge", text=huge), Chunk("odd", text=strange)),
                       placements=(Placement("huge", 0, 0, 2_000_000), Placement("odd", 1, 2_000_000, 2_000_050)))
    sender = Sender(collector.url)
    sender.send(record)
    sender.close()
    collector.stop()
    assert rows(db_path, "SELECT question, answer FROM requests") == [(strange, strange)]
    texts = dict(rows(db_path, "SELECT c.chunk_id, t.text FROM chunks c JOIN chunk_texts t USING (text_hash)"))
    assert texts == {"huge": huge, "odd": strange}


@pytest.mark.parametrize("item,error", [
    ({"trace_id": "ab" * 16, "grade": "A"}, "unknown field(s) grade"),
    ({"trace_id": "not-hex"}, "trace_id must be 32 hex"),
    ({"trace_id": "ab" * 16, "correct": "yes"}, "correct must be true or false"),
    ({"trace_id": "ab" * 16, "time": "last week"}, "time: 'last week' is not an RFC 3339 time"),
    # once a 500: in UTC this time falls past year 9999
    ({"trace_id": "ab" * 16, "time": "9999-12-31T23:59:59-23:59"}, "is out of range: in UTC"),
    ({"trace_id": "ab" * 16, "score": 10**400}, "score 10000000000000000000... is beyond"),
    ({"trace_id": "ab" * 16, "score": math.nan}, "score must be a finite number, got nan"),
    ({"trace_id": "ab" * 16, "score": -math.inf}, "score must be a finite number, got -inf"),
])
def test_bad_outcomes_are_refused_by_index_and_the_rest_kept(collector: Proc, db_path: Path,
                                                             item: dict[str, Any], error: str) -> None:
    good = {"trace_id": "cd" * 16, "correct": True}
    answer = httpx.post(collector.url + "/v1/outcomes", content=json.dumps({"outcomes": [good, item]}),
                        headers={"content-type": "application/json"})  # json.dumps writes NaN
    assert answer.status_code == 200
    body = answer.json()
    assert body["accepted"] == 1 and body["rejected"] == 1
    assert body["errors"][0]["index"] == 1 and error in body["errors"][0]["error"]
    collector.stop()
    assert rows(db_path, "SELECT trace_id, correct FROM outcomes") == [("cd" * 16, True)]


def test_json_and_gzip_protobuf_bodies_are_both_accepted(collector: Proc, db_path: Path) -> None:
    as_json = json.dumps(otlp_json(RagRecord(question="json"))).encode()
    answer = httpx.post(collector.url + "/v1/traces", content=as_json,
                        headers={"content-type": "application/json"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    proto = otlp.encode_sdk_spans(finished_spans(RagRecord(question="proto"))).SerializeToString()
    answer = httpx.post(collector.url + "/v1/traces", content=gzip.compress(proto), headers={
        "content-type": "application/x-protobuf", "content-encoding": "gzip"})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-protobuf"
    collector.stop()
    assert sorted(rows(db_path, "SELECT question FROM requests")) == [("json",), ("proto",)]


def write_jsonl(path: Path, records: list[RagRecord]) -> None:
    path.write_text("".join(json.dumps(otlp_json(r)) + "\n" for r in records))


def test_ingest_loads_files_and_refuses_while_a_collector_holds_the_db(tmp_path: Path) -> None:
    db = tmp_path / "ingest.duckdb"
    traces = tmp_path / "traces.jsonl"
    write_jsonl(traces, [RagRecord(question=f"q{i}") for i in range(3)])
    outcomes = tmp_path / "outcomes.json"
    outcomes.write_text(json.dumps({"outcomes": [{"trace_id": "ef" * 16, "correct": False}]}))
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db), str(traces),
                          str(outcomes)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "and 1 outcomes from 2 file(s)" in run.stdout
    assert rows(db, "SELECT count(*) FROM requests") == [(3,)]
    assert rows(db, "SELECT count(*) FROM outcomes") == [(1,)]

    from tests.procs import start_collector

    proc = start_collector(db, tmp_path / "log")
    try:
        held = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db),
                               str(traces)], capture_output=True, text=True)
    finally:
        proc.stop()
    assert held.returncode == 3
    assert "held by another process" in held.stderr and "collector" in held.stderr


def test_ingest_reports_bad_lines_and_keeps_the_good_ones(tmp_path: Path) -> None:
    db = tmp_path / "ingest.duckdb"
    traces = tmp_path / "mixed.jsonl"
    write_jsonl(traces, [RagRecord(question="first"), RagRecord(question="second")])
    lines = traces.read_text().splitlines()
    traces.write_text("\n".join([lines[0], "{broken", lines[1]]) + "\n")
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db), str(traces)],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "line 2" in run.stderr
    assert sorted(rows(db, "SELECT question FROM requests")) == [("first",), ("second",)]


def test_an_exported_text_holding_unicode_line_separators_is_ingested_again(tmp_path: Path) -> None:
    """JSON allows U+2028, U+2029 and U+0085 unescaped inside a string, and `midtrace export`
    writes them so; ``str.splitlines`` ends a line at each, and `ingest` lost the trace."""
    odd = "Refunds:\u2028within 14 days,\u2029by card\u0085or by transfer."
    db, again = tmp_path / "first.duckdb", tmp_path / "again.duckdb"
    traces = tmp_path / "traces.jsonl"
    write_jsonl(traces, [RagRecord(question="plain", answer="a"),
                         RagRecord(question="odd", answer=odd), RagRecord(question="last")])
    midtrace = [sys.executable, "-m", "midtrace"]
    subprocess.run([*midtrace, "ingest", "--db", str(db), str(traces)], check=True)
    trace_ids = [t for (t,) in rows(db, "SELECT trace_id FROM requests ORDER BY question")]
    exported = subprocess.run([*midtrace, "export", "--db", str(db),
                               *(a for t in trace_ids for a in ("--trace-id", t))],
                              capture_output=True, text=True, check=True).stdout
    assert "\u2028" in exported, "the export writes the separators as they are"
    copy = tmp_path / "exported.jsonl"
    copy.write_text(exported, encoding="utf-8")
    run = subprocess.run([*midtrace, "ingest", "--db", str(again), str(copy)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert rows(again, "SELECT question, answer FROM requests ORDER BY question") == [
        ("last", None), ("odd", odd), ("plain", "a")]


def test_ingest_refuses_what_is_not_utf8_or_not_gzip_and_keeps_the_rest(tmp_path: Path) -> None:
    """A line that is not UTF-8 and a damaged gzip file each ended ingest with a traceback
    (or a bare "Aborted!"), and a byte order mark cost its file's first line."""
    db = tmp_path / "ingest.duckdb"
    good = tmp_path / "good.jsonl"
    write_jsonl(good, [RagRecord(question="kept 1"), RagRecord(question="kept 2")])
    first, second = good.read_bytes().splitlines()
    mixed = tmp_path / "mixed.jsonl"  # a byte order mark, a line of Latin-1, a good line
    mixed.write_bytes(b"\xef\xbb\xbf" + first + b"\n" + "caf\xe9".encode("latin-1") + b"\n" + second + b"\n")
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(gzip.compress(good.read_bytes())[:-12])
    also = tmp_path / "also.jsonl"
    write_jsonl(also, [RagRecord(question="kept 3")])
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db),
                          str(mixed), str(damaged), str(also)], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "Aborted" not in run.stderr, run.stderr
    assert f"{mixed}: line 2: not UTF-8 text (byte 0xe9 at column 4)" in run.stderr
    assert f"{damaged}: not a readable gzip file" in run.stderr
    assert sorted(rows(db, "SELECT question FROM requests")) == [
        ("kept 1",), ("kept 2",), ("kept 3",)]
