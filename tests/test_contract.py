"""The contract in schemas/: encode with the real SDK, decode with ours, compare."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.schemas import conventions as c
from midtrace.collector.intake import otlp
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.decode import InvalidAttributes, check_record, decode_record, decode_trace
from midtrace.schemas.encode import record_request, request_attributes
from midtrace.schemas.model import DROP_REASONS, Chunk, Outcome, Placement, RagRecord

ROOT = Path(__file__).resolve().parent.parent


def sdk_spans(record: RagRecord, service: str = "svc") -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("rag") as span:
        record_request(span, record)
    return list(exporter.get_finished_spans())


def round_trip(record: RagRecord) -> list[RagRecord]:
    export = otlp.encode_sdk_spans(sdk_spans(record))
    out = []
    for parsed in (otlp.parse_protobuf(export.SerializeToString()),
                   otlp.parse_json(otlp.request_to_json(export))):
        spans = [s for s, _ in otlp.spans_of(parsed)]
        for s in spans:  # intake's check without decoding passes what decodes
            assert check_record(s.attributes) is None
        decoded = decode_trace(spans)
        assert decoded is not None and decoded.service == "svc"
        out.append(decoded.record)
    return out


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
opt_text = st.none() | text.filter(bool)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
strings = st.none() | st.lists(text.filter(bool), max_size=3).map(tuple)


@st.composite
def records(draw: st.DrawFn) -> RagRecord:
    ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=6), unique=True, max_size=8))
    chunks = []
    placed: list[str] = []
    for cid in ids:
        stage = draw(st.sampled_from(["retrieved", "reranked", "in_prompt", "dropped"]))
        chunks.append(Chunk(
            id=cid, stage=stage,
            drop_reason=draw(st.none() | st.sampled_from(DROP_REASONS)) if stage == "dropped" else None,
            source_id=draw(opt_text), source_position=draw(st.none() | st.integers(0, 500)),
            retrieval_rank=draw(st.none() | st.integers(1, 50)), retrieval_score=draw(st.none() | finite),
            rerank_rank=draw(st.none() | st.integers(1, 50)), rerank_score=draw(st.none() | finite),
            label=draw(st.none() | st.sampled_from(["direct_answer", "irrelevant", "custom"])),
            authority=draw(opt_text), updated=draw(st.none() | st.dates(date(2000, 1, 1), date(2100, 1, 1))),
            decisive=draw(st.none() | st.booleans()), cited=draw(st.none() | st.booleans()),
            text=draw(opt_text),
        ))
        if stage == "in_prompt":
            placed += [cid] * draw(st.integers(1, 2))
    order = draw(st.permutations(placed))
    placements, cursor = [], 0
    for i, cid in enumerate(order):
        length = draw(st.integers(0, 40))
        placements.append(Placement(cid, i, cursor, cursor + length))
        cursor += length + draw(st.integers(0, 5))
    return RagRecord(
        question=draw(opt_text), answer=draw(opt_text), model=draw(opt_text),
        template_id=draw(opt_text), strategy=draw(opt_text), case_id=draw(opt_text),
        confidence=draw(st.none() | finite), cited_ids=draw(strings),
        answer_constraints=draw(strings), prompt_tokens=draw(st.none() | st.integers(0, 10**6)),
        latency_ms=draw(st.none() | finite),
        chunks=tuple(chunks), placements=tuple(placements),
        outcome=draw(st.none() | st.builds(
            Outcome, correct=st.none() | st.booleans(), score=st.none() | finite,
            decisive_chunk_ids=strings, reviewer=opt_text,
            time=st.none() | st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1),
                                          timezones=st.just(UTC)),
        ).filter(lambda o: any(v is not None for v in vars(o).values()))),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_round_trip_through_sdk_protobuf_and_json(record: RagRecord) -> None:
    if not request_attributes(record):  # nothing to record: the trace is not a RAG request
        spans = [s for s, _ in otlp.spans_of(otlp.encode_sdk_spans(sdk_spans(record)))]
        assert decode_trace(spans) is None
        return
    for decoded in round_trip(record):
        assert decoded == record


def test_chunk_placed_twice_keeps_two_placements_one_chunk() -> None:
    record = RagRecord(chunks=(Chunk("a", text="A"), Chunk("b")),
                       placements=(Placement("a", 0, 0, 10), Placement("b", 1, 10, 20),
                                   Placement("a", 2, 20, 30)))
    attrs = request_attributes(record)
    assert attrs[c.CHUNK_IDS] == ["a", "a", "b"]
    for decoded in round_trip(record):
        assert [p.chunk_id for p in decoded.placements] == ["a", "b", "a"]
        assert len(decoded.chunks) == 2


def test_content_hash_ignores_whitespace_and_normalisation_form() -> None:
    assert content_hash("Caf\u00e9  refunds\n within 14 days ") == content_hash("Cafe\u0301 refunds within 14 days")
    assert content_hash("a b") != content_hash("ab")
    assert content_hash("x").startswith("sha256:") and len(content_hash("x")) == 7 + 64


GOOD = {c.CHUNK_IDS: ["a", "b"], c.CHUNK_TOKEN_STARTS: [0, 10], c.CHUNK_TOKEN_ENDS: [10, 20]}

BAD_ATTRIBUTES = [
    ("string where a number belongs", {c.PROMPT_TOKENS: "1200"}, "midtrace.prompt.tokens must be int"),
    ("negative token offset", {**GOOD, c.CHUNK_TOKEN_STARTS: [-5, 10]}, "must not be negative"),
    ("end before start", {**GOOD, c.CHUNK_TOKEN_ENDS: [10, 5]}, "is before its start"),
    ("overlapping offsets", {**GOOD, c.CHUNK_TOKEN_STARTS: [0, 5]}, "offsets overlap"),
    ("unequal array lengths", {**GOOD, c.CHUNK_LABELS: ["direct_answer"]}, "has 1 entries but"),
    ("unknown stage", {c.CHUNK_IDS: ["a"], c.CHUNK_STAGES: ["lost"]}, "allowed: retrieved"),
    ("unknown drop reason", {c.CHUNK_IDS: ["a"], c.CHUNK_STAGES: ["dropped"],
                             c.CHUNK_DROP_REASONS: ["boredom"]}, "allowed: budget"),
    ("wrong element type", {c.CHUNK_IDS: ["a"], c.CHUNK_RETRIEVAL_SCORES: ["high"]}, "[0] must be double"),
    ("arrays without ids", {c.CHUNK_LABELS: ["direct_answer"]}, "without midtrace.chunk.ids"),
    ("bad date", {c.CHUNK_IDS: ["a"], c.CHUNK_UPDATED_DATES: ["last tuesday"]}, "YYYY-MM-DD"),
    ("repeated id not in prompt", {c.CHUNK_IDS: ["a", "a"], c.CHUNK_STAGES: ["retrieved", "retrieved"]},
     "appears twice"),
    ("bad outcome time", {c.OUTCOME_TIME: "yesterday"}, "RFC 3339"),
    # once an OverflowError, and the whole export a 500: in UTC these fall outside years 1-9999
    ("outcome time past year 9999", {c.OUTCOME_TIME: "9999-12-31T23:59:59-23:59"}, "out of range"),
    ("outcome time before year 1", {c.OUTCOME_TIME: "0001-01-01T00:00:00+14:00"}, "out of range"),
]


@pytest.mark.parametrize("name,attrs,message", BAD_ATTRIBUTES, ids=[b[0] for b in BAD_ATTRIBUTES])
def test_bad_attributes_are_refused_with_a_message_naming_them(name: str, attrs: dict[str, Any],
                                                               message: str) -> None:
    with pytest.raises(InvalidAttributes, match=None) as err:
        decode_record(attrs)
    assert message in str(err.value)


@pytest.mark.parametrize("name,attrs,message", BAD_ATTRIBUTES, ids=[b[0] for b in BAD_ATTRIBUTES])
def test_checking_without_decoding_refuses_the_same_attributes_with_the_same_message(
        name: str, attrs: dict[str, Any], message: str) -> None:
    """Intake checks spans that a derive worker decodes again (check_record): it must refuse
    exactly what decoding refuses, or a span would be acknowledged and then fail."""
    with pytest.raises(InvalidAttributes) as decoded:
        decode_record(attrs)
    with pytest.raises(InvalidAttributes) as checked:
        check_record(attrs)
    assert str(checked.value) == str(decoded.value)


def test_a_nan_double_reads_as_missing_alone_as_in_an_array() -> None:
    """A NaN latency or cost was once stored as NaN, and one such request made the sum of
    its week's cost NaN."""
    nan = float("nan")
    record = decode_record({c.LATENCY_MS: nan, c.COST_USD: 0.25, c.CONFIDENCE: nan,
                            c.OUTCOME_SCORE: nan, c.CHUNK_IDS: ["a"], c.CHUNK_RETRIEVAL_SCORES: [nan]})
    assert (record.latency_ms, record.cost_usd, record.confidence) == (None, 0.25, None)
    assert record.outcome is None and record.chunks[0].retrieval_score is None
    assert decode_record({c.LATENCY_MS: float("inf")}).latency_ms == float("inf")


