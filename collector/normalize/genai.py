"""OpenTelemetry GenAI semantic-convention spans -> one RagRequest, with no app changes.

Read (spec: open-telemetry/semantic-conventions-genai, docs/gen-ai/gen-ai-spans.md):

- retrieval spans (``gen_ai.operation.name`` = ``retrieval``): ``gen_ai.retrieval.documents``
  (JSON string or structured; objects with ``id`` and ``score``, plus the document text
  when the instrumentation adds it as ``content``), ``gen_ai.retrieval.query.text``;
- inference spans (``chat``, ``text_completion``, ``generate_content``, or any span with
  input messages): the prompt from ``gen_ai.system_instructions`` and
  ``gen_ai.input.messages`` (role + parts), the answer from ``gen_ai.output.messages``,
  ``gen_ai.request.model`` (else ``gen_ai.response.model``), ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``. Instrumentations older than the message attributes
  (OpenLLMetry) send ``gen_ai.prompt.<i>.content`` / ``gen_ai.completion.<i>.content``,
  ``gen_ai.usage.prompt_tokens`` and ``gen_ai.usage.completion_tokens``; those are read too.

- tool spans (``gen_ai.operation.name`` = ``execute_tool``): ``gen_ai.tool.call.result``
  is a retrieval when it holds documents (collector/normalize/tool_results.py, the rule every
  tool result is read by), ``gen_ai.tool.call.arguments`` its query; read only when the
  trace has no retrieval span with documents. With no such span, the ``tool_call_response``
  parts of the inference spans' input messages are read the same way. A tool response is
  part of the prompt (as compact JSON when it is not text), so its documents are found there.
- agent spans (``invoke_agent``, ``create_agent``) and ``embeddings`` are no LLM call of
  their own, whatever messages they carry.

The specification requires only ``id`` and ``score`` per retrieved document. Without the
text the documents are recorded as retrieved, with a warning: where they sat in the prompt
cannot be inferred.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from midtrace.collector.normalize.attr_values import (
    identifier, indexed, integer, join_texts, json_value, number, parts_text, source_id, string,
    text_length)
from midtrace.collector.normalize.inferred import Document, LlmCall, Observation, Ranking, assemble
from midtrace.collector.normalize.locate import citation_pattern
from midtrace.collector.normalize.tool_results import tool_documents
from midtrace.schemas.model import RagRequest
from midtrace.schemas.span import SpanRecord

OPERATION_NAME = "gen_ai.operation.name"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
RETRIEVAL_QUERY_TEXT = "gen_ai.retrieval.query.text"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
LEGACY_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
LEGACY_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
LEGACY_PROMPT = "gen_ai.prompt"
LEGACY_COMPLETION = "gen_ai.completion"

# GenAI events received as OTLP log records, one span record each (collector/intake/genai_events.py)
EVENT_BODY = "gen_ai.event.body"
EVENT_INDEX = "gen_ai.event.index"
CHOICE_EVENT = "gen_ai.choice"
PROMPT_EVENT = "gen_ai.content.prompt"  # span events of older instrumentations
COMPLETION_EVENT = "gen_ai.content.completion"

TOOL_CALL_RESULT = "gen_ai.tool.call.result"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"

RETRIEVAL = "retrieval"
EXECUTE_TOOL = "execute_tool"
INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
# operations whose spans may carry messages but are no LLM call of their own
NOT_INFERENCE = frozenset({"invoke_agent", "create_agent", EXECUTE_TOOL, "embeddings"})
TOOL_RESPONSE_PART = "tool_call_response"
_TEXT_KEYS = ("content", "text", "page_content")

ATTRIBUTES_READ: tuple[str, ...] = (
    OPERATION_NAME, RETRIEVAL_DOCUMENTS, RETRIEVAL_QUERY_TEXT, TOOL_CALL_RESULT,
    TOOL_CALL_ARGUMENTS, SYSTEM_INSTRUCTIONS,
    INPUT_MESSAGES, OUTPUT_MESSAGES, REQUEST_MODEL, RESPONSE_MODEL, USAGE_INPUT_TOKENS,
    LEGACY_USAGE_PROMPT_TOKENS, USAGE_OUTPUT_TOKENS, LEGACY_USAGE_COMPLETION_TOKENS, f"{LEGACY_PROMPT}.<i>.content", f"{LEGACY_PROMPT}.<i>.role",
    f"{LEGACY_COMPLETION}.<i>.content",
)


def _document(item: Mapping[str, Any]) -> Document:
    nested = item.get("document")
    text = next((item[k] for k in _TEXT_KEYS if isinstance(item.get(k), str)), None)
    if text is None and isinstance(nested, Mapping):
        text = next((nested[k] for k in _TEXT_KEYS if isinstance(nested.get(k), str)), None)
    return Document(
        text=text,
        doc_id=identifier(item.get("id")),
        score=number(item.get("score")),
        source_id=source_id(json_value(item.get("metadata"))) or source_id(item),
    )


def retrieved_documents(attrs: Mapping[str, Any]) -> tuple[tuple[int, Document], ...]:
    """``(rank, document)`` for each entry of ``gen_ai.retrieval.documents``, in order."""
    listed = json_value(attrs.get(RETRIEVAL_DOCUMENTS))
    if not isinstance(listed, list):
        return ()
    docs = ((i + 1, _document(d)) for i, d in enumerate(listed) if isinstance(d, Mapping))
    return tuple((rank, d) for rank, d in docs if d.chunk_id is not None)


def _parts_text(parts: Any) -> str | None:
    """Text of a message's parts (``{"type": "text", "content": ...}``) or a plain string."""
    return parts_text(parts, "content", text_parts_only=True)


