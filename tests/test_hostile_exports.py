"""Exports mutated at random, from the bundled sample traces: whatever an exporter sends, the
collector refuses it with a reason (BadInput: a 4xx, or a span refused in partial_success) or
accepts it, and what it accepts derives without an error. Before this test, mutations like
these found a 500 for ``{"resourceSpans": 5}``, a 500 for a logs export whose ``scopeLogs``
was ``true``, a span attribute array of mixed types that lost its whole acknowledged export,
a ``gen_ai.operation.name`` list that left its trace underived, an answer citing
``[\u00b2]`` that did the same, a ``doubleValue`` of 400 digits that lost its export, and,
under ``--no-text``, a JSON text holding a 30-digit integer that did the same.

Each example is a seed for the mutations below (a seed that fails reproduces the failure).
The intake's reading and checks and a derive worker's steps are called as the collector
calls them; tests/e2e/test_collector.py sends the cases found over HTTP."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from midtrace.collector.intake.accept import redacted_export
from midtrace.collector.intake.otlp import records_to_request, spans_of
from midtrace.collector.normalize import genai, openinference, vercel_ai
from midtrace.collector.receive.bodies import (
    JSON, PROTOBUF, REDACTED_PROTOBUF, BadInput, check_spans, parse_logs, parse_outcomes,
    parse_trace_export)
from midtrace.collector.storage.derive import prepare, spans_of_raw
from midtrace.collector.storage.raw_export import RawExport
from midtrace.collector.storage.redact import redact_span
from midtrace.schemas.conventions import PREFIX

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
EXPORTS: list[dict[str, Any]] = [
    json.loads(line) for path in sorted(SAMPLES.glob("*.jsonl"))
    for line in path.read_text().splitlines() if line.strip()]

# JSON values put in place of any value of an export
ODD: list[Any] = [
    None, True, 0, -1, 2**63, 2**64 + 5, -2**63 - 1, 10**400, 1e308, 1.5, "", "x", "NaN", [], {},
    [1, "a"], {"stringValue": 5}, {"intValue": "99999999999999999999999"},
    {"doubleValue": "inf"}, {"arrayValue": {"values": [{"intValue": "-5"}, {"stringValue": "a"}]}},
    {"kvlistValue": {"values": [{"key": 1}]}}, {"bytesValue": "!!!"}, {"arrayValue": None},
    {"arrayValue": {"values": "x"}}]
# OTLP AnyValues put in place of (or beside) an attribute's value
ANY: list[dict[str, Any]] = [
    {"stringValue": ""}, {"stringValue": "[1, 2]"}, {"stringValue": '{"a": [1]}'},
    {"stringValue": "null"}, {"stringValue": "x" * 3000}, {"intValue": "9223372036854775807"},
    {"intValue": "-9223372036854775808"}, {"intValue": "0"}, {"doubleValue": "NaN"},
    {"doubleValue": "-Infinity"}, {"doubleValue": 1e308}, {"doubleValue": 10**400},
    {"stringValue": '[{"id": "a", "score": ' + "9" * 400 + ', "content": "x"}]'}, {"boolValue": True},
    {"arrayValue": {"values": []}},
    {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "3"}, {}]}},
    {"arrayValue": {"values": [{"stringValue": "long " * 60}, {"doubleValue": 0.5}]}},
    {"kvlistValue": {"values": [{"key": "content", "value": {"intValue": "5"}}]}},
    {"bytesValue": "AAEC"}, {}]
# the attributes the zero-code normalizers read, list indices filled in
KNOWN = [key.replace("<i>", str(i)).replace("<j>", "0").replace("*", field)
         for key in (*genai.ATTRIBUTES_READ, *openinference.ATTRIBUTES_READ,
                     *vercel_ai.ATTRIBUTES_READ)
         for i in (0, 1) for field in ("content", "id", "score", "metadata")]


def copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """``value`` with one thing somewhere in it changed, removed (from an object) or added
    (to an array)."""
    if not isinstance(value, (dict, list)) or not value:
        return copy(rng.choice(ODD))
    is_object = isinstance(value, dict)
    slot = rng.choice(list(value)) if is_object else rng.randrange(len(value))
    roll = rng.random()
    if roll < (0.5 if is_object else 0.6) and depth < 12:
        value[slot] = mutate(rng, value[slot], depth + 1)
    elif roll < 0.8:
        value[slot] = copy(rng.choice(ODD))
    elif is_object:
        del value[slot]
    else:
        value.append(copy(rng.choice(ODD)))
    return value


def listed(obj: Any, key: str) -> list[Any]:
    """``obj[key]`` when ``obj`` is an object and that is a list, else an empty list."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def spans_in(export: Any) -> list[dict[str, Any]]:
    """The span objects of an OTLP/JSON export, however mutated."""
    return [span for rs in listed(export, "resourceSpans") for ss in listed(rs, "scopeSpans")
            for span in listed(ss, "spans") if isinstance(span, dict)]


