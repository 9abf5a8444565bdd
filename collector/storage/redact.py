"""What ``--no-text`` keeps of a received span's attributes (docs/collector.md, "Privacy").

The rule is an allow-list, so an attribute no convention has named yet is covered too:

- numbers, booleans and nulls are kept;
- a string is kept only under an attribute listed here as holding an identifier or a label
  (``KEPT``, ``KEPT_INDEXED``); every other string, and every bytes value, is replaced by
  ``{"$redacted": {"hash": "sha256:...", "chars": N}}``: the documented content hash of
  the text (schemas/chunk_hash.py) and its length (a bytes value's sha256 and its number
  of bytes, marked ``"bytes": true``);
- a string that is a JSON object or array (OpenInference's document metadata, GenAI's
  ``gen_ai.retrieval.documents`` and messages), and a structured value, is kept as its
  structure under the same rule one level down: field names and numbers as sent, strings
  only under the fields in ``KEPT_FIELDS``; the marker carries it as ``"json"``, so a
  document's id, score and source survive without its text.

What is kept must read back from the intake log, which holds it as OTLP protobuf: an integer
of a JSON text past 64 bits (an AnyValue's ``int_value`` is an int64) is kept as its decimal
digits, which the normalizers read as the same id or number; and an array or object nested
deeper than ``MAX_DEPTH`` (counting the marker's own two levels) is kept as null, because a
protobuf reader refuses a message nested past 100 levels and each level of a value costs
two or three.

Span names, kinds, times, status codes, the scope name and the resource (the service, not
the request) are kept as sent; links and other events are not stored at all. GenAI events,
on a span or as log records, become span records of their own (collector/intake/
event_spans.py) and follow this same rule: their body, a JSON string, keeps its structure
and loses its text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

from midtrace.collector.normalize.attr_values import SOURCE_KEYS
from midtrace.schemas import conventions as c
from midtrace.schemas.chunk_hash import RedactedText, content_hash
from midtrace.schemas.span import SpanRecord

REDACTED = "$redacted"
MAX_DEPTH = 20  # arrays and objects within an attribute's value; deeper ones are kept as null
MARKER_DEPTH = 2  # what a marker's "json" adds: {"$redacted": {..., "json": ...}}
INT64 = range(-(1 << 63), 1 << 63)

# midtrace's own string attributes that are ids, labels, dates or times; the free-text ones
# (question, answer, chunk texts, constraints, conflicts, verifier result, note) are not here.
OWN_KEPT = frozenset(a.name for a in c.ALL_ATTRS if a.type.startswith("string") and not a.text)

# OpenInference (github.com/Arize-ai/openinference, spec/semantic_conventions.md).
OPENINFERENCE_KEPT = frozenset({
    "openinference.span.kind", "input.mime_type", "output.mime_type", "llm.model_name",
    "llm.provider", "llm.system", "llm.request.model_name", "llm.response.model_name",
    "llm.prompt_template.version", "prompt.id", "prompt.vendor", "embedding.model_name",
    "reranker.model_name", "session.id", "user.id", "tool.name",
})
# OTel GenAI (open-telemetry/semantic-conventions, docs/gen-ai/).
GENAI_KEPT = frozenset({
    "gen_ai.operation.name", "gen_ai.system", "gen_ai.provider.name", "gen_ai.request.model",
    "gen_ai.response.model", "gen_ai.response.id", "gen_ai.response.finish_reasons",
    "gen_ai.output.type", "gen_ai.request.encoding_formats", "gen_ai.conversation.id",
    "gen_ai.agent.id", "gen_ai.agent.name", "gen_ai.data_source.id", "gen_ai.tool.name",
    "gen_ai.tool.call.id", "gen_ai.tool.type", "gen_ai.token.type",
})
# The Vercel AI SDK's telemetry (collector/normalize/vercel_ai.py): operations, models, tools.
VERCEL_AI_KEPT = frozenset({
    "ai.operationId", "ai.telemetry.functionId", "ai.model.id", "ai.model.provider",
    "ai.response.model", "ai.response.id", "ai.response.finishReason", "ai.toolCall.name",
    "ai.toolCall.id",
})
# General OTel attributes that name an operation or an error class, never its content.
GENERAL_KEPT = frozenset({"error.type", "exception.type", "http.request.method", "http.route"})

KEPT = OWN_KEPT | OPENINFERENCE_KEPT | GENAI_KEPT | VERCEL_AI_KEPT | GENERAL_KEPT

# Indexed (flattened list) attributes: ids of documents, roles of messages, tool call ids
# and function names, content part types; the older GenAI prompt/completion roles.
KEPT_INDEXED = re.compile(
    r"^(?:retrieval\.documents|reranker\.(?:input|output)_documents)\.\d+\.document\.id$"
    r"|^llm\.(?:input|output)_messages\.\d+\.message\.(?:role|tool_call_id"
    r"|tool_calls\.\d+\.tool_call\.(?:id|function\.name)"
    r"|contents\.\d+\.message_content\.type)$"
    r"|^gen_ai\.(?:prompt|completion)\.\d+\.(?:role|finish_reason)$")

# Fields inside a JSON value whose strings are ids or labels: a document's id and source
# (attr_values.SOURCE_KEYS), a message's role, a part's type, a tool call's id.
KEPT_FIELDS = frozenset({"id", "role", "type", "finish_reason", "mime_type", *SOURCE_KEYS})


class RedactedBytes(bytes):
    """A bytes value ``--no-text`` did not keep, read back (spanstore.resolve): empty, with
    the hash and length of what it was. Bytes, not a RedactedText, so that a normalizer
    reads it as it read the bytes in hand: a string attribute that held bytes stays no string."""

    content_hash: str
    size: int

    def __new__(cls, content_hash: str, size: int) -> RedactedBytes:
        self = super().__new__(cls, b"")
        self.content_hash = content_hash
        self.size = size
        return self


def redact_span(span: SpanRecord) -> SpanRecord:
    """The span with every attribute as ``--no-text`` stores it (for the intake log)."""
    return dataclasses.replace(span, attributes={k: scrub(k, v) for k, v in span.attributes.items()})


def keeps_strings(key: str) -> bool:
    """Whether ``--no-text`` keeps the strings of attribute ``key`` as sent."""
    return key in KEPT or KEPT_INDEXED.match(key) is not None


def scrub(key: str, value: Any) -> Any:
    """The value of attribute ``key`` as ``--no-text`` stores it."""
    if keeps_strings(key):
        return _keep_strings(value)
    return _scrub(value, 0)


def _keep_strings(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [v if isinstance(v, str) else _scrub(v, 1) for v in value]
    return _scrub(value, 0)


def _scrub(value: Any, depth: int) -> Any:
    """``value``, found within ``depth`` arrays and objects of its attribute, as kept."""
    if isinstance(value, RedactedText):  # read back from a redacted record: keep what it was
        marker: dict[str, Any] = {"hash": value.content_hash, "chars": value.chars}
        if value.structure is not None:
            marker["json"] = _scrub(value.structure, depth + MARKER_DEPTH)
        return {REDACTED: marker}
    if isinstance(value, str):
        return _redact(value, depth) if value else value
    if isinstance(value, RedactedBytes):
        return {REDACTED: {"hash": value.content_hash, "chars": value.size, "bytes": True}}
    if isinstance(value, bytes):
        return _marker_of_bytes(value)
    if isinstance(value, list):
        return None if depth >= MAX_DEPTH else [_scrub(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if set(value) == {REDACTED}:
            return value  # redacted already (an intake log entry derived again)
        if depth >= MAX_DEPTH:
            return None
        return {k: v if k in KEPT_FIELDS and isinstance(v, str) else _scrub(v, depth + 1)
                for k, v in value.items()}
    if type(value) is int and value not in INT64:  # only a JSON text holds one
        return str(value)
    return value


def _redact(text: str, depth: int) -> dict[str, Any]:
    marker: dict[str, Any] = {"hash": content_hash(text), "chars": len(text)}
    structure = _json_structure(text)
    if structure is not None:
        marker["json"] = _scrub(structure, depth + MARKER_DEPTH)
    return {REDACTED: marker}


def _json_structure(text: str) -> list[Any] | dict[str, Any] | None:
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (list, dict)) else None


def _marker_of_bytes(value: bytes) -> dict[str, Any]:
    return {REDACTED: {"hash": "sha256:" + hashlib.sha256(value).hexdigest(), "chars": len(value),
                       "bytes": True}}