def _tool_response(part: Any) -> str | None:
    """A ``tool_call_response`` part's response as the model is sent it: text as is, any
    other value as compact JSON."""
    if not isinstance(part, Mapping) or part.get("type") != TOOL_RESPONSE_PART:
        return None
    response = part.get("response")
    if response is None or isinstance(response, str):
        return response
    return json.dumps(response, ensure_ascii=False, separators=(",", ":"))


def _message_text(parts: Any) -> str | None:
    """A message's text parts, then its tool responses, joined by newlines."""
    text = _parts_text(parts)
    responses = [t for p in parts if (t := _tool_response(p))] if isinstance(parts, list) else []
    pieces = ([text] if text is not None else []) + responses
    return join_texts("\n", pieces) if pieces else None


def _messages(value: Any) -> list[tuple[str | None, str]]:
    listed = json_value(value)
    if not isinstance(listed, list):
        return []
    out = []
    for m in listed:
        if not isinstance(m, Mapping):
            continue
        text = _message_text(m.get("parts")) if "parts" in m else _parts_text(m.get("content"))
        role = m.get("role")
        if text is not None:
            out.append((role if isinstance(role, str) else None, text))
    return out


def _tool_responses(value: Any) -> list[str]:
    """The tool responses among a span's input messages, in order."""
    listed = json_value(value)
    if not isinstance(listed, list):
        return []
    return [t for m in listed if isinstance(m, Mapping) and isinstance(m.get("parts"), list)
            for p in m["parts"] if (t := _tool_response(p))]


def _legacy(attrs: Mapping[str, Any], prefix: str) -> list[tuple[str | None, str]]:
    rows = indexed(attrs, prefix)
    if not rows:
        return _messages(attrs.get(prefix))
    out = []
    for i in sorted(rows):
        content, role = rows[i].get("content"), rows[i].get("role")
        if isinstance(content, str):
            out.append((role if isinstance(role, str) else None, content))
    return out


