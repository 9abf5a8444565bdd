"""Received spans as they are kept in the ``spans`` table, and read back for rebuilding.

Large string values are not stored inline in a span's attribute JSON: each is replaced by a
reference to the ``texts`` table (keyed by the hex sha256 of the exact UTF-8 text), so a
chunk retrieved by ten thousand requests is stored once. A long string that contains other
large strings of the same trace (a prompt holding its retrieved documents) is kept as a
*skeleton*: literal pieces and references, in order. With ``keep_text=False`` every string
but the ids and labels ``redact.py`` lists is replaced by its content hash and length, and
nothing of it is stored.

Stored markers (a JSON object with one of these keys, in place of a string):

- ``{"$ref": "<sha256 hex>"}``: the whole string, from ``texts``;
- ``{"$skel": [piece, ...]}``: pieces joined in order; a piece is a string or a ``$ref``;
- ``{"$redacted": {"hash": "sha256:...", "chars": N}}``: a text dropped by ``--no-text``
  (with ``"json"``: what was kept of a JSON text's structure, see redact.py; with
  ``"bytes": true``: a bytes value, N its length in bytes).

Rows written before migration 003 have ``text_refs`` NULL and plain JSON; they are read as
they are, markers are only resolved in rows that have ``text_refs``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from midtrace.collector.intake.otlp import SpanRecord
from midtrace.collector.storage.redact import REDACTED, RedactedBytes, scrub
from midtrace.collector.storage.rows import SPANS, dumps
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.schemas.chunk_hash import RedactedText

MIN_REF_CHARS = 256  # shorter strings stay inline: a reference would not be smaller
MIN_SKELETON_CHARS = 1024  # only strings this long are searched for the trace's other texts
CACHE_LIMIT = 200_000

REF, SKELETON = "$ref", "$skel"

SPAN_COLUMNS = SPANS.append(pa.field("text_refs", pa.list_(pa.string())))


def exact_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SpanEncoder:
    """Turns span records into ``spans`` rows plus the texts they reference.

    Keeps a bounded cache of text -> hash and of hashes known to be stored, so a popular
    chunk is neither hashed nor inserted again on every request. ``committed`` must be
    called after the transaction commits (a rolled-back text is not known to be stored).
    """

    def __init__(self, keep_text: bool = True) -> None:
        self.keep_text = keep_text
        self._hash = TextHashes(exact_hash)
        self._stored: set[str] = set()

    def forget(self) -> None:
        """Drop the caches (after texts were deleted by someone else)."""
        self._hash.clear()
        self._stored.clear()

    def encode(self, spans: Sequence[SpanRecord], received_at: datetime,
               context: Mapping[str, Mapping[str, SpanRecord]] | None = None,
               ) -> tuple[pa.Table, dict[str, str]]:
        """The rows for ``spans`` and the texts (hash -> text) not yet known to be stored.

        ``context`` holds every known span of each trace (stored and new): their large
        strings are what a long string of the trace is cut into a skeleton by.
        """
        texts: dict[str, str] = {}
        attributes: list[str] = []
        refs_col: list[list[str]] = []
        candidates: dict[str, list[str]] = {}  # per trace, computed when first needed

        def of_trace(trace_id: str) -> list[str]:
            found = candidates.get(trace_id)
            if found is None:
                members = (context or {}).get(trace_id, {})
                found = candidates[trace_id] = _candidates(members.values())
            return found

        keep = self.keep_text
        for s in spans:
            refs: list[str] = []
            out: dict[str, Any] = {}
            for key, value in s.attributes.items():
                if not keep:
                    value = scrub(key, value)
                kind = type(value)
                if kind is str:
                    if len(value) < MIN_REF_CHARS:
                        out[key] = value
                    elif len(value) >= MIN_SKELETON_CHARS:
                        out[key] = self._long(value, of_trace(s.trace_id), refs, texts)
                    else:
                        out[key] = self._ref(value, refs, texts)
                elif kind is list and value and _has_long_string(value):
                    out[key] = [self._ref(v, refs, texts) if type(v) is str and len(v) >= MIN_REF_CHARS
                                else v for v in value]
                else:
                    out[key] = value
            attributes.append(dumps(out))
            refs_col.append(sorted(set(refs)))
        table = pa.table({
            "trace_id": [s.trace_id for s in spans], "span_id": [s.span_id for s in spans],
            "parent_span_id": [s.parent_span_id for s in spans], "name": [s.name for s in spans],
            "kind": [s.kind for s in spans], "start_ns": [s.start_ns for s in spans],
            "end_ns": [s.end_ns for s in spans], "service": [s.service for s in spans],
            "scope": [s.scope for s in spans], "status_code": [s.status_code for s in spans],
            "dropped_attributes_count": [s.dropped_attributes_count for s in spans],
            "attributes": attributes,
            "resource": [dumps(s.resource) for s in spans],
            "received_at": [received_at] * len(spans),
            "text_refs": refs_col,
        }, schema=SPAN_COLUMNS)
        return table, texts

    def unstored(self, texts: Mapping[str, str]) -> dict[str, str]:
        """Those of ``texts`` not known to be stored already."""
        stored = self._stored
        return {h: t for h, t in texts.items() if h not in stored}

    def committed(self, hashes: Iterable[str]) -> None:
        if len(self._stored) >= CACHE_LIMIT:
            self._stored.clear()
        self._stored.update(hashes)

    def _long(self, value: str, candidates: Sequence[str], refs: list[str],
              texts: dict[str, str]) -> Any:
        pieces = _skeleton(value, candidates) if candidates else None
        if pieces is None:
            return self._ref(value, refs, texts)
        return {SKELETON: [self._piece(p, refs, texts) for p in pieces]}

    def _piece(self, piece: str, refs: list[str], texts: dict[str, str]) -> Any:
        return piece if len(piece) < MIN_REF_CHARS else self._ref(piece, refs, texts)

    def _ref(self, text: str, refs: list[str], texts: dict[str, str]) -> dict[str, str]:
        h = self._hash(text)
        refs.append(h)
        if h not in self._stored:
            texts[h] = text
        return {REF: h}


def _has_long_string(values: list[Any]) -> bool:
    """Whether an attribute array holds a string worth a reference. Arrays are of one type
    as the specification has them; one that is not (an exporter may send anything) is
    looked at value by value."""
    if type(values[0]) is not str:
        if values[0] is not None:
            return False
        values = [v for v in values if v is not None]
        if not values or type(values[0]) is not str:
            return False
    try:
        return max(map(len, values)) >= MIN_REF_CHARS
    except TypeError:  # a None, or a value of another type, among the strings
        return any(type(v) is str and len(v) >= MIN_REF_CHARS for v in values)


def _candidates(spans: Iterable[SpanRecord]) -> list[str]:
    """Strings of a trace long enough to be referenced and short enough to sit in a prompt."""
    out: list[str] = []
    for s in spans:
        for value in s.attributes.values():
            if isinstance(value, str):
                if MIN_REF_CHARS <= len(value) < MIN_SKELETON_CHARS * 8:
                    out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, str) and len(v) >= MIN_REF_CHARS)
    return out


def _skeleton(text: str, candidates: Sequence[str]) -> list[str] | None:
    """``text`` cut at each occurrence of a candidate (non-overlapping, leftmost first)."""
    hits: list[tuple[int, int]] = []
    seen: set[str] = set()
    for cand in candidates:
        if cand in seen or len(cand) >= len(text):
            continue
        seen.add(cand)
        start = text.find(cand)
        while start >= 0:
            hits.append((start, start + len(cand)))
            start = text.find(cand, start + len(cand))
    if not hits:
        return None
    hits.sort()
    pieces: list[str] = []
    pos = 0
    for a, b in hits:
        if a < pos:
            continue
        if a > pos:
            pieces.append(text[pos:a])
        pieces.append(text[a:b])
        pos = b
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces


# --- reading back --------------------------------------------------------------------------

def resolve(value: Any, texts: Mapping[str, str]) -> Any:
    """A stored attribute value with its markers replaced by the texts they stand for."""
    if isinstance(value, dict):
        if len(value) == 1:
            if REF in value:
                return texts[value[REF]]
            if SKELETON in value:
                return "".join(p if isinstance(p, str) else texts[p[REF]] for p in value[SKELETON])
            if REDACTED in value:
                r = value[REDACTED]
                if r.get("bytes"):
                    return RedactedBytes(r["hash"], r["chars"])
                return RedactedText(r["hash"], r["chars"], resolve(r.get("json"), texts))
        return {k: resolve(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, texts) for v in value]
    return value


# the columns of a stored span as spans_of_traces.sql reads them, in span_from_row's order
STORED_SPAN_COLUMNS = ("trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns",
                       "end_ns", "service", "scope", "status_code", "dropped_attributes_count",
                       "attributes", "resource", "text_refs")


def span_from_row(row: Sequence[Any], texts: Mapping[str, str]) -> SpanRecord:
    """A stored span (columns as in spans_of_traces.sql) as a SpanRecord, texts restored."""
    (trace_id, span_id, parent, name, kind, start_ns, end_ns, _service, scope, status,
     dropped, attributes, resource, text_refs) = row
    attrs = json.loads(attributes)
    if text_refs is not None:  # written after migration 003: markers may be present
        attrs = {k: resolve(v, texts) for k, v in attrs.items()}
    return SpanRecord(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                      kind=kind, start_ns=start_ns, end_ns=end_ns, attributes=attrs,
                      resource=json.loads(resource), scope=scope, status_code=status,
                      dropped_attributes_count=dropped)
