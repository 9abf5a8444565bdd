"""OpenInference spans (Arize Phoenix's conventions) -> one RagRequest, with no app changes.

Read (spec: github.com/Arize-ai/openinference, spec/semantic_conventions.md):

- RETRIEVER spans: ``retrieval.documents.<i>.document.content|id|score|metadata``, in
  retriever order; ``input.value`` as the query. A retriever that wraps another (LangChain's
  ContextualCompressionRetriever, EnsembleRetriever) is read as a reranker over the
  documents its inner retrievers returned.
- RERANKER spans: ``reranker.input_documents.<i>.document.*``,
  ``reranker.output_documents.<i>.document.*``, ``reranker.query``.
- LLM spans: the prompt from ``llm.input_messages.<i>.message.content`` (or
  ``message.contents.<j>.message_content.text``), else ``llm.prompts`` (completion APIs),
  else the span's ``llm.prompt_template.template`` filled with its
  ``llm.prompt_template.variables`` (LlamaIndex's predict span), else ``input.value``; the
  answer from ``llm.output_messages``, ``llm.choices`` or ``output.value`` (DSPy's
  ``[[ ## answer ## ]]`` field when it is in that format); ``llm.model_name``,
  ``llm.token_count.prompt``, ``llm.cost.total``. An LLM span around another with the same
  prompt (LlamaIndex's predict around complete) is read once, as the inner one.
- TOOL spans (an agent's function tools): ``output.value``, read as retrieved documents when
  it is JSON shaped like a search's results (collector/normalize/tool_results.py), and
  ``input.value`` as the query, when the trace has no retriever or reranker span with
  documents. With no such tool span, the tool messages (role ``tool``) of the LLM spans'
  ``llm.input_messages`` are read the same way.
- Any span: ``llm.prompt_template.template|version`` and ``prompt.id`` (LangChain records
  the template on its PROMPT span), and the root chain's ``input.value`` as the question.

The span kind is ``openinference.span.kind``; a span that lost it (the SDK drops the oldest
attributes first once a span passes 128) is recognised by its attribute names instead.
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
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import RagRequest
from midtrace.schemas.span import SpanRecord

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
RERANKER_INPUT_DOCUMENTS = "reranker.input_documents"
RERANKER_OUTPUT_DOCUMENTS = "reranker.output_documents"
RERANKER_QUERY = "reranker.query"
DOCUMENT_CONTENT = "document.content"
DOCUMENT_ID = "document.id"
DOCUMENT_SCORE = "document.score"
DOCUMENT_METADATA = "document.metadata"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
MESSAGE_ROLE = "message.role"
MESSAGE_CONTENT = "message.content"
MESSAGE_CONTENTS = "message.contents"
MESSAGE_CONTENT_TEXT = "message_content.text"
LLM_PROMPTS = "llm.prompts"
PROMPT_TEXT = "prompt.text"
LLM_CHOICES = "llm.choices"
COMPLETION_TEXT = "completion.text"
LLM_MODEL_NAME = "llm.model_name"
LLM_RESPONSE_MODEL_NAME = "llm.response.model_name"
LLM_REQUEST_MODEL_NAME = "llm.request.model_name"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_COST_TOTAL = "llm.cost.total"
PROMPT_TEMPLATE = "llm.prompt_template.template"
PROMPT_TEMPLATE_VERSION = "llm.prompt_template.version"
PROMPT_TEMPLATE_VARIABLES = "llm.prompt_template.variables"
PROMPT_ID = "prompt.id"
TOOL_NAME = "tool.name"

# What this normalizer reads, for docs/zero-code.md (a test checks each one is documented).
ATTRIBUTES_READ: tuple[str, ...] = (
    SPAN_KIND, INPUT_VALUE, INPUT_MIME_TYPE, OUTPUT_VALUE,
    f"{RETRIEVAL_DOCUMENTS}.<i>.{DOCUMENT_CONTENT}", f"{RETRIEVAL_DOCUMENTS}.<i>.{DOCUMENT_ID}",
    f"{RETRIEVAL_DOCUMENTS}.<i>.{DOCUMENT_SCORE}", f"{RETRIEVAL_DOCUMENTS}.<i>.{DOCUMENT_METADATA}",
    f"{RERANKER_INPUT_DOCUMENTS}.<i>.document.*", f"{RERANKER_OUTPUT_DOCUMENTS}.<i>.document.*",
    RERANKER_QUERY,
    f"{LLM_INPUT_MESSAGES}.<i>.{MESSAGE_ROLE}", f"{LLM_INPUT_MESSAGES}.<i>.{MESSAGE_CONTENT}",
    f"{LLM_INPUT_MESSAGES}.<i>.{MESSAGE_CONTENTS}.<j>.{MESSAGE_CONTENT_TEXT}",
    f"{LLM_OUTPUT_MESSAGES}.<i>.{MESSAGE_CONTENT}", f"{LLM_PROMPTS}.<i>.{PROMPT_TEXT}",
    f"{LLM_CHOICES}.<i>.{COMPLETION_TEXT}", LLM_MODEL_NAME, LLM_RESPONSE_MODEL_NAME,
    LLM_REQUEST_MODEL_NAME, LLM_TOKEN_COUNT_PROMPT, LLM_TOKEN_COUNT_COMPLETION, LLM_COST_TOTAL,
    PROMPT_TEMPLATE, PROMPT_TEMPLATE_VERSION, PROMPT_TEMPLATE_VARIABLES, PROMPT_ID, TOOL_NAME,
)

TEMPLATE_ID_CHARS = len("sha256:") + 16  # an inferred template id: its content hash, cut short
_LLM_PREFIXES = (LLM_INPUT_MESSAGES + ".", LLM_OUTPUT_MESSAGES + ".", LLM_PROMPTS, LLM_CHOICES)
_NOT_ROOT_KINDS = {"RETRIEVER", "RERANKER", "LLM", "EMBEDDING", "PROMPT", "TOOL"}
_QUESTION_KEYS = ("question", "query", "input", "user_input", "message", "text")


def span_kind(span: SpanRecord) -> str | None:
    """The OpenInference kind of a span, or None when it is not an OpenInference span."""
    attrs = span.attributes
    kind = string(attrs, SPAN_KIND)
    if kind:
        return kind.upper()
    keys = attrs.keys()
    if any(k.startswith(RETRIEVAL_DOCUMENTS + ".") for k in keys):
        return "RETRIEVER"
    if any(k.startswith("reranker.") for k in keys):
        return "RERANKER"
    if LLM_MODEL_NAME in attrs or any(k.startswith(_LLM_PREFIXES) for k in keys):
        return "LLM"
    return None


# --- documents -------------------------------------------------------------------------------

def _document(row: Mapping[str, Any]) -> Document:
    """A document's fields, each under ``document.<name>`` or, failing that, ``<name>``."""
    get = row.get
    if (text := get("document.content")) is None:
        text = get("content")
    if (doc_id := get("document.id")) is None:
        doc_id = get("id")
    if (score := get("document.score")) is None:
        score = get("score")
    if (metadata := get("document.metadata")) is None:
        metadata = get("metadata")
    return Document(
        text=text if isinstance(text, str) else None,
        doc_id=identifier(doc_id),
        score=number(score),
        source_id=None if metadata is None else source_id(json_value(metadata)),
    )


