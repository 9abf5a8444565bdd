"""Documents a tool returned: retrieval done by a tool in a tool-calling loop.

An agent (the OpenAI Agents SDK, the Vercel AI SDK, or any loop that offers the model a
search tool) retrieves by calling a tool; the documents reach the model as the tool's result,
a message of a later LLM call. OpenInference traces the tool as a TOOL span whose
``output.value`` is that result; the Vercel AI SDK records it as ``ai.toolCall.result``.
A result is read as retrieved documents when it is JSON (docs/zero-code.md, "Tool results"):

- a list of strings (each one a document's text);
- a list of objects with the text under one of ``TEXT_KEYS`` (or under a nested
  ``document`` or ``node`` object), an optional id (``ID_KEYS``), score (``SCORE_KEYS``) and
  source (the keys every document's source is read from, ``SOURCE_KEYS`` in
  attr_values.py, at the top, under ``metadata`` or in the nested object);
- either of those under a key of ``LIST_KEYS`` (``{"results": [...]}``), looked for up to
  three levels deep; a list of such lists (one per query) is read as one list.

Items without text are skipped; a result with no document is no retrieval (a calculator's
or a weather API's answer is not read). Plain-text results are not read: nothing tells a
search's text from any other tool's, nor where one document ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from midtrace.collector.normalize.attr_values import identifier, json_value, number, source_id
from midtrace.collector.normalize.inferred import Document

TEXT_KEYS: tuple[str, ...] = (
    "text", "content", "page_content", "pageContent", "chunk", "passage", "snippet", "body")
ID_KEYS: tuple[str, ...] = ("id", "chunk_id")  # doc_id, document_id: the source (SOURCE_KEYS)
SCORE_KEYS: tuple[str, ...] = ("score", "relevance_score", "similarity")
LIST_KEYS: tuple[str, ...] = (
    "results", "documents", "docs", "chunks", "passages", "hits", "matches", "items", "data",
    "context", "sources")
NESTED_KEYS: tuple[str, ...] = ("document", "node")
_DEPTH = 3


def _text(item: Mapping[str, Any]) -> str | None:
    text = next((item[k] for k in TEXT_KEYS if isinstance(item.get(k), str) and item[k]), None)
    if text is None:
        for key in NESTED_KEYS:
            nested = item.get(key)
            if isinstance(nested, Mapping):
                text = _text(nested)
                if text is not None:
                    break
    return text


def _document(item: Any) -> Document | None:
    if isinstance(item, str):
        return Document(text=item) if item.strip() else None
    if not isinstance(item, Mapping):
        return None
    text = _text(item)
    if text is None:
        return None
    nested: Mapping[str, Any] = next(
        (item[k] for k in NESTED_KEYS if isinstance(item.get(k), Mapping)), {})
    doc_id = next((i for k in ID_KEYS if (i := identifier(item.get(k))) is not None),
                  next((i for k in ID_KEYS if (i := identifier(nested.get(k))) is not None),
                       None))
    score = next((s for k in SCORE_KEYS if (s := number(item.get(k))) is not None), None)
    metadata = json_value(item.get("metadata"))
    return Document(text=text, doc_id=doc_id, score=score,
                    source_id=source_id(metadata) or source_id(item) or source_id(nested))


def _listed(value: Any, depth: int = _DEPTH) -> list[Any] | None:
    """The list of documents in a tool result: the value itself, or under a list key."""
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):  # one list per query
            return [item for v in value for item in v]
        return value
    if isinstance(value, Mapping) and depth > 0:
        for key in LIST_KEYS:
            found = _listed(value.get(key), depth - 1) if key in value else None
            if found:
                return found
    return None


def tool_documents(result: Any) -> tuple[tuple[int, Document], ...]:
    """``(rank, document)`` for each document in a tool's result (a JSON string, or the
    value parsed), rank its 1-based place in the result; empty when it holds none."""
    listed = _listed(json_value(result) if isinstance(result, str) else result)
    if not listed:
        return ()
    docs = ((rank, _document(item)) for rank, item in enumerate(listed, start=1))
    return tuple((rank, d) for rank, d in docs if d is not None)
