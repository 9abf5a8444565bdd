"""One GenAI event (a log record, or an event on a span) as a span record: a child of the LLM
span it belongs to, named by the event, its attributes the event's own plus its body as JSON
under ``gen_ai.event.body`` and its place under ``gen_ai.event.index``. Its id is a hash of
what it holds, so the same event received twice is one span record. The GenAI normalizer
reads these children as the call's messages (collector/normalize/genai.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from midtrace.schemas.span import AttrValue, SpanRecord

EVENT_PREFIX = "gen_ai."
BODY = "gen_ai.event.body"
INDEX = "gen_ai.event.index"


def is_genai_event(name: object) -> bool:
    return isinstance(name, str) and name.startswith(EVENT_PREFIX)


def event_child(trace_id: str, parent_span_id: str, name: str, time_ns: int,
                attributes: dict[str, AttrValue], body: Any, index: int,
                resource: dict[str, AttrValue], scope: str | None) -> SpanRecord:
    attrs = dict(attributes)
    attrs[BODY] = json.dumps(body, ensure_ascii=False, default=str)
    attrs[INDEX] = index
    key = f"{trace_id}/{parent_span_id}/{name}/{time_ns}/{index}/{attrs[BODY]}"
    return SpanRecord(
        trace_id=trace_id,
        span_id=hashlib.sha256(key.encode()).hexdigest()[:16],
        parent_span_id=parent_span_id,
        name=name,
        start_ns=time_ns,
        end_ns=time_ns,
        attributes=attrs,
        resource=resource,
        scope=scope,
    )