def documents(attrs: Mapping[str, Any], prefix: str) -> tuple[tuple[int, Document], ...]:
    """``(rank, document)`` for each document listed under ``prefix``, rank 1-based."""
    rows: Mapping[int, Mapping[str, Any]] = indexed(attrs, prefix)
    if not rows:
        root = json_value(attrs.get(prefix))
        if isinstance(root, list):
            rows = {i: d for i, d in enumerate(root) if isinstance(d, Mapping)}
    docs = ((i + 1, _document(rows[i])) for i in sorted(rows))
    return tuple((rank, d) for rank, d in docs if d.chunk_id is not None)


# --- messages --------------------------------------------------------------------------------

def _parts_text(parts: Any) -> str | None:
    return parts_text(parts, MESSAGE_CONTENT_TEXT)


def _message(row: Mapping[str, Any]) -> tuple[str | None, str | None]:
    role = row.get(MESSAGE_ROLE)
    content = row.get(MESSAGE_CONTENT)
    if not isinstance(content, str):
        nested = indexed(row, MESSAGE_CONTENTS)
        content = _parts_text([nested[j] for j in sorted(nested)] if nested
                              else row.get(MESSAGE_CONTENTS))
    return (role if isinstance(role, str) else None), content


def messages(attrs: Mapping[str, Any], prefix: str) -> list[tuple[str | None, str]]:
    """``(role, text)`` of each message under ``prefix`` that has text."""
    rows = indexed(attrs, prefix)
    listed: list[Mapping[str, Any]] = [rows[i] for i in sorted(rows)]
    if not listed:
        root = json_value(attrs.get(prefix))
        listed = [m for m in root if isinstance(m, Mapping)] if isinstance(root, list) else []
    out = []
    for row in listed:
        role, text = _message(row)
        if text is not None:
            out.append((role, text))
    return out