def mutate_attribute(rng: random.Random, export: dict[str, Any]) -> None:
    """One span's attribute given an odd value, or an attribute a normalizer reads added."""
    spans = spans_in(export)
    if not spans:
        return
    span = rng.choice(spans)
    attributes = listed(span, "attributes")
    kv = rng.choice(attributes) if attributes else None
    if isinstance(kv, dict) and rng.random() < 0.6:
        kv["value"] = copy(rng.choice(ANY))
    else:
        span["attributes"] = [*attributes, {"key": rng.choice(KNOWN), "value": copy(rng.choice(ANY))}]


# Text put into a string attribute (a prompt, an answer, a document): digits int() cannot
# read in citation markers, list indices and labels, case changes that change length, lone
# surrogates, NUL, line separators, ligatures and combining marks that normalizing changes
SNIPPETS: list[str] = [
    "[\u00b2]", "[\u00b3] ", "[doc-\u00b2]", "<doc id=\u00b9>", "Document \u00b2", "\u3010\u00b2\u2020s\u3011",
    "[\u0663]", "\u0130", "\u00df", "\u1e9e", "\ufb01", "e\u0301", "\u0000", "\ud800", "\udfff",
    "\u2028", "\r\n", "[", "]", "[]", "[ , ; ]", "[1, and, 2]", "[" + "9" * 40 + "]", "\t\t", "\u200b",
    "Question: ", "Answer: ", "\ufeff"]


# the keys a normalizer reads, as one pattern: what odd text is put into most often
READ = re.compile("|".join(
    re.escape(key).replace(re.escape("<i>"), r"\d+").replace(re.escape("<j>"), r"\d+")
    .replace(re.escape("*"), r"[^.]+")
    for key in (*genai.ATTRIBUTES_READ, *openinference.ATTRIBUTES_READ, *vercel_ai.ATTRIBUTES_READ)))


def mutate_text(rng: random.Random, export: dict[str, Any]) -> None:
    """Odd text put into a few string attributes of the export (most often ones a normalizer
    reads: an answer, a prompt, a document), or in place of a list index in their keys."""
    kvs = [kv for span in spans_in(export) for kv in listed(span, "attributes")
           if isinstance(kv, dict) and isinstance(kv.get("value"), dict)
           and isinstance(kv["value"].get("stringValue"), str) and isinstance(kv.get("key"), str)]
    read = [kv for kv in kvs if READ.fullmatch(kv["key"])]
    for _ in range(rng.randint(1, 6) if kvs else 0):
        kv = rng.choice(read if read and rng.random() < 0.8 else kvs)
        snippet = "".join(rng.choice(SNIPPETS) for _ in range(rng.randint(1, 2)))
        parts = kv["key"].split(".")
        index = [i for i, part in enumerate(parts) if part.isdigit()]
        if index and rng.random() < 0.2:  # a list index: "retrieval.documents.\u00b2.document.id"
            parts[rng.choice(index)] = snippet
            kv["key"] = ".".join(parts)
            continue
        text = kv["value"]["stringValue"]
        at = rng.choice((0, len(text), rng.randint(0, len(text))))
        kv["value"]["stringValue"] = text[:at] + snippet + text[at:]


def intake(body: bytes, content_type: str) -> list[Any] | None:
    """The spans intake accepts (as Intake.export checks them), None when it refuses the body."""
    try:
        parsed = parse_trace_export(body, content_type)
    except BadInput:
        return None
    if content_type == PROTOBUF:
        check_spans(spans_of(parsed, PREFIX), keep_records=False)  # what intake answers
    return check_spans(parsed).accepted


def derives(body: bytes, content_type: str) -> None:
    """A derive worker's steps for an export intake accepted: no error, no trace left out."""
    prepared = prepare(spans_of_raw(RawExport(body, content_type)), keep_text=True)
    assert not prepared.normalize_errors, prepared.normalize_errors


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
@example(505675)  # a resource's intValue past 64 bits was accepted, then failed re-encoding
@example(70452096)  # a droppedAttributesCount of -1 was accepted, then failed re-encoding
def test_a_mutated_trace_export_is_refused_with_a_reason_or_derived(seed: int) -> None:
    rng = random.Random(seed)
    export = copy(rng.choice(EXPORTS))
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            mutate_attribute(rng, export)
        else:
            export = mutate(rng, export)
    body = json.dumps(export).encode()
    accepted = intake(body, JSON)
    if accepted:
        derives(body, JSON)
        # the same spans as protobuf, a few bytes of it overwritten
        proto = bytearray(records_to_request(accepted).SerializeToString())
        for _ in range(rng.randint(0, 3)):
            proto[rng.randrange(len(proto))] = rng.randrange(256)
        if intake(bytes(proto), PROTOBUF):
            derives(bytes(proto), PROTOBUF)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
