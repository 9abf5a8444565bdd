"""Vercel AI SDK spans (the ``ai.*`` attributes) -> one RagRequest, with no app changes.

Read (the AI SDK's telemetry: built into ``ai`` 4 to 6 with ``experimental_telemetry``, and
the ``LegacyOpenTelemetry`` integration of ``@ai-sdk/otel`` in ``ai`` 7):

- LLM call spans (``ai.operationId``, else the span name, = ``ai.generateText.doGenerate``,
  ``ai.streamText.doStream``, ``ai.generateObject.doGenerate`` or
  ``ai.streamObject.doStream``): the prompt from ``ai.prompt.messages`` (each message's
  text parts; a tool result as the JSON the provider is sent), the answer from
  ``ai.response.text`` (else ``ai.response.object``), ``ai.model.id`` (else
  ``ai.response.model``), ``ai.usage.inputTokens`` and ``ai.usage.outputTokens``
  (``ai.usage.promptTokens`` and ``ai.usage.completionTokens`` before ai 5).
  The ``ai.generateText`` / ``ai.streamText`` span around the steps is no call of its own.
- tool call spans (``ai.toolCall``): ``ai.toolCall.result`` is a retrieval when its JSON
  holds documents (collector/normalize/tool_results.py, the rule every tool result is read
  by), ranked in the tool's order;
  ``ai.toolCall.name`` names it in a warning when a trace retrieves more than once.
- The AI SDK records no retrieval an app does itself (documents put into the prompt before
  ``generateText``). Such an app adds one span of its own, which is read here with the same
  trace: an OTel GenAI retrieval span (``gen_ai.retrieval.documents``) or an OpenInference
  RETRIEVER span.

A trace is read here when one of its spans is an AI SDK LLM call: a RAG request when some
retrieval (a tool result with documents, or the app's retrieval span) is in it, else an
``llm_only`` one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from midtrace.collector.normalize import genai, openinference
from midtrace.collector.normalize.attr_values import (
    integer, join_texts, json_value, string, text_length)
from midtrace.collector.normalize.inferred import Document, LlmCall, Observation, Ranking, assemble
from midtrace.collector.normalize.locate import citation_pattern
from midtrace.collector.normalize.tool_results import tool_documents
from midtrace.schemas.chunk_hash import RedactedText
from midtrace.schemas.model import RagRequest
from midtrace.schemas.span import SpanRecord

OPERATION_ID = "ai.operationId"
PROMPT_MESSAGES = "ai.prompt.messages"
RESPONSE_TEXT = "ai.response.text"
RESPONSE_OBJECT = "ai.response.object"
MODEL_ID = "ai.model.id"
RESPONSE_MODEL = "ai.response.model"
USAGE_INPUT_TOKENS = "ai.usage.inputTokens"
USAGE_PROMPT_TOKENS = "ai.usage.promptTokens"  # ai 4
USAGE_OUTPUT_TOKENS = "ai.usage.outputTokens"
USAGE_COMPLETION_TOKENS = "ai.usage.completionTokens"  # ai 4
TOOL_CALL = "ai.toolCall"
TOOL_CALL_NAME = "ai.toolCall.name"
TOOL_CALL_RESULT = "ai.toolCall.result"

LLM_OPERATIONS = frozenset({
    "ai.generateText.doGenerate", "ai.streamText.doStream",
    "ai.generateObject.doGenerate", "ai.streamObject.doStream"})

ATTRIBUTES_READ: tuple[str, ...] = (
    OPERATION_ID, PROMPT_MESSAGES, RESPONSE_TEXT, RESPONSE_OBJECT, MODEL_ID, RESPONSE_MODEL,
    USAGE_INPUT_TOKENS, USAGE_PROMPT_TOKENS, USAGE_OUTPUT_TOKENS, USAGE_COMPLETION_TOKENS,
    TOOL_CALL_NAME, TOOL_CALL_RESULT,
)


def operation(span: SpanRecord) -> str:
    """The AI SDK operation of a span: ``ai.operationId``, else its name (the same string;
    the name survives ``--no-text``)."""
    op = span.attributes.get(OPERATION_ID)
    return op if isinstance(op, str) and not isinstance(op, RedactedText) else span.name


def is_llm_call(span: SpanRecord) -> bool:
    return operation(span) in LLM_OPERATIONS


# --- documents in a tool result ---------------------------------------------------------------

def tool_result_documents(result: Any) -> tuple[tuple[int, Document], ...]:
    """``(rank, document)`` for each document a tool returned: the one rule every tool
    result is read by (collector/normalize/tool_results.py; docs/zero-code.md, "Tool
    results")."""
    return tool_documents(result)


# --- LLM calls --------------------------------------------------------------------------------

def _tool_output_text(part: Mapping[str, Any]) -> str | None:
    """A tool result as the provider is sent it: text as is, anything else as JSON
    (``output`` since ai 5: ``{"type": "text" | "json" | ..., "value": ...}``; ``result``
    before)."""
    output = part.get("output")
    if isinstance(output, Mapping) and "value" in output:
        value = output["value"]
    elif "result" in part:
        value = part["result"]
    else:
        return None
    if isinstance(value, str):
        return value
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    withheld = list(_redacted_in(value))
    if not withheld:
        return text
    # texts --no-text did not keep: the length the JSON had with them (exact unless one
    # held a character JSON escapes)
    chars = len(text) + sum(t.chars - len(json.dumps(str(t), ensure_ascii=False))
                            + 2 for t in withheld)
    return RedactedText(None, chars)


def _redacted_in(value: Any) -> Iterator[RedactedText]:
    if isinstance(value, RedactedText):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _redacted_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from _redacted_in(v)


def prompt_messages(value: Any) -> list[tuple[str | None, str]]:
    """``(role, text)`` of each message of ``ai.prompt.messages`` that has text, in order;
    each tool result is a message of its own, as providers send it."""
    listed = json_value(value)
    if not isinstance(listed, list):
        return []
    out: list[tuple[str | None, str]] = []
    for m in listed:
        if not isinstance(m, Mapping):
            continue
        role = m.get("role") if isinstance(m.get("role"), str) else None
        content = m.get("content")
        if isinstance(content, str):
            out.append((role, content))
            continue
        if not isinstance(content, list):
            continue
        texts = []
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "tool-result":
                result = _tool_output_text(part)
                if result is not None:
                    out.append((role, result))
        if texts:
            out.append((role, join_texts("\n", texts)))
    return out


def llm_call(span: SpanRecord) -> LlmCall:
    """What an AI SDK LLM call span says about its call."""
    attrs = span.attributes
    messages = prompt_messages(attrs.get(PROMPT_MESSAGES))
    texts = [text for _, text in messages]
    user = [text for role, text in messages if role == "user"]
    tokens = integer(attrs, USAGE_INPUT_TOKENS)
    output_tokens = integer(attrs, USAGE_OUTPUT_TOKENS)
    return LlmCall(
        span=span,
        prompt=join_texts("\n\n", texts) if texts else None,
        answer=string(attrs, RESPONSE_TEXT) or string(attrs, RESPONSE_OBJECT),
        model=string(attrs, MODEL_ID) or string(attrs, RESPONSE_MODEL),
        prompt_tokens=tokens if tokens is not None else integer(attrs, USAGE_PROMPT_TOKENS),
        output_tokens=(output_tokens if output_tokens is not None
                       else integer(attrs, USAGE_COMPLETION_TOKENS)),
        user_text=user[-1] if user else None,
        messages=tuple((role, text_length(text)) for role, text in messages),
    )


# --- the trace --------------------------------------------------------------------------------

def _retrieval(span: SpanRecord) -> Ranking | None:
    """The documents a span retrieved: a tool call's result, or the app's own retrieval span
    in the GenAI or OpenInference conventions."""
    attrs = span.attributes
    if operation(span) == TOOL_CALL:
        docs = tool_result_documents(attrs.get(TOOL_CALL_RESULT))
        return Ranking(span, docs) if docs else None
    if genai.is_retrieval(span):
        docs = genai.retrieved_documents(attrs)
        query = string(attrs, genai.RETRIEVAL_QUERY_TEXT)
    elif openinference.span_kind(span) == "RETRIEVER":
        docs = openinference.documents(attrs, openinference.RETRIEVAL_DOCUMENTS)
        query = string(attrs, openinference.INPUT_VALUE)
    else:
        return None
    return Ranking(span, docs, query) if docs else None


def normalize_vercel_ai(spans: Sequence[SpanRecord],
                        pattern: re.Pattern[str] | None = None) -> RagRequest | None:
    """The RAG request a trace of the Vercel AI SDK describes, or None.

    None when no span of the trace is an AI SDK LLM call; an ``llm_only`` request when
    nothing in it retrieved documents. Pure: the same spans in any order give the same
    request.
    """
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    calls = tuple(llm_call(s) for s in ordered if is_llm_call(s))
    if not calls:
        return None
    retrievals = tuple(r for s in ordered if (r := _retrieval(s)) is not None)
    warnings = []
    if len(retrievals) > 1:
        names = ", ".join(string(r.span.attributes, TOOL_CALL_NAME) or r.span.name
                          for r in retrievals)
        warnings.append(f"{len(retrievals)} retrievals ({names}); each chunk's retrieval rank "
                        "is from the first retrieval that returned it")
    observation = Observation(convention="vercel_ai", retrievals=retrievals, calls=calls,
                              warnings=tuple(warnings))
    return assemble(spans, observation, pattern or citation_pattern())