def _listed_texts(attrs: Mapping[str, Any], prefix: str, leaf: str) -> list[str]:
    value = json_value(attrs.get(prefix))
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    rows = indexed(attrs, prefix)
    return [rows[i][leaf] for i in sorted(rows) if isinstance(rows[i].get(leaf), str)]


def _serialized_message(m: Any) -> tuple[str | None, str | None]:
    """A message as LangChain serialises it into input.value, or as a chat API takes it."""
    if not isinstance(m, Mapping):
        return None, None
    kwargs = m.get("kwargs")
    body: Mapping[str, Any] = kwargs if isinstance(kwargs, Mapping) else m
    role = body.get("role") or body.get("type")
    return (role if isinstance(role, str) else None), _parts_text(body.get("content"))


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
# ``{{ name }}``, ``{{ d.content | trim }}``, ``{% for ... %}``: Jinja (Haystack's builders)
_JINJA = re.compile(r"\{%|\{\{\s*[A-Za-z_][\w.]*\s*(?:\|[^{}]*)?\}\}")


def rendered_template(attrs: Mapping[str, Any]) -> str | None:
    """The prompt a Python format-style template (``{name}``) gives with the span's variables.

    None when the span has no template or variables, or the template names a variable it
    was not given; a Jinja template (``{{ name }}``, ``{% ... %}``) is not rendered.
    """
    template = string(attrs, PROMPT_TEMPLATE)
    variables = json_value(attrs.get(PROMPT_TEMPLATE_VARIABLES))
    if (template is None or not isinstance(variables, Mapping) or not variables
            or _JINJA.search(template)):
        return None
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        if match[1] is None:
            return match[0][0]
        value = variables.get(match[1])
        if value is None:
            missing = True
            return match[0]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    text = _PLACEHOLDER.sub(fill, template)
    return None if missing else text


def _prompt_from_input(attrs: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    raw = string(attrs, INPUT_VALUE)
    if raw is None:
        return []
    data = json_value(raw) if raw.lstrip()[:1] in ("{", "[") else None
    if data is None:
        return [("user", raw)]
    if not isinstance(data, Mapping):
        return []
    listed = data.get("messages")
    if isinstance(listed, list) and listed and isinstance(listed[0], list):
        listed = listed[0]
    if isinstance(listed, list):
        pairs = [_serialized_message(m) for m in listed]
        return [(r, t) for r, t in pairs if t is not None]
    prompts = data.get("prompts")
    if isinstance(prompts, list):
        return [("user", p) for p in prompts if isinstance(p, str)]
    prompt = data.get("prompt")
    return [("user", prompt)] if isinstance(prompt, str) else []


_DSPY_FIELD = re.compile(r"^\[\[ ## (\w+) ## \]\][ \t]*\n?", re.MULTILINE)
_ANSWER_FIELDS = ("answer", "response", "output")


def dspy_fields(text: str) -> str:
    """The answer field of an output DSPy's ChatAdapter formats as ``[[ ## answer ## ]]``
    ... ``[[ ## completed ## ]]`` (the field named answer, response or output, else the
    last one); any other text as it is."""
    marks = list(_DSPY_FIELD.finditer(text))
    if not marks or marks[0].start() != len(text) - len(text.lstrip()):
        return text
    fields = {m[1]: text[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(text))]
              .strip() for i, m in enumerate(marks) if m[1] != "completed"}
    if not fields:
        return text
    name = next((f for f in _ANSWER_FIELDS if f in fields), list(fields)[-1])
    return fields[name]