def test_char_offsets_are_scaled_to_tokens_and_marked_estimated() -> None:
    record = RagRecord(prompt_tokens=100, prompt_chars=400, chunks=(Chunk("a"),),
                       placements=(Placement("a", 0, char_start=100, char_end=200),))
    spans = [s for s, _ in otlp.spans_of(otlp.encode_sdk_spans(sdk_spans(record)))]
    decoded = decode_trace(spans)
    assert decoded is not None and decoded.tokens_estimated
    # 100 tokens for 400 chars: 0.25 tokens a char, so chars [100, 200) are tokens [25, 50).
    assert (decoded.record.placements[0].token_start, decoded.record.placements[0].token_end) == (25, 50)


def test_encoder_imports_nothing_heavier_than_the_api() -> None:
    code = ("import sys, midtrace.schemas.encode, midtrace.schemas.model; "
            "heavy = [m for m in ('duckdb', 'pyarrow', 'pandas', 'streamlit', 'opentelemetry.sdk', "
            "'midtrace.collector', 'google.protobuf') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_conventions_doc_lists_every_attribute() -> None:
    doc = (ROOT / "docs" / "conventions.md").read_text()
    for attr in c.ALL_ATTRS:
        assert f"`{attr.name}`" in doc, f"{attr.name} is not documented in docs/conventions.md"
    assert c.render_markdown() in doc, "docs/conventions.md is stale: regenerate the table"


def test_outcome_attributes_on_two_spans_merge_field_by_field() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root") as root:
        root.set_attributes({c.OUTCOME_CORRECT: False, c.QUESTION: "q"})
        with tracer.start_as_current_span("grade") as grade:
            grade.set_attributes({c.OUTCOME_REVIEWER: "kim"})
    # The grade span ends first; the root's correct=False must survive the later merge.
    spans = [s for s, _ in otlp.spans_of(otlp.encode_sdk_spans(exporter.get_finished_spans()))]
    decoded = decode_trace(spans)
    assert decoded is not None and decoded.record.outcome == Outcome(correct=False, reviewer="kim")


def test_migration_numbers_are_unique() -> None:
    from midtrace.sql import sqlfiles

    versions = [m.version for m in sqlfiles.migrations()]
    assert len(versions) == len(set(versions)), f"two migrations share a number: {versions}"