def is_event(span: SpanRecord) -> bool:
    """A GenAI event that arrived as a log record (collector/intake/genai_events.py)."""
    return EVENT_INDEX in span.attributes and span.parent_span_id is not None


def is_inference(span: SpanRecord) -> bool:
    attrs = span.attributes
    operation = string(attrs, OPERATION_NAME)  # a list or a map here is no operation
    return not is_event(span) and operation not in NOT_INFERENCE and (
        operation in INFERENCE_OPERATIONS or INPUT_MESSAGES in attrs
        or any(k.startswith(LEGACY_PROMPT + ".") for k in attrs))


def is_tool(span: SpanRecord) -> bool:
    return (span.attributes.get(OPERATION_NAME) == EXECUTE_TOOL
            or TOOL_CALL_RESULT in span.attributes)


def _tool_rankings(ordered: Sequence[SpanRecord], calls: Sequence[LlmCall]) -> list[Ranking]:
    """Documents tools returned: each tool span's result, in start order; with none, the
    distinct tool responses in the calls' input messages, each read where it is first seen."""
    out = [Ranking(s, docs, string(s.attributes, TOOL_CALL_ARGUMENTS), from_tool=True)
           for s in ordered if is_tool(s)
           if (docs := tool_documents(s.attributes.get(TOOL_CALL_RESULT)))]
    if out:
        return out
    seen: set[str] = set()
    for call in calls:
        for text in _tool_responses(call.span.attributes.get(INPUT_MESSAGES)):
            if text not in seen:
                seen.add(text)
                if docs := tool_documents(text):
                    out.append(Ranking(call.span, docs, from_tool=True))
    return out


def _from_events(events: Sequence[SpanRecord]) -> dict[str, Any]:
    """The message attributes a call's GenAI events stand for, as if set on its span: the
    per-message events of conventions 1.30 (``gen_ai.<role>.message``, ``gen_ai.choice``) in
    the order they were emitted, the one ``gen_ai.client.inference.operation.details``
    event that carries ``gen_ai.input.messages`` itself, or the ``gen_ai.content.prompt`` /
    ``gen_ai.content.completion`` span events of older instrumentations (``gen_ai.prompt``,
    ``gen_ai.completion``). Events arrive as log records or as events on the span
    (collector/intake/event_spans.py)."""
    inputs: list[dict[str, Any]] = []
    outputs: list[tuple[int, dict[str, Any]]] = []
    found: dict[str, Any] = {}
    for e in sorted(events, key=lambda e: (e.start_ns, e.attributes.get(EVENT_INDEX, 0))):
        for key in (SYSTEM_INSTRUCTIONS, INPUT_MESSAGES, OUTPUT_MESSAGES):
            if key in e.attributes:
                found[key] = e.attributes[key]
        body = json_value(e.attributes.get(EVENT_BODY))
        # an event on a span has no body: what a log record's body holds is in its attributes
        body = body if isinstance(body, Mapping) else e.attributes
        if e.name == PROMPT_EVENT:  # older span events: the whole prompt, or the completion
            inputs += [{"role": r, "content": t} for r, t in _messages(e.attributes.get(LEGACY_PROMPT))]
        elif e.name == COMPLETION_EVENT:
            outputs += [(len(outputs), {"role": r or "assistant", "content": t})
                        for r, t in _messages(e.attributes.get(LEGACY_COMPLETION))]
        elif e.name == CHOICE_EVENT:
            message = body.get("message")
            if isinstance(message, Mapping) and message.get("content") is not None:
                index = body.get("index")
                outputs.append((index if isinstance(index, int) else len(outputs),
                                {"role": message.get("role") or "assistant",
                                 "content": message.get("content")}))
        elif e.name.startswith("gen_ai.") and e.name.endswith(".message"):
            role = e.name[len("gen_ai."):-len(".message")]
            if body.get("content") is not None:
                inputs.append({"role": body.get("role") or role, "content": body["content"]})
    if inputs and INPUT_MESSAGES not in found:
        found[INPUT_MESSAGES] = inputs
    if outputs and OUTPUT_MESSAGES not in found:
        found[OUTPUT_MESSAGES] = [m for _, m in sorted(outputs, key=lambda o: o[0])]
    return found