def _answer(attrs: Mapping[str, Any]) -> str | None:
    text = _raw_answer(attrs)
    return dspy_fields(text) if text is not None and "[[ ## " in text else text


def _raw_answer(attrs: Mapping[str, Any]) -> str | None:
    out = messages(attrs, LLM_OUTPUT_MESSAGES)
    if out:
        return out[0][1]
    choices = _listed_texts(attrs, LLM_CHOICES, COMPLETION_TEXT)
    if choices:
        return choices[0]
    raw = string(attrs, OUTPUT_VALUE)
    data = json_value(raw) if raw is not None and raw.lstrip()[:1] in ("{", "[") else None
    if not isinstance(data, Mapping):
        return raw
    if isinstance(data.get("text"), str):  # LlamaIndex's CompletionResponse
        return str(data["text"])
    generations = data.get("generations")
    if isinstance(generations, list) and generations and isinstance(generations[0], list):
        first = generations[0][0] if generations[0] else None
        if isinstance(first, Mapping) and isinstance(first.get("text"), str):
            return str(first["text"])
    api_choices = data.get("choices")
    if isinstance(api_choices, list) and api_choices and isinstance(api_choices[0], Mapping):
        first_choice = api_choices[0]
        message = first_choice.get("message")
        if isinstance(message, Mapping):
            return _parts_text(message.get("content"))
        if isinstance(first_choice.get("text"), str):
            return str(first_choice["text"])
    return None


def llm_call(span: SpanRecord) -> LlmCall:
    """What an OpenInference LLM span says about its call."""
    attrs = span.attributes
    conversation = messages(attrs, LLM_INPUT_MESSAGES)
    if not conversation:
        conversation = [("user", p) for p in _listed_texts(attrs, LLM_PROMPTS, PROMPT_TEXT)]
    if not conversation:
        rendered = rendered_template(attrs)
        conversation = [("user", rendered)] if rendered is not None else []
    if not conversation:
        conversation = _prompt_from_input(attrs)
    prompt = join_texts("\n\n", [text for _, text in conversation]) if conversation else None
    user = [text for role, text in conversation if role in ("user", "human")]
    return LlmCall(
        span=span,
        prompt=prompt,
        answer=_answer(attrs),
        model=(string(attrs, LLM_MODEL_NAME) or string(attrs, LLM_RESPONSE_MODEL_NAME)
               or string(attrs, LLM_REQUEST_MODEL_NAME)),
        prompt_tokens=integer(attrs, LLM_TOKEN_COUNT_PROMPT),
        output_tokens=integer(attrs, LLM_TOKEN_COUNT_COMPLETION),
        cost_usd=number(attrs.get(LLM_COST_TOTAL)),
        user_text=user[-1] if user else None,
        messages=tuple((role, text_length(text)) for role, text in conversation),
    )


# --- the trace -------------------------------------------------------------------------------

def _query(attrs: Mapping[str, Any]) -> str | None:
    raw = string(attrs, INPUT_VALUE)
    if raw is None:
        return None
    if attrs.get(INPUT_MIME_TYPE) == "application/json" or raw.lstrip()[:1] == "{":
        data = json_value(raw)
        if isinstance(data, Mapping):
            return _question_in(data)
        if isinstance(data, str):
            return data
        return None if attrs.get(INPUT_MIME_TYPE) == "application/json" else raw
    return raw


