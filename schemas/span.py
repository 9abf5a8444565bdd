"""A span as the collector's normalizers see it: flat, ids in hex, attributes as Python values.

The OTLP wire codec (midtrace.collector.intake.otlp) makes these from protobuf or OTLP/JSON; the
decoder (decode.py) and the normalizers read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from midtrace.schemas.frozen import stored_at_once

AttrValue = Any  # str | bool | int | float | bytes | list | dict | None


@stored_at_once
@dataclass(frozen=True)
class SpanRecord:
    """One span, flattened: ids as lower-case hex, attributes as Python values."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    parent_span_id: str | None = None
    kind: int = 0
    resource: dict[str, AttrValue] = field(default_factory=dict)
    scope: str | None = None
    status_code: int = 0
    dropped_attributes_count: int = 0
    # midtrace's attributes as decoded (and so checked) at receipt, kept so the normalizer
    # does not decode them a second time; set with ``remember_record``.
    record: Any = field(default=None, compare=False, repr=False)

    def remember_record(self, record: Any) -> None:
        object.__setattr__(self, "record", record)

    @property
    def service(self) -> str | None:
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else None