def is_retrieval(span: SpanRecord) -> bool:
    return (span.attributes.get(OPERATION_NAME) == RETRIEVAL
            or RETRIEVAL_DOCUMENTS in span.attributes)


def llm_call(span: SpanRecord, events: Sequence[SpanRecord] = ()) -> LlmCall:
    """What a GenAI inference span says about its call; its GenAI events (log records) fill
    in the messages the span does not carry."""
    attrs: Mapping[str, Any] = span.attributes
    if events:
        attrs = {**_from_events(events), **attrs}
    conversation = _messages(attrs.get(INPUT_MESSAGES)) or _legacy(attrs, LEGACY_PROMPT)
    system = _parts_text(json_value(attrs.get(SYSTEM_INSTRUCTIONS)))
    texts = ([system] if system else []) + [text for _, text in conversation]
    output = _messages(attrs.get(OUTPUT_MESSAGES)) or _legacy(attrs, LEGACY_COMPLETION)
    user = [text for role, text in conversation if role == "user"]
    tokens = integer(attrs, USAGE_INPUT_TOKENS)
    output_tokens = integer(attrs, USAGE_OUTPUT_TOKENS)
    return LlmCall(
        span=span,
        prompt=join_texts("\n\n", texts) if texts else None,
        answer=output[0][1] if output else None,
        model=string(attrs, REQUEST_MODEL) or string(attrs, RESPONSE_MODEL),
        prompt_tokens=tokens if tokens is not None else integer(attrs, LEGACY_USAGE_PROMPT_TOKENS),
        output_tokens=(output_tokens if output_tokens is not None
                       else integer(attrs, LEGACY_USAGE_COMPLETION_TOKENS)),
        user_text=user[-1] if user else None,
        messages=(((("system", text_length(system)),) if system else ())
                  + tuple((role, text_length(text)) for role, text in conversation)),
    )


def normalize_genai(spans: Sequence[SpanRecord],
                    pattern: re.Pattern[str] | None = None) -> RagRequest | None:
    """The RAG request a GenAI-instrumented trace describes, or None.

    A trace with no GenAI retrieval with documents but an inference span is an ``llm_only``
    request; None when it has neither. Pure: the same spans in any order give the same
    request.
    """
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    events: dict[str, list[SpanRecord]] = {}
    for s in ordered:
        if is_event(s):
            events.setdefault(s.parent_span_id or "", []).append(s)
    retrievals = [Ranking(s, docs, string(s.attributes, RETRIEVAL_QUERY_TEXT))
                  for s in ordered if is_retrieval(s)
                  if (docs := retrieved_documents(s.attributes))]
    calls = tuple(llm_call(s, events.get(s.span_id, ())) for s in ordered
                  if is_inference(s) and not is_retrieval(s))
    if not retrievals:
        retrievals = _tool_rankings(ordered, calls)
    if not retrievals and not calls:
        return None
    warnings = []
    if len(retrievals) > 1:
        what = "tool results with documents" if retrievals[0].from_tool else "retrieval spans"
        warnings.append(f"{len(retrievals)} {what}; each chunk's retrieval rank is "
                        "from the first retrieval that returned it")
    if retrievals and not any(d.text for r in retrievals for _, d in r.documents):
        warnings.append(f"{RETRIEVAL_DOCUMENTS} carries no document text (only ids and "
                        "scores): add each document's text as `content` to see where it sat "
                        "in the prompt")
    observation = Observation(
        convention="genai",
        retrievals=tuple(retrievals),
        calls=calls,
        warnings=tuple(warnings),
    )
    return assemble(spans, observation, pattern or citation_pattern())