def _question_in(data: Mapping[str, Any], depth: int = 3) -> str | None:
    """The first question-like field of ``data``, looked for level by level: Haystack's
    pipeline input nests it under the component's name (``{"data": {"retriever":
    {"query": ...}}}``)."""
    level: list[Mapping[str, Any]] = [data]
    for _ in range(depth):
        for m in level:
            found = next((m[k] for k in _QUESTION_KEYS if isinstance(m.get(k), str)), None)
            if found is not None:
                return found
        level = [v for m in level for v in m.values() if isinstance(v, Mapping)]
    return None


def _ancestors(span: SpanRecord, by_id: Mapping[str, SpanRecord]) -> list[SpanRecord]:
    out: list[SpanRecord] = []
    seen = {span.span_id}
    parent = span.parent_span_id
    while parent and parent in by_id and parent not in seen:
        seen.add(parent)
        out.append(by_id[parent])
        parent = by_id[parent].parent_span_id
    return out


def _retrieved(span: SpanRecord) -> tuple[tuple[int, Document], ...]:
    """A retriever span's documents; when none of them has its text and the span is a tool
    (the Agents SDK instrumentation's ``tool_span_kinds`` makes a function tool a RETRIEVER,
    and reads only a ``content`` key), the documents of its result instead."""
    docs = documents(span.attributes, RETRIEVAL_DOCUMENTS)
    if (not any(d.text for _, d in docs) and TOOL_NAME in span.attributes
            and (from_result := tool_documents(span.attributes.get(OUTPUT_VALUE)))):
        return from_result
    return docs


def _rankings(retrievers: Sequence[SpanRecord], rerankers: Sequence[SpanRecord],
              by_id: Mapping[str, SpanRecord]) -> tuple[list[Ranking], list[Ranking]]:
    wrapping: dict[str, list[SpanRecord]] = {}
    retriever_ids = {s.span_id for s in retrievers}
    retrieved = {s.span_id: _retrieved(s) for s in retrievers}
    for s in retrievers:
        # LlamaIndex traces a retriever's retrieve() and the _retrieve() inside it, and only
        # the outer span lists the documents: an inner span without documents is no stage.
        if not retrieved[s.span_id]:
            continue
        for a in _ancestors(s, by_id):
            if a.span_id in retriever_ids:
                wrapping.setdefault(a.span_id, []).append(s)
    retrievals, reranks = [], []
    for s in retrievers:
        docs = retrieved[s.span_id]
        if s.span_id in wrapping:
            inner = tuple(d for r in wrapping[s.span_id] if r.span_id not in wrapping
                          for _, d in retrieved[r.span_id])
            reranks.append(Ranking(s, docs, _query(s.attributes), inner))
        elif docs:  # a tool made a retriever: its query is the model's, not the question
            retrievals.append(Ranking(s, docs, _query(s.attributes),
                                      from_tool=TOOL_NAME in s.attributes))
    for s in rerankers:
        attrs = s.attributes
        reranks.append(Ranking(
            s, documents(attrs, RERANKER_OUTPUT_DOCUMENTS), string(attrs, RERANKER_QUERY),
            tuple(d for _, d in documents(attrs, RERANKER_INPUT_DOCUMENTS))))
    return retrievals, reranks


def _tool_rankings(tools: Sequence[SpanRecord], calls: Sequence[SpanRecord]) -> list[Ranking]:
    """Documents tools returned: each TOOL span's result, in start order; with none, the
    distinct tool messages of the LLM calls' prompts, each read where it is first seen."""
    out = [Ranking(s, docs, _query(s.attributes), from_tool=True) for s in tools
           if (docs := tool_documents(s.attributes.get(OUTPUT_VALUE)))]
    if out:
        return out
    seen: set[str] = set()
    for span in calls:
        for role, text in messages(span.attributes, LLM_INPUT_MESSAGES):
            if role == "tool" and text not in seen:
                seen.add(text)
                if docs := tool_documents(text):
                    out.append(Ranking(span, docs, from_tool=True))
    return out


