"""The write path on ClickHouse: any number of stateless writers sharing one ClickHouse
(docs/architecture.md, "Two engines", "The write path on ClickHouse").

A write inserts the received spans as they came (texts by reference, as on DuckDB:
spanstore.py), then derives every touched trace again from *all* of its spans read back from
ClickHouse, so a writer needs nothing but the shared tables, and inserts the derived rows as
a new version (migrations/001_core.sql): the rows first, the trace's ``derivations`` row
last, then each request's request_evidence row. Nothing is updated or deleted; the views
show each trace's newest version. Which version is newest does not depend on which writer
inserted last:

- ``version`` = the number of spans derived from (high 22 bits) and the time derived at (ms
  since 2024-01-01 UTC, low 42 bits). A trace split between writers converges: each writer
  inserts its spans before it reads the trace back, so of two writers the one that reads last
  sees both writes' spans, and a derivation that saw more spans wins whatever the clocks say.
  Two derivations of the same spans give the same rows.
- request ids are the trace id's hash (:func:`request_id`), the same on every writer; outcome
  ids are time-based (:class:`OutcomeIds`), ordering arrivals across writers.

ClickHouse is reached through a clickhouse.Connection (clickhouse-connect: a server, or chdb
in this process), which any number of stores and threads may share.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.clickhouse_erase import ErasureWatch
from midtrace.collector.storage.database import StoreError
from midtrace.collector.storage.rows import Rows
from midtrace.collector.storage.spanstore import STORED_SPAN_COLUMNS, SpanEncoder, span_from_row
from midtrace.collector.storage.store import (
    MACHINE_GRADERS, WriteJob, WriteStats, changing, gathered)
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import Outcome
from midtrace.schemas.span import SpanRecord
from midtrace.sql import sqlfiles

log = logging.getLogger(__name__)

ENGINE = clickhouse.ENGINE
REQUEST_ID_BITS = 53  # an id a browser's JSON keeps exact (2**53)
SPAN_COUNT_BITS = 22
DERIVED_AT_BITS = 42
VERSION_EPOCH_MS = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
OUTCOME_SEQ_BITS = 8
OUTCOME_WRITER_BITS = 12
CHUNK_TEXTS_KNOWN = 200_000


def request_id(trace_id: str) -> int:
    """The request id of a trace on ClickHouse: the first 53 bits of the BLAKE2b hash of its
    trace id, so every writer gives a trace the same id with no sequence to share."""
    digest = hashlib.blake2b(trace_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - REQUEST_ID_BITS)


def derivation_version(span_count: int, derived_at_ms: int) -> int:
    """The version of a derivation from ``span_count`` spans at ``derived_at_ms`` (ms since
    the epoch): more spans win, then the later derivation."""
    spans = min(span_count, (1 << SPAN_COUNT_BITS) - 1)
    at = max(0, derived_at_ms - VERSION_EPOCH_MS) & ((1 << DERIVED_AT_BITS) - 1)
    return (spans << DERIVED_AT_BITS) | at


class OutcomeIds:
    """Outcome ids that order arrivals across writers: ms since the epoch in the high bits,
    then a sequence within the ms (8 bits) and a random tag of the writer (12 bits). Ids of
    one writer only grow."""

    def __init__(self) -> None:
        self._writer = secrets.randbits(OUTCOME_WRITER_BITS)
        self._ms = 0
        self._seq = 0
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._ms:
                ms, self._seq = self._ms, self._seq + 1
                if self._seq >= 1 << OUTCOME_SEQ_BITS:
                    ms, self._seq = ms + 1, 0
            else:
                self._seq = 0
            self._ms = ms
            return ((ms << (OUTCOME_SEQ_BITS + OUTCOME_WRITER_BITS))
                    | (self._seq << OUTCOME_WRITER_BITS) | self._writer)


def span_outcome_id(derived_at_ms: int, request: int) -> int:
    """The id of an outcome sent as span attributes, derived at ``derived_at_ms``: the same
    for two derivations of the same version, so their rows are the same."""
    low = request & ((1 << (OUTCOME_SEQ_BITS + OUTCOME_WRITER_BITS)) - 1)
    return (derived_at_ms << (OUTCOME_SEQ_BITS + OUTCOME_WRITER_BITS)) | low


class ClickHouseStore:
    """A writer of a midtrace store on ClickHouse; any number may share one."""

    shared = True  # other collectors write the same store: no intake log of its own
    owed_evidence = 0  # every write computes its request_evidence (Store.apply can defer it)

    def __init__(self, conn: clickhouse.Connection, keep_text: bool = True,
                 prices: Path | None = None) -> None:
        self.keep_text = keep_text
        self.conn = conn
        with _schema_lock:
            clickhouse.create_schema(conn)
            _store_prices(conn, prices)
        self.encoder = SpanEncoder(keep_text)
        self._encoder_lock = threading.Lock()
        self.outcome_ids = OutcomeIds()
        self._content_hash = TextHashes(content_hash)
        self._chunk_texts_stored: set[str] = set()
        self._erasures = ErasureWatch()

    @classmethod
    def open(cls, url: ClickHouseURL, keep_text: bool = True,
             prices: Path | None = None) -> ClickHouseStore:
        """The store at ``url``, its tables and views brought up to date, with the price
        table ``prices`` (None: MIDTRACE_PRICES, else the shipped one)."""
        return cls(clickhouse.connect(url), keep_text=keep_text, prices=prices)

    def close(self) -> None:
        self.conn.close()

    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        """Store the jobs' spans and outcomes and derive the traces they touch."""
        self._forget_erased_texts()
        received_at = datetime.now(UTC)
        jobs = list(jobs)
        new_spans, api_outcomes = gathered(job for job in jobs if not job.stored)
        stored = {s.trace_id for job in jobs if job.stored for s in job.spans}
        stats = WriteStats(spans=len(new_spans) + sum(len(job.spans) for job in jobs if job.stored),
                           outcomes=len(api_outcomes))
        if new_spans:
            self._insert_spans(new_spans, received_at)
        rows = Rows(hashes=self._content_hash)
        trace_ids = sorted({t for t, _ in new_spans} | stored)
        derivations = self._derive(trace_ids, rows, stats)
        stats.traces = len(trace_ids)
        if any(o.grader in MACHINE_GRADERS for o in api_outcomes):
            api_outcomes = self._changing(api_outcomes, stats)
        for o in api_outcomes:
            assert o.trace_id is not None
            rows.add_outcome(self.outcome_ids.take(), o.trace_id, "api", o, received_at,
                             keep_text=self.keep_text)
        self._insert_rows(rows, derivations)
        self.refresh_evidence(set(trace_ids) | {o.trace_id for o in api_outcomes
                                                if o.trace_id is not None})
        return stats

    def store_spans(self, exports: Sequence[Sequence[SpanRecord]]) -> None:
        """Insert the spans of these exports, not yet derived: what a collector acknowledges
        (collector/storage/appender.py, SharedAppender). ``write`` with jobs marked ``stored``
        derives them; if nothing does, ``recover`` will."""
        self._forget_erased_texts()
        new_spans, _ = gathered(WriteJob(spans=spans) for spans in exports)
        if new_spans:
            self._insert_spans(new_spans, datetime.now(UTC))

    def rederive(self, trace_ids: Sequence[str]) -> WriteStats:
        """Normalize the given stored traces again and insert their rows as a new version."""
        self._forget_erased_texts()
        stats = WriteStats()
        ids = sorted(set(trace_ids))
        rows = Rows(hashes=self._content_hash)
        derivations = self._derive(ids, rows, stats)
        stats.traces = len(derivations)
        self._insert_rows(rows, derivations)
        self.refresh_evidence(ids)
        return stats

    def _forget_erased_texts(self) -> None:
        """Forget which texts this writer stored if traces were erased since (prune --trace-id,
        clickhouse_erase.py): their texts may be gone, and must be inserted again."""
        with self._encoder_lock:  # the intake thread and the writer thread both ask
            if self._erasures.erased_since(self.conn):
                self.encoder.forget()
                self._chunk_texts_stored.clear()

    def recover(self, batch: int = 1_000) -> WriteStats:
        """Derive every trace whose stored spans its newest derivation has not all read (queries/
        underived_traces.sql): what a writer that stopped after inserting spans left. Any
        writer can run it; the spans in ClickHouse are all it reads."""
        found = self.conn.query(sqlfiles.query("underived_traces", engine=ENGINE))
        ids = found.column(0).to_pylist()
        stats = WriteStats()
        for start in range(0, len(ids), batch):
            stats.add(self.rederive(ids[start:start + batch]))
        return stats

    def spans_of_traces(self, trace_ids: Sequence[str]) -> dict[str, dict[str, SpanRecord]]:
        """The stored spans of the given traces (texts restored), by trace and span id; a span
        stored twice counts once, its first copy."""
        if not trace_ids:
            return {}
        ids = {"trace_ids": sorted(set(trace_ids))}
        # the spans first: a writer inserts a span's texts before the span, so every text a
        # span read here refers to is there when the texts are read
        table = self.conn.query(sqlfiles.query("spans_of_traces", engine=ENGINE), ids)
        found = self.conn.query(sqlfiles.query("texts_of_traces", engine=ENGINE), ids)
        texts = dict(zip(found.column(0).to_pylist(), found.column(1).to_pylist()))
        columns = [table.column(c).to_pylist() for c in STORED_SPAN_COLUMNS]
        out: dict[str, dict[str, SpanRecord]] = {}
        for row in zip(*columns):
            by_id = out.setdefault(row[0], {})
            if row[1] not in by_id:
                by_id[row[1]] = span_from_row(row, texts)
        return out

    def refresh_evidence(self, trace_ids: Iterable[str]) -> None:
        """Append the request_evidence rows of these traces' current requests, each with the
        version read before it is computed (queries/create_request_evidence.sql), from copies
        of their rows made under a scope of this refresh's own
        (queries/create_evidence_scopes.sql)."""
        ids = sorted(set(trace_ids))
        if not ids:
            return
        found = self.conn.query(sqlfiles.query("request_ids_of_traces", engine=ENGINE),
                                {"trace_ids": ids})
        if not found.num_rows:
            return
        versions = [int.from_bytes(v, "little") if isinstance(v, bytes) else int(v)
                    for v in found.column("version").to_pylist()]
        params = {"trace_ids": found.column("trace_id").to_pylist(),
                  "request_ids": found.column("request_id").to_pylist(),
                  "versions": versions, "scope": str(uuid.uuid4())}
        clickhouse.run(self.conn, clickhouse.copy_evidence_scope(), params)
        clickhouse.run(self.conn,
                       sqlfiles.query("fill_request_evidence", engine=ENGINE, scope="traces"),
                       params)

    def _insert_spans(self, new_spans: dict[tuple[str, str], SpanRecord],
                      received_at: datetime) -> None:
        context: dict[str, dict[str, SpanRecord]] = {}
        for (trace_id, span_id), span in new_spans.items():
            context.setdefault(trace_id, {})[span_id] = span
        with self._encoder_lock:  # the intake thread and an offline write may both insert
            span_rows, texts = self.encoder.encode(list(new_spans.values()), received_at, context)
            # the texts first: a span is never read before what it refers to
            self.conn.insert("texts", pa.table({"text_hash": list(texts),
                                                "text": list(texts.values())}))
            self.conn.insert("spans", span_rows)
            self.encoder.committed(texts)

    def _derive(self, trace_ids: Sequence[str], rows: Rows,
                stats: WriteStats) -> dict[int, tuple[str, datetime, int, bool]]:
        """Normalize each trace from all of its stored spans into ``rows``; returns each
        derivation by request id: trace id, time, version, whether it gave a request."""
        derived_at_ms = time.time_ns() // 1_000_000
        derived_at = datetime.fromtimestamp(derived_at_ms / 1000, UTC)
        out: dict[int, tuple[str, datetime, int, bool]] = {}
        for trace_id, spans in self.spans_of_traces(trace_ids).items():
            ordered = sorted(spans.values(), key=lambda s: (s.start_ns, s.span_id))
            rid = request_id(trace_id)
            version = derivation_version(len(ordered), derived_at_ms)
            first = datetime.fromtimestamp(ordered[0].start_ns / 1e9, UTC)
            try:
                request = normalize_trace(ordered)
            except Exception as e:  # a bad trace is logged and skipped, never stops the writer
                log.warning("trace %s not normalized: %s", trace_id, e)
                stats.normalize_errors.append(f"trace {trace_id}: {e}")
                request = None
            if request is None:
                out[rid] = (trace_id, first, version, False)
                continue
            rows.add_request(rid, request, keep_text=self.keep_text)
            stats.requests += 1
            out[rid] = (trace_id, request.time, version, True)
            if request.record.outcome is not None:
                rows.add_outcome(span_outcome_id(derived_at_ms, rid), trace_id, "span",
                                 request.record.outcome, derived_at, keep_text=self.keep_text)
        return out

    def _insert_rows(self, rows: Rows,
                     derivations: Mapping[int, tuple[str, datetime, int, bool]]) -> None:
        """Insert the rows of these derivations and the outcomes; the derivations' rows last.
        A posted outcome has version 0 (always read), a span's its derivation's."""
        tables = rows.tables()
        self._insert_chunk_texts(tables["chunk_texts"])
        times = {rid: d[1] for rid, d in derivations.items()}
        versions = {rid: d[2] for rid, d in derivations.items()}
        for name in ("chunks", "placements", "answer_sources", "requests"):
            data = tables[name]
            if not data.num_rows:
                continue
            rids = data.column("request_id").to_pylist()
            if name == "answer_sources":
                data = data.append_column("seq", pa.array(_sequence(rids), pa.int32()))
            if name != "requests":
                data = data.append_column("time", pa.array([times[r] for r in rids],
                                                           pa.timestamp("us", tz="UTC")))
            data = data.append_column("version", pa.array([versions[r] for r in rids],
                                                          pa.uint64()))
            self.conn.insert(f"{name}_versions", data)
        outcomes = tables["outcomes"]
        if outcomes.num_rows:
            by_trace = {d[0]: d[2] for d in derivations.values()}
            version = [0 if origin == "api" else by_trace[trace]
                       for origin, trace in zip(outcomes.column("origin").to_pylist(),
                                                outcomes.column("trace_id").to_pylist())]
            for column in ("decisive_chunk_ids", "required_constraints", "recalled_constraints"):
                outcomes = outcomes.append_column(f"{column}_set",
                                                  outcomes.column(column).is_valid())
            self.conn.insert("outcomes_versions",
                             outcomes.append_column("version", pa.array(version, pa.uint64())))
        if derivations:
            self.conn.insert("derivations", pa.table({
                "request_id": pa.array(list(derivations), pa.int64()),
                "trace_id": pa.array([d[0] for d in derivations.values()], pa.string()),
                "time": pa.array([d[1] for d in derivations.values()],
                                 pa.timestamp("us", tz="UTC")),
                "version": pa.array([d[2] for d in derivations.values()], pa.uint64()),
                "has_request": pa.array([d[3] for d in derivations.values()], pa.bool_()),
            }))

    def _insert_chunk_texts(self, texts: pa.Table) -> None:
        known = self._chunk_texts_stored
        if len(known) >= CHUNK_TEXTS_KNOWN:
            known.clear()
        hashes = texts.column("text_hash").to_pylist()
        fresh = [h not in known for h in hashes]
        self.conn.insert("chunk_texts", texts.filter(pa.array(fresh, pa.bool_())))
        known.update(hashes)

    def _changing(self, outcomes: list[Outcome], stats: WriteStats) -> list[Outcome]:
        ids = sorted({o.trace_id for o in outcomes if o.grader in MACHINE_GRADERS
                      and o.trace_id is not None})
        found = self.conn.query(sqlfiles.query("machine_grades_of_traces", engine=ENGINE),
                                {"trace_ids": ids})
        current: dict[tuple[str, str], dict[str, Any]] = {}
        for values in found.to_pylist():
            current[(values.pop("trace_id"), values.pop("grader"))] = values
        return changing(outcomes, current, self.keep_text, stats)

    def counts(self) -> dict[str, int]:
        found = self.conn.query(sqlfiles.query("table_counts", engine=ENGINE))
        return {name: int(found.column(name)[0].as_py()) for name in found.column_names}


def _sequence(request_ids: Sequence[int]) -> list[int]:
    """Each row's number among the rows of its request, in order."""
    seen: dict[int, int] = {}
    out = []
    for r in request_ids:
        n = seen.get(r, 0)
        out.append(n)
        seen[r] = n + 1
    return out


_schema_lock = threading.Lock()  # stores opened in one process create the schema in turn


def _store_prices(conn: clickhouse.Connection, prices: Path | None) -> None:
    """Replace the store's price table with the file's, as the DuckDB store does on open
    (store.store_prices; docs/metrics.md, "Cost")."""
    from midtrace.prices import PriceError, load_prices, prices_path

    try:
        table = load_prices(prices_path(prices))
    except PriceError as e:
        raise StoreError(str(e)) from e
    clickhouse.run(conn, sqlfiles.query("clear_prices", engine=ENGINE))
    conn.insert("prices", pa.table({
        "model": pa.array(list(table), pa.string()),
        "input_per_mtok": pa.array([p.input_per_mtok for p in table.values()], pa.float64()),
        "output_per_mtok": pa.array([p.output_per_mtok for p in table.values()], pa.float64()),
        "example": pa.array([p.example for p in table.values()], pa.bool_()),
    }))
