"""Spans of one trace -> one RagRequest, whichever conventions the app used.

midtrace's own attributes are read first; conventions other instrumentations send are
inferred by the first of ``INFERRING`` that recognises the trace. Explicit midtrace
attributes win over inferred values field by field. A new convention is one more entry in
``INFERRING``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from midtrace.collector.normalize.genai import normalize_genai
from midtrace.collector.normalize.merge_explicit import merge_explicit
from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.collector.normalize.vercel_ai import normalize_vercel_ai
from midtrace.schemas.decode import decode_trace
from midtrace.schemas.model import RagRequest
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)

Normalizer = Callable[[Sequence[SpanRecord]], RagRequest | None]
# Tried in order; the first that finds a request in the trace wins. The Vercel AI SDK comes
# first: its traces may carry the app's own GenAI or OpenInference retrieval span, which the
# others would read as a retrieval with no LLM call.
INFERRING: tuple[Normalizer, ...] = (normalize_vercel_ai, normalize_openinference,
                                     normalize_genai)


def normalize_trace(spans: Sequence[SpanRecord]) -> RagRequest | None:
    """The request a trace records, or None when no span of it describes a RAG request."""
    own = decode_trace(spans)
    inferred = next((found for normalize in INFERRING if (found := normalize(spans))), None)
    if own is None or inferred is None:
        return own or inferred
    return merge_explicit(own, inferred)