def _root_questions(spans: Sequence[tuple[SpanRecord, str]],
                    by_id: Mapping[str, SpanRecord]) -> tuple[tuple[str, str], ...]:
    """``(span id, question)`` of each root chain span with a question, by start."""
    kinds = {s.span_id: k for s, k in spans}
    roots = [s for s, k in spans if k not in _NOT_ROOT_KINDS
             and not any(a.span_id in kinds for a in _ancestors(s, by_id))]
    out = []
    for s in sorted(roots, key=lambda s: (s.start_ns, -s.end_ns, s.span_id)):
        question = _query(s.attributes)
        if question:
            out.append((s.span_id, question))
    return tuple(out)


def _template(spans: Sequence[SpanRecord]) -> tuple[str | None, str | None]:
    with_template = sorted((s for s in spans if string(s.attributes, PROMPT_TEMPLATE)),
                           key=lambda s: (s.end_ns, s.span_id))
    prompt_id = next((string(s.attributes, PROMPT_ID) for s in sorted(
        spans, key=lambda s: (s.end_ns, s.span_id), reverse=True)
        if string(s.attributes, PROMPT_ID)), None)
    if not with_template:
        return prompt_id, None
    last = with_template[-1].attributes
    template = string(last, PROMPT_TEMPLATE) or ""
    # the documented content hash, so a template --no-text did not keep has the same id
    template_id = prompt_id or content_hash(template)[:TEMPLATE_ID_CHARS]
    return template_id, string(last, PROMPT_TEMPLATE_VERSION)


def _wrappers(calls: Sequence[LlmCall], by_id: Mapping[str, SpanRecord]) -> set[str]:
    """LLM spans that only wrap another LLM span of the same call.

    LlamaIndex traces ``predict()`` and the ``complete()`` or ``chat()`` inside it: the
    inner span, which has the reported token counts, is read. The outer one stays when its
    prompt differs (the inner one's was hidden, say, and the outer one has the template's
    variables).
    """
    by_span = {c.span.span_id: c for c in calls}
    out = set()
    for call in calls:
        if not call.prompt:
            continue
        for a in _ancestors(call.span, by_id):
            outer = by_span.get(a.span_id)
            if outer is not None and (not outer.prompt or outer.prompt == call.prompt):
                out.add(a.span_id)
    return out


def normalize_openinference(spans: Sequence[SpanRecord],
                            pattern: re.Pattern[str] | None = None) -> RagRequest | None:
    """The RAG request an OpenInference-instrumented trace describes, or None.

    A trace with no retriever, reranker or tool span with documents but an LLM span is an
    ``llm_only`` request; None when it has neither. Pure: the same spans in any order give
    the same request.
    """
    kinded = [(s, k) for s in spans if (k := span_kind(s)) is not None]
    if not kinded:
        return None
    by_id = {s.span_id: s for s in spans}
    ordered = sorted(kinded, key=lambda sk: (sk[0].start_ns, sk[0].span_id))
    retrievals, reranks = _rankings([s for s, k in ordered if k == "RETRIEVER"],
                                    [s for s, k in ordered if k == "RERANKER"], by_id)
    if not retrievals and not reranks:  # retrieval done by a tool (an agent's search)
        retrievals = _tool_rankings([s for s, k in ordered if k == "TOOL"],
                                    [s for s, k in ordered if k == "LLM"])
    calls = [llm_call(s) for s, k in ordered if k == "LLM"]
    if not retrievals and not reranks and not calls:
        return None
    warnings = []
    if len(retrievals) > 1:
        what = ("tool results with documents" if retrievals[0].from_tool
                else "retriever spans")
        warnings.append(f"{len(retrievals)} {what}; each chunk's retrieval rank is "
                        "from the first retriever that returned it")
    template_id, template_version = _template(spans)
    observation_calls = tuple(c for c in calls if c.span.span_id not in _wrappers(calls, by_id))
    observation = Observation(
        convention="openinference",
        retrievals=tuple(retrievals),
        reranks=tuple(reranks),
        calls=observation_calls,
        root_questions=_root_questions(ordered, by_id),
        template_id=template_id,
        template_version=template_version,
        warnings=tuple(warnings),
    )
    return assemble(spans, observation, pattern or citation_pattern())
