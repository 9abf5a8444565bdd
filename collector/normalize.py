"""Spans of one trace -> one RagRequest, whichever conventions the app used.

midtrace's own attributes are read first; conventions other instrumentations send
(OpenInference, OTel GenAI) are inferred where present. Explicit midtrace attributes win
over inferred values field by field.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from midtrace.collector.genai import normalize_genai
from midtrace.collector.merge_explicit import merge_explicit
from midtrace.collector.openinference import normalize_openinference
from midtrace.schemas.decode import decode_trace
from midtrace.schemas.model import RagRequest
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)


def normalize_trace(spans: Sequence[SpanRecord]) -> RagRequest | None:
    """The request a trace records, or None when no span of it describes a RAG request."""
    own = decode_trace(spans)
    inferred = normalize_openinference(spans) or normalize_genai(spans)
    if own is None or inferred is None:
        return own or inferred
    return merge_explicit(own, inferred)