def test_odd_text_in_what_the_normalizers_read_is_derived(seed: int) -> None:
    """Before this test, "[\u00b2]" in an answer and "\u00b2" as a document's list index
    (digits to str.isdigit(), not to int()) each left their trace underived."""
    rng = random.Random(seed)
    export = copy(rng.choice(EXPORTS))
    for _ in range(rng.randint(1, 3)):
        mutate_text(rng, export)
    body = json.dumps(export).encode()
    if intake(body, JSON):
        derives(body, JSON)


def derives_without_text(accepted: list[Any]) -> None:
    """What a --no-text collector does with the spans intake accepted: derives them as they
    are, and logs them redacted as protobuf, which recovery must be able to derive again."""
    in_hand = prepare(accepted, keep_text=False)
    assert not in_hand.normalize_errors, in_hand.normalize_errors
    logged = redacted_export(accepted)
    recovered = prepare(spans_of_raw(logged), keep_text=False)
    assert not recovered.normalize_errors, recovered.normalize_errors
    assert recovered.spans == in_hand.spans
    assert recovered.tables["requests"].num_rows == in_hand.tables["requests"].num_rows


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
@example(51)  # a JSON text's integer past 64 bits: the redacted export failed, a 500
@example(112969)  # bytes where a string is kept read back as a text, and the trace derived none
def test_a_mutated_trace_export_is_kept_and_derived_again_without_text(seed: int) -> None:
    rng = random.Random(seed)
    export = copy(rng.choice(EXPORTS))
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.4:
            mutate_attribute(rng, export)
        elif roll < 0.7:
            mutate_text(rng, export)
        else:
            export = mutate(rng, export)
    accepted = intake(json.dumps(export).encode(), JSON)
    if accepted:
        derives_without_text(accepted)


LOGS = {"resourceLogs": [{"resource": {"attributes": []}, "scopeLogs": [{
    "scope": {"name": "x"}, "logRecords": [{
        "eventName": "gen_ai.user.message", "timeUnixNano": "1",
        "traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1",
        "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "hi"}}]}},
        "attributes": [{"key": "gen_ai.system", "value": {"stringValue": "openai"}}]}]}]}]}
OUTCOMES = {"outcomes": [{"trace_id": "0" * 31 + "1", "correct": True, "score": 0.5,
                          "decisive_chunk_ids": ["a"], "note": "n", "grader": "person"}]}


EVENT_NAMES = ["gen_ai.user.message", "gen_ai.system.message", "gen_ai.assistant.message",
               "gen_ai.tool.message", "gen_ai.choice", "gen_ai.client.inference.operation.details"]
BODY_KEYS = ["content", "role", "tool_calls", "id", "message", "index", "finish_reason"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
@example(56)  # a body's doubleValue of 400 digits: a 500, not a 400 that says why
def test_a_mutated_genai_event_is_refused_with_a_reason_or_derived_with_its_trace(seed: int) -> None:
    """A GenAI event sent as a log record for a span of a sample trace: read or refused, and
    what is read derives with the trace, as received and as logged (with and without text)."""
    rng = random.Random(seed)
    export = copy(rng.choice(EXPORTS))
    trace = intake(json.dumps(export).encode(), JSON) or []
    body = copy(LOGS)
    record = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    record["eventName"] = rng.choice(EVENT_NAMES)
    if trace:
        record["traceId"], record["spanId"] = trace[-1].trace_id, trace[-1].span_id
    if rng.random() < 0.5:
        record["body"] = {"kvlistValue": {"values": [
            {"key": key, "value": copy(rng.choice(ANY))}
            for key in rng.sample(BODY_KEYS, rng.randint(1, 4))]}}
    for _ in range(rng.randint(0, 3)):
        body = mutate(rng, body)
    try:
        read = parse_logs(json.dumps(body).encode(), JSON)
    except BadInput:
        return
    events = check_spans([(s, None) for s in read.spans]).accepted
    if not events:
        return
    for keep_text in (True, False):
        kept = events if keep_text else [redact_span(s) for s in events]
        logged = RawExport(records_to_request(kept).SerializeToString(),
                           PROTOBUF if keep_text else REDACTED_PROTOBUF)
        read_back = spans_of_raw(logged)
        assert len(read_back) == len(events)
        for spans in ([*trace, *events], [*trace, *read_back]):
            prepared = prepare(spans, keep_text=keep_text)
            assert not prepared.normalize_errors, prepared.normalize_errors


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_a_mutated_logs_or_outcomes_body_is_read_or_refused_with_a_reason(seed: int) -> None:
    rng = random.Random(seed)
    for read, body in ((lambda b: parse_logs(b, JSON), LOGS), (parse_outcomes, OUTCOMES)):
        changed = copy(body)
        for _ in range(rng.randint(1, 3)):
            changed = mutate(rng, changed)
        try:
            read(json.dumps(changed).encode())
        except BadInput:
            pass
