"""Derivation that needs no database: exports -> span rows, texts and derived rows.

``prepare`` is the part of the derive step that costs CPU and reads nothing stored: decoding
the intake log's raw exports, normalizing each trace, building the Arrow rows of its request
and encoding its spans for the ``spans`` table. The writer runs it in worker processes
(``DerivePool``), as many as the machine has cores to spare, and applies the results in
acknowledgement order on its own connection (Store.apply). A trace that may already have
stored spans (split across exports, or sent again) is stored and derived again by the writer
from all of its spans, as before.

Request and outcome ids in a ``Prepared`` are local (0, 1, ...): only the writer knows the
next free id, and it renumbers them when it applies the rows.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import sys
import threading
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.receive.bodies import (
    REDACTED_PROTOBUF, check_spans, decompress, parse_traces)
from midtrace.collector.storage.intake_log import RawExport
from midtrace.collector.storage.rows import Rows
from midtrace.collector.storage.spanstore import SpanEncoder, resolve
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """What ``prepare`` made of a group of exports, ready for Store.apply."""

    received_at: datetime
    spans: int = 0
    trace_ids: list[str] = field(default_factory=list)
    span_rows: pa.Table | None = None
    texts: dict[str, str] = field(default_factory=dict)  # hash -> text the span rows reference
    tables: dict[str, pa.Table] = field(default_factory=dict)  # Rows.tables(), local ids
    normalize_errors: list[str] = field(default_factory=list)


def spans_of_raw(export: RawExport, max_bytes: int = 1 << 31) -> list[SpanRecord]:
    """The spans an intake log entry holds that pass the intake checks (as they did then)."""
    body = decompress(export.body, export.content_encoding, max_bytes)
    pairs = parse_traces(body, export.content_type)
    if export.content_type == REDACTED_PROTOBUF:  # texts read as what they stand for
        pairs = [(None if span is None else dataclasses.replace(
                      span, attributes={k: resolve(v, {}) for k, v in span.attributes.items()}),
                  error) for span, error in pairs]
    return check_spans(pairs).accepted


# One of each per process: a worker keeps its caches (hashes of popular chunks) between calls.
_encoders: dict[bool, SpanEncoder] = {}
_content_hash = TextHashes(content_hash)


def prepare(spans: Sequence[SpanRecord], keep_text: bool,
            received_at: datetime | None = None) -> Prepared:
    """Span rows, texts and derived rows (local ids) for these spans, trace by trace."""
    received_at = received_at or datetime.now(UTC)
    by_trace: dict[str, dict[str, SpanRecord]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, {}).setdefault(s.span_id, s)
    unique = [s for members in by_trace.values() for s in members.values()]
    out = Prepared(received_at=received_at, spans=len(unique), trace_ids=list(by_trace))
    if not unique:
        return out
    encoder = _encoders.setdefault(keep_text, SpanEncoder(keep_text))
    out.span_rows, out.texts = encoder.encode(unique, received_at, by_trace)
    rows = Rows(hashes=_content_hash)
    local = 0
    for trace_id, members in by_trace.items():
        ordered = sorted(members.values(), key=lambda s: (s.start_ns, s.span_id))
        try:
            request = normalize_trace(ordered)
        except Exception as e:  # a bad trace is logged and skipped, never stops the writer
            out.normalize_errors.append(f"trace {trace_id}: {e}")
            continue
        if request is None:
            continue
        rows.add_request(local, request, keep_text=keep_text)
        if request.record.outcome is not None:
            rows.add_outcome(local, trace_id, "span", request.record.outcome, received_at,
                             keep_text=keep_text)
        local += 1
    out.tables = rows.tables()
    return out


def prepare_exports(exports: Sequence[RawExport], keep_text: bool) -> Prepared:
    """``prepare`` for intake log entries: what a worker process runs."""
    spans: list[SpanRecord] = []
    for export in exports:
        spans.extend(spans_of_raw(export))
    return prepare(spans, keep_text)


def _warm() -> None:
    """Import what ``prepare`` needs when the worker starts, not on its first export."""
    import midtrace.collector.normalize.pipeline  # noqa: F401


PARENT_POLL_SECONDS = 1.0


def _start_worker() -> None:
    """A worker's start: its imports, and a watch on its collector. A collector killed
    outright (kill -9, the OOM killer) cannot stop its workers; each leaves once it finds
    itself orphaned instead of waiting forever for work."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="midtrace-derive-parent-watch", daemon=True).start()
    _warm()


def default_workers() -> int:
    """Derive workers when none are asked for: every core but the one intake runs on."""
    return max(1, (os.cpu_count() or 1) - 1)


@contextmanager
def _without_main_module() -> Iterator[None]:
    """A spawned child imports its parent's ``__main__`` again, to unpickle what it defines.
    A derive worker needs nothing from it, and a ``__main__`` that is a script (a notebook,
    an app run by a test harness) must not run again in every worker: hide it while the
    workers start."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class DerivePool:
    """Worker processes that run ``prepare_exports``. Started with ``spawn``: the collector
    runs threads (and DuckDB's), which a forked child must not inherit."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker)
        # Start them all now (the first export should not wait for a worker's imports).
        with _without_main_module():
            for f in [self._executor.submit(_warm) for _ in range(workers)]:
                f.result()

    def submit(self, exports: Sequence[RawExport], keep_text: bool) -> Future[Prepared]:
        return self._executor.submit(prepare_exports, list(exports), keep_text)

    def submit_spans(self, spans: Sequence[SpanRecord], keep_text: bool) -> Future[Prepared]:
        """``prepare`` for spans intake decoded already (OTLP/JSON, ``--no-text``, GenAI
        events); a worker decodes their midtrace attributes itself."""
        return self._executor.submit(prepare, list(spans), keep_text)

    def close(self, wait: bool = True) -> None:
        """Stop the workers; ``wait=False`` for a pool a dead worker broke (its executor has
        killed the others already, and waiting on it can hang)."""
        self._executor.shutdown(wait=wait, cancel_futures=True)
