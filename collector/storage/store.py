"""The DuckDB store: migrations, views, and the derive path (spans -> derived rows).

Spans reach ``write`` from the intake log (collector/storage/intake_log.py: acknowledged,
not yet derived) or straight from offline ingest. Every write is one transaction: the
received spans are kept as they came (so a newer
normalizer can rebuild the derived rows), then each touched trace is normalized again
from *all* of its stored spans, its derived rows replaced. That is what makes split
traces, any arrival order and retried exports come out the same. The intake log entries
the spans came from leave the log in the same transaction.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

try:  # pyarrow imports it when it converts values (collector/storage/rows.py): pay that at
    import pandas  # noqa: F401  start-up, not in the first write
except ModuleNotFoundError:  # kept out (collector/keep_out.py): pyarrow converts without it
    pass
import pyarrow as pa
import pyarrow.compute as pc

from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage.database import (
    RESTORE, CommittedThenInvalidated, StoreError, connect, describe, first_line, is_storage_error,
    is_unreachable, known_cause)
from midtrace.collector.storage.execute import run_script, transaction
from midtrace.collector.storage.derive import Prepared
from midtrace.collector.storage.raw_export import RawExport
from midtrace.collector.storage.known import KnownTraces
from midtrace.collector.storage.layout import check_layout, older_evidence
from midtrace.collector.storage.rows import Rows, graded_fields
from midtrace.collector.storage.spanstore import STORED_SPAN_COLUMNS, SpanEncoder, span_from_row
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.schemas.chunk_hash import content_hash
from midtrace.sql import sqlfiles
from midtrace.schemas.model import Outcome
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)

MACHINE_GRADERS = ("references", "judge")


@dataclass
class WriteJob:
    """What one export (or one outcomes post, or one ingested line) asks to store."""

    spans: Sequence[SpanRecord] = ()
    outcomes: Sequence[Outcome] = ()
    export_id: int | None = None  # the intake log entry these spans came from, if any
    raw: RawExport | None = None  # that entry as received, when a worker may derive it
    count: int = 0  # spans the entry holds (``spans`` may be left empty: see Writer)
    stored: bool = False  # the spans are in the store already (a shared store's intake
    # inserted them before acknowledging): derive them, do not insert them again

    @property
    def size(self) -> int:
        return len(self.spans) or self.count


@dataclass
class WriteStats:
    spans: int = 0
    traces: int = 0
    requests: int = 0
    outcomes: int = 0
    unchanged: int = 0  # machine grades left out as changing nothing (Store._changing)
    normalize_errors: list[str] = field(default_factory=list)
    failed_traces: list[str] = field(default_factory=list)  # "<trace id>: <error>" of each
    # trace a fault kept out of the store (collector/storage/writer.py, write_by_trace)

    def add(self, other: WriteStats) -> None:
        """Count ``other``'s work in these stats too."""
        self.spans += other.spans
        self.traces += other.traces
        self.requests += other.requests
        self.outcomes += other.outcomes
        self.unchanged += other.unchanged
        self.normalize_errors += other.normalize_errors
        self.failed_traces += other.failed_traces


def open_writable(target: Path | ClickHouseURL, keep_text: bool = True,
                  prices: Path | None = None, memory_limit: int | None = None) -> Any:
    """The store ``target`` names, open for writing: a DuckDB file (Store) or a ClickHouse
    store (ClickHouseStore), which take the same jobs. Nothing a stop left underived is
    derived here: callers that read run ``recover`` (commands/options.py, open_store)."""
    if isinstance(target, ClickHouseURL):
        from midtrace.collector.storage.clickhouse_store import ClickHouseStore

        return ClickHouseStore.open(target, keep_text=keep_text, prices=prices)
    return Store.open(target, keep_text=keep_text, prices=prices, memory_limit=memory_limit)


def open_read_only(path: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the store at ``path``, which must be up to date: a read-only
    open cannot migrate it or rebuild its request_evidence."""
    conn = connect(path, read_only=True)
    try:
        check_layout(conn, path, writable=False)
        row = conn.execute(sqlfiles.query("evidence_definition")).fetchone()
        if row is None or row[0] != _evidence_hash():
            raise older_evidence(path)
    except duckdb.Error as e:
        conn.close()
        raise describe(path, e) from e
    except StoreError:
        conn.close()
        raise
    return conn


def forbid_external_access(conn: duckdb.DuckDBPyConnection) -> None:
    """Turn off DuckDB's access to files and the network for the whole database."""
    conn.execute(sqlfiles.query("forbid_external_access"))


def migrate(conn: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply the numbered migrations not yet recorded, then (re)create the views."""
    conn.execute(sqlfiles.query("create_schema_migrations"))
    done = {v for (v,) in conn.execute(sqlfiles.query("applied_migrations")).fetchall()}
    applied = []
    for m in sqlfiles.migrations():
        if m.version in done:
            continue
        with transaction(conn):
            conn.execute(sqlfiles.render(m.path))
            conn.execute(sqlfiles.query("record_migration"),
                         {"version": m.version, "name": m.name, "applied_at": datetime.now(UTC)})
        applied.append(m.version)
    # request_evidence is created from the views before it and read by the views after it;
    # the views are stored as rendered with their defaults (schemas/sql/sqlfiles.py)
    views = sqlfiles.views()
    for v in views:
        if v.version < _EVIDENCE_INPUTS:
            conn.execute(sqlfiles.render_view(v))
    _ensure_evidence(conn)
    for v in views:
        if v.version >= _EVIDENCE_INPUTS:
            conn.execute(sqlfiles.render_view(v))
    return applied


# request_evidence is a table the store keeps equal to the view request_evidence_live
# (docs/metrics.md, "Why request_evidence is a table"): the rows of every trace written or
# graded are recomputed in the same transaction, and the whole table is rebuilt when the SQL
# it is derived from changes.
_EVIDENCE_INPUTS = 20  # views numbered below this define request_evidence_live


def _evidence_hash() -> str:
    # what the table is defined by (the stored views) and how its rows are computed (the
    # scoped renderings the rebuild and the refresh run)
    sql = [sqlfiles.render_view(v) for v in sqlfiles.views() if v.version < _EVIDENCE_INPUTS]
    sql += [sqlfiles.query("fill_request_evidence", scope=s) for s in ("request_range", "traces")]
    return hashlib.sha256("\n".join(sql).encode("utf-8")).hexdigest()


REBUILD_BATCH = 100_000  # requests per step of a rebuild: bounds its memory


def _ensure_evidence(conn: duckdb.DuckDBPyConnection) -> None:
    wanted = _evidence_hash()
    row = conn.execute(sqlfiles.query("evidence_definition")).fetchone()
    if row is not None and row[0] == wanted:
        return
    log.info("building request_evidence (new database or a changed definition)")
    with transaction(conn):
        conn.execute(sqlfiles.query("create_request_evidence"))
        lo, hi = conn.execute(sqlfiles.query("request_id_range")).fetchone()  # type: ignore[misc]
        if lo is not None:
            sql = sqlfiles.query("fill_request_evidence", scope="request_range")
            for start in range(lo, hi + 1, REBUILD_BATCH):
                conn.execute(sql, {"lo": start, "hi": start + REBUILD_BATCH - 1})
        conn.execute(sqlfiles.query("record_evidence_definition"),
                     {"definition_hash": wanted, "built_at": datetime.now(UTC)})


def store_prices(conn: duckdb.DuckDBPyConnection, prices: Path | None = None) -> None:
    """Replace the store's price table with the file's (docs/metrics.md, "Cost"): the cost
    views estimate what a request cost from the prices the store was last opened with."""
    from midtrace.prices import PriceError, load_prices, prices_path

    try:
        table = load_prices(prices_path(prices))
    except PriceError as e:
        raise StoreError(str(e)) from e
    data = pa.table({
        "model": pa.array(list(table), pa.string()),
        "input_per_mtok": pa.array([p.input_per_mtok for p in table.values()], pa.float64()),
        "output_per_mtok": pa.array([p.output_per_mtok for p in table.values()], pa.float64()),
        "example": pa.array([p.example for p in table.values()], pa.bool_()),
    })
    conn.register("_prices", data)
    try:
        with transaction(conn):
            run_script(conn, sqlfiles.query("replace_prices"))
    finally:
        conn.unregister("_prices")


def refresh_evidence(conn: duckdb.DuckDBPyConnection, trace_ids: Iterable[str],
                     request_ids: Iterable[int] | None = None) -> None:
    """Recompute the request_evidence rows of these traces (inside the caller's transaction).

    ``request_ids``: the traces' requests, when the caller has just given them their ids;
    otherwise they are looked up (a scan of every request's trace id: 14-16 ms for 500
    traces in a file of a million requests)."""
    ids = sorted(set(trace_ids))
    if not ids:
        return
    if request_ids is None:
        request_ids = [r for _, r in conn.execute(sqlfiles.query("request_ids_of_traces"),
                                                  {"trace_ids": ids}).fetchall()]
    else:
        request_ids = sorted(set(request_ids))
    if not request_ids:
        return
    scope = {"request_ids": request_ids, "trace_ids": ids}
    conn.execute(sqlfiles.query("delete_evidence_of_requests"), {"request_ids": request_ids})
    conn.execute(sqlfiles.query("fill_request_evidence", scope="traces"), scope)


def changing(outcomes: list[Outcome], current: dict[tuple[str, str], dict[str, Any]],
             keep_text: bool, stats: WriteStats) -> list[Outcome]:
    """The outcomes less the machine grades that change nothing: ``current`` holds what each
    (trace, machine grader) says now, merged (queries/machine_grades_of_traces.sql), and is
    updated with the grades kept."""
    kept = []
    for o in outcomes:
        if o.grader not in MACHINE_GRADERS or o.trace_id is None:
            kept.append(o)
            continue
        said = current.setdefault((o.trace_id, o.grader), {})
        sets = {k: v for k, v in graded_fields(o, keep_text).items() if v is not None}
        if all(said.get(k) == v for k, v in sets.items()):
            stats.unchanged += 1
            continue
        said.update(sets)
        kept.append(o)
    stats.outcomes = len(kept)
    return kept


def _renumbered(table: pa.Table, column: str, ids: dict[int, int]) -> pa.Table:
    """The rows whose ``column`` is a key of ``ids``, that column mapped through it."""
    if not table.num_rows:
        return table
    values = table.column(column).to_pylist()
    keep = [v in ids for v in values]
    if not all(keep):
        table = table.filter(pa.array(keep))
        values = [v for v, k in zip(values, keep) if k]
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index),
                            pa.array([ids[v] for v in values], pa.int64()))


def gathered(jobs: Iterable[WriteJob]) -> tuple[dict[tuple[str, str], SpanRecord], list[Outcome]]:
    """The jobs' spans, once each by trace and span id (the first copy), and their outcomes."""
    new_spans: dict[tuple[str, str], SpanRecord] = {}
    api_outcomes: list[Outcome] = []
    for job in jobs:
        for s in job.spans:
            new_spans.setdefault((s.trace_id, s.span_id), s)
        api_outcomes.extend(job.outcomes)
    return new_spans, api_outcomes


class Store:
    """The one writer of a midtrace database."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, keep_text: bool = True,
                 path: str | Path | None = None, prices: Path | None = None,
                 memory_limit: int | None = None) -> None:
        self.path = path
        self.memory_limit = memory_limit  # bytes of DuckDB's cache (database.writer_config)
        self.keep_text = keep_text
        self.prices = prices  # the price table file; None: MIDTRACE_PRICES, else the shipped one
        # Held by every write, and by ``reopen`` while it swaps the connection.
        self.lock = threading.RLock()
        self._external_access = True
        self._setup(conn)

    def _setup(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn
        keep_text = self.keep_text
        migrate(conn)
        store_prices(conn, self.prices)
        max_ids = conn.execute(sqlfiles.query("max_ids")).fetchone()
        assert max_ids is not None
        self._next_request_id = int(max_ids[0]) + 1
        self._next_outcome_id = int(max_ids[1]) + 1
        self.encoder = SpanEncoder(keep_text)
        self.known = KnownTraces(conn.execute(sqlfiles.query("trace_keys")).fetchnumpy()["k"])
        self._content_hash = TextHashes(content_hash)
        self._chunk_texts_stored: set[str] = set()  # content hashes known to be in chunk_texts
        # what apply(defer_evidence=True) stored and refresh_owed has not refreshed yet; what
        # a stop (or a reopen) left owed is found by _refresh_missing, and refreshed alike
        self._owed_traces: set[str] = set()
        self._owed_requests: set[int] = set()
        self._refresh_missing()

    def _refresh_missing(self) -> None:
        """Compute the request_evidence rows of the requests that have none: those a
        collector stored with their refresh deferred (``apply``) and stopped before it ran
        (killed, or its database invalidated). Every request has one row (the view's), so
        these are exactly the refreshes it owed. A failure is logged, never stops the open:
        those requests stay owed, for a writer to refresh or the next open to try again."""
        owed = self.conn.execute(sqlfiles.query("requests_without_evidence")).fetchall()
        if not owed:
            return
        log.info("computing request_evidence for %d request(s) a stop left without it", len(owed))
        self._owe({t for _, t in owed}, [r for r, _ in owed])
        try:
            self.refresh_owed()
        except duckdb.Error as e:  # still owed: a writer refreshes it (Writer._settle_evidence)
            log.error("request_evidence of %d request(s) not computed: %s", len(owed),
                      first_line(e))

    @classmethod
    def open(cls, path: str | Path, keep_text: bool = True, prices: Path | None = None,
             memory_limit: int | None = None) -> Store:
        """The store in the file at ``path`` (created if missing), brought up to date, with
        the price table ``prices`` (midtrace/prices.py: None is MIDTRACE_PRICES, else the
        shipped one) and DuckDB's cache held to ``memory_limit`` bytes (None: DuckDB's
        default); a file midtrace cannot use raises StoreError with a one-line message."""
        conn = connect(path, memory_limit=memory_limit)
        try:
            check_layout(conn, path, writable=True)
            return cls(conn, keep_text=keep_text, path=path, prices=prices,
                       memory_limit=memory_limit)
        except StoreError:
            conn.close()
            raise
        except duckdb.Error as e:
            conn.close()
            raise known_cause(path, e) or StoreError(
                f"{path} cannot be brought up to date ({first_line(e)}); its tables were "
                f"changed by hand or written by an unreleased midtrace: {RESTORE}") from e

    def forbid_external_access(self) -> None:
        forbid_external_access(self.conn)
        self._external_access = False

    def reopen(self) -> None:
        """Open the file again: DuckDB invalidates a database whose checkpoint failed (a full
        disk), and one out of memory may hold a transaction nothing ends; only a new instance
        can use it. Raises StoreError while it cannot."""
        if self.path is None:
            raise StoreError("this store was not opened from a file and cannot be reopened")
        with self.lock:
            try:
                self.conn.close()
            except duckdb.Error:
                pass
            self._setup(connect(self.path, memory_limit=self.memory_limit))
            if not self._external_access:
                forbid_external_access(self.conn)

    def close(self) -> None:
        """Fold the .wal back into the file, then close it: after a clean stop the .duckdb
        file alone holds everything, and a copy of it is a complete backup."""
        try:
            self.conn.checkpoint()
        except duckdb.Error as e:  # the .wal stays and is replayed when the file is next opened
            log.info("no checkpoint on closing the store: %s", first_line(e))
        self.conn.close()

    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        """Store the jobs in one transaction (all or nothing)."""
        with self.lock:
            return self._write(list(jobs))

    def _write(self, jobs: list[WriteJob]) -> WriteStats:
        received_at = datetime.now(UTC)
        new_spans, api_outcomes = gathered(jobs)
        stats = WriteStats(spans=len(new_spans), outcomes=len(api_outcomes))
        trace_ids = {t for t, _ in new_spans}
        conn = self.conn
        rows = Rows(hashes=self._content_hash)
        try:
            with transaction(conn):
                by_trace, texts = self._store_and_derive(new_spans, rows, received_at, stats)
                stats.traces = len(by_trace)
                if any(o.grader in MACHINE_GRADERS for o in api_outcomes):
                    api_outcomes = self._changing(api_outcomes, stats)
                for o in api_outcomes:
                    assert o.trace_id is not None
                    rows.add_outcome(self._take_outcome_id(), o.trace_id, "api", o, received_at,
                                     keep_text=self.keep_text)
                chunk_texts = self._new_chunk_texts(rows)
                self._append(rows)
                refresh_evidence(conn, set(by_trace) | {o.trace_id for o in api_outcomes
                                                        if o.trace_id is not None})
                export_ids = [job.export_id for job in jobs if job.export_id is not None]
                if export_ids:
                    conn.execute(sqlfiles.query("delete_intake_log"), {"export_ids": export_ids})
        except CommittedThenInvalidated as e:  # stored: the reopen starts its caches anew
            e.result = stats
            raise
        self.known.add(trace_ids)
        self.encoder.committed(texts)
        self._chunk_texts_stored.update(chunk_texts)
        return stats

    def _store_and_derive(self, new_spans: dict[tuple[str, str], SpanRecord], rows: Rows,
                          received_at: datetime, stats: WriteStats,
                          ) -> tuple[dict[str, dict[str, SpanRecord]], dict[str, str]]:
        """Store the new spans and derive their traces from all of their spans (inside the
        caller's transaction); returns the traces' spans and the texts inserted."""
        trace_ids = {t for t, _ in new_spans}
        # Only traces that may have stored spans are read back; the rest are new.
        maybe_stored = sorted(t for t in trace_ids if self.known.may_contain(t))
        by_trace = self.spans_of_traces(maybe_stored) if maybe_stored else {}
        for (trace_id, span_id), span in new_spans.items():
            by_trace.setdefault(trace_id, {}).setdefault(span_id, span)
        texts: dict[str, str] = {}
        if new_spans:
            span_rows, texts = self.encoder.encode(list(new_spans.values()), received_at, by_trace)
            self._insert("_spans", span_rows, sqlfiles.query("insert_spans"))
            self._insert_texts(texts)
        if by_trace:
            self._derive(by_trace, maybe_stored, rows, received_at, stats)
        return by_trace, texts

    def _insert_texts(self, texts: dict[str, str]) -> None:
        if texts:
            self._insert("_texts", pa.table({"text_hash": list(texts), "text": list(texts.values())}),
                         sqlfiles.query("insert_texts"))

    def apply(self, groups: Sequence[tuple[Prepared, Sequence[WriteJob]]],
              defer_evidence: bool = False) -> list[WriteStats]:
        """Store what workers prepared from these groups of jobs' raw exports (collector/
        storage/derive.py) in one transaction, and take the exports out of the intake log;
        one stats per group.

        Groups are stored in order, as if one commit each, but share the evidence refresh
        and the commit: refreshing request_evidence costs about 45 ms whatever the number of
        requests (its plan alone is most of that), so a collector that is behind stores the
        groups that are ready together. With ``defer_evidence`` the refresh is left owed, for
        ``refresh_owed`` to do for many commits at once (the writer, collector/storage/
        writer.py); until then the new requests have no request_evidence rows, and a store
        opened after a crash computes those (``_refresh_missing``).

        A trace that may have stored spans already (split across exports or groups, or sent
        again) is not taken from the worker as it is: its new spans are read back from the
        worker's rows and stored and derived as ``write`` does, with all of the trace's
        spans (so a prompt is kept as a skeleton of the texts stored before it). Request and
        outcome ids are given here, in order."""
        with self.lock:
            try:
                with transaction(self.conn):
                    out, request_ids = [], []
                    for prepared, jobs in groups:
                        out.append(self._apply(prepared, jobs, request_ids))
                    trace_ids = {t for prepared, _ in groups for t in prepared.trace_ids}
                    if not defer_evidence:
                        refresh_evidence(self.conn, trace_ids, request_ids)
                    export_ids = [job.export_id for _, jobs in groups for job in jobs
                                  if job.export_id is not None]
                    if export_ids:
                        self.conn.execute(sqlfiles.query("delete_intake_log"),
                                          {"export_ids": export_ids})
            except CommittedThenInvalidated as e:  # stored: the reopen starts its caches anew
                e.result = out
                if defer_evidence:  # owed until the reopen computes it (_refresh_missing)
                    self._owe(trace_ids, request_ids)
                raise
            except BaseException:
                # the caches below took in what the rolled-back groups stored: forget it
                self.forget_texts()
                raise
            if defer_evidence:
                self._owe(trace_ids, request_ids)
        return out

    def _owe(self, trace_ids: set[str], request_ids: list[int]) -> None:
        if request_ids:  # the traces only scope the requests' outcomes (refresh_evidence)
            self._owed_traces.update(trace_ids)
            self._owed_requests.update(request_ids)

    @property
    def owed_evidence(self) -> int:
        """How many stored requests wait for their request_evidence rows (``apply``)."""
        return len(self._owed_requests)

    def refresh_owed(self) -> int:
        """Compute the request_evidence rows ``apply`` left owed, in one transaction;
        returns how many requests that was. On an error nothing is refreshed and everything
        stays owed."""
        with self.lock:
            if not self._owed_requests:
                self._owed_traces.clear()
                return 0
            with transaction(self.conn):
                refresh_evidence(self.conn, self._owed_traces, self._owed_requests)
            done = len(self._owed_requests)
            self._owed_traces.clear()
            self._owed_requests.clear()
            return done

    def refresh_owed_by_trace(self) -> list[str]:
        """``refresh_owed`` one trace at a time, for when all at once failed for what the
        rows hold (not for want of the store): a trace whose rows cannot be evaluated keeps
        no request_evidence rows, is left out of the metrics and named in the result."""
        with self.lock:
            failed = []
            for trace_id in sorted(self._owed_traces):
                try:
                    with transaction(self.conn):
                        refresh_evidence(self.conn, [trace_id])
                except Exception as e:
                    if is_storage_error(e) or is_unreachable(e):
                        raise  # all still owed: tried again (done twice is the same)
                    log.error("request_evidence of trace %s not computed: %s", trace_id,
                              first_line(e))
                    failed.append(f"{trace_id}: {first_line(e)}")
            self._owed_traces.clear()
            self._owed_requests.clear()
            return failed

    def _apply(self, prepared: Prepared, jobs: Sequence[WriteJob], request_ids: list[int],
               ) -> WriteStats:
        """One group of ``apply``, inside its transaction; adds to ``request_ids`` the ids of
        every request it stores (each of its traces' requests: the others were deleted with
        the derived rows of the traces derived again). The traces, texts and chunk texts it
        stores count as stored from here on, for the groups after it."""
        stats = WriteStats(spans=prepared.spans, traces=len(prepared.trace_ids),
                           normalize_errors=list(prepared.normalize_errors))
        stored = {t for t in prepared.trace_ids if self.known.may_contain(t)}
        texts = self.encoder.unstored(prepared.texts)
        rows = Rows(hashes=self._content_hash)
        tables = dict(prepared.tables)
        span_rows = prepared.span_rows
        split: dict[tuple[str, str], SpanRecord] = {}
        if stored and span_rows is not None:
            in_stored = pc.is_in(span_rows.column("trace_id"), pa.array(sorted(stored)))
            for row in span_rows.filter(in_stored).select(list(STORED_SPAN_COLUMNS)).to_pylist():
                span = span_from_row([row[c] for c in STORED_SPAN_COLUMNS], prepared.texts)
                split.setdefault((span.trace_id, span.span_id), span)
            span_rows = span_rows.filter(pc.invert(in_stored))
            # only the texts the rows kept refer to: the split spans are encoded again below
            referenced = set(pc.list_flatten(span_rows.column("text_refs")).to_pylist())
            texts = {h: t for h, t in texts.items() if h in referenced}
        split_texts: dict[str, str] = {}
        if span_rows is not None and span_rows.num_rows:
            self._insert("_spans", span_rows, sqlfiles.query("insert_spans"))
        self._insert_texts(texts)
        if split:
            _, split_texts = self._store_and_derive(split, rows, prepared.received_at, stats)
        if tables:
            tables = self._number(tables, stored)
            stats.requests += tables["requests"].num_rows
            chunk_texts = tables["chunk_texts"]
            known = self._chunk_texts_stored
            if known and chunk_texts.num_rows:
                keep = [h not in known for h in chunk_texts.column("text_hash").to_pylist()]
                tables["chunk_texts"] = chunk_texts.filter(pa.array(keep))
            for table, data in tables.items():
                if data.num_rows:
                    self._insert("_rows", data, sqlfiles.query(f"insert_{table}"))
        chunk_texts_new = self._new_chunk_texts(rows)
        self._append(rows)
        request_ids += rows.requests["request_id"]
        if tables:
            request_ids += tables["requests"].column("request_id").to_pylist()
        self.known.add(prepared.trace_ids)
        self.encoder.committed(texts)
        self.encoder.committed(split_texts)
        self._chunk_texts_stored.update(chunk_texts_new)
        if tables:
            self._chunk_texts_stored.update(tables["chunk_texts"].column("text_hash").to_pylist())
        return stats

    def _number(self, tables: dict[str, pa.Table], stored: set[str]) -> dict[str, pa.Table]:
        """The prepared rows less those of ``stored`` traces, with the store's next request
        and outcome ids in place of the local ones."""
        requests = tables["requests"]
        traces = requests.column("trace_id").to_pylist()
        local = requests.column("request_id").to_pylist()
        ids: dict[int, int] = {}
        for i, t in zip(local, traces):
            if t not in stored:
                ids[i] = self._next_request_id
                self._next_request_id += 1
        out = dict(tables)
        for name in ("requests", "chunks", "placements", "answer_sources"):
            out[name] = _renumbered(tables[name], "request_id", ids)
        if stored:  # the texts of the chunks kept, not of those dropped with their traces
            texts = out["chunk_texts"]
            out["chunk_texts"] = texts.filter(pc.is_in(texts.column("text_hash"),
                                                       out["chunks"].column("text_hash")))
        outcomes = tables["outcomes"]
        if outcomes.num_rows:
            oids = {i: self._take_outcome_id() for i, t in
                    zip(outcomes.column("outcome_id").to_pylist(),
                        outcomes.column("trace_id").to_pylist()) if t not in stored}
            out["outcomes"] = _renumbered(outcomes, "outcome_id", oids)
        return out

    def forget_texts(self) -> None:
        """Forget which texts are stored (after texts were deleted)."""
        self.encoder.forget()
        self._chunk_texts_stored.clear()

    def _new_chunk_texts(self, rows: Rows) -> list[str]:
        """Leave out of ``rows`` the chunk texts an earlier commit stored; returns the rest."""
        if len(self._chunk_texts_stored) >= 200_000:
            self._chunk_texts_stored.clear()
        known = self._chunk_texts_stored
        rows.texts = {h: t for h, t in rows.texts.items() if h not in known}
        return list(rows.texts)

    def rederive(self, trace_ids: Sequence[str]) -> WriteStats:
        """Normalize the given stored traces again and replace their derived rows."""
        stats = WriteStats()
        trace_ids = list(trace_ids)
        with self.lock, transaction(self.conn):
            by_trace = self.spans_of_traces(trace_ids)
            stats.traces = len(by_trace)
            rows = Rows(hashes=self._content_hash)
            self._derive(by_trace, trace_ids, rows, datetime.now(UTC), stats)
            self._append(rows)
            refresh_evidence(self.conn, by_trace)
        return stats

    def spans_of_traces(self, trace_ids: Sequence[str]) -> dict[str, dict[str, SpanRecord]]:
        """The stored spans of the given traces (texts restored), by trace and span id."""
        if not trace_ids:
            return {}
        ids = {"trace_ids": sorted(set(trace_ids))}
        texts = dict(self.conn.execute(sqlfiles.query("texts_of_traces"), ids).fetchall())
        out: dict[str, dict[str, SpanRecord]] = {}
        for row in self.conn.execute(sqlfiles.query("spans_of_traces"), ids).fetchall():
            span = span_from_row(row, texts)
            out.setdefault(span.trace_id, {})[span.span_id] = span
        return out

    def _derive(self, by_trace: dict[str, dict[str, SpanRecord]], stored: Sequence[str],
                rows: Rows, received_at: datetime, stats: WriteStats) -> None:
        """Normalize each trace; the derived rows of the traces in ``stored`` (those that may
        have some already) are replaced."""
        conn = self.conn
        existing: dict[str, int] = {}
        prior_outcomes: dict[str, tuple[int, datetime]] = {}
        if stored:
            ids = {"trace_ids": list(stored)}
            existing = dict(conn.execute(sqlfiles.query("request_ids_of_traces"), ids).fetchall())
            prior_outcomes = {t: (oid, at) for t, oid, at in
                              conn.execute(sqlfiles.query("span_outcome_ids"), ids).fetchall()}
            if existing or prior_outcomes:
                run_script(conn, sqlfiles.query("delete_derived"), ids)
        for trace_id, spans in by_trace.items():
            ordered = sorted(spans.values(), key=lambda s: (s.start_ns, s.span_id))
            try:
                request = normalize_trace(ordered)
            except Exception as e:  # a bad trace is logged and skipped, never stops the writer
                log.warning("trace %s not normalized: %s", trace_id, e)
                stats.normalize_errors.append(f"trace {trace_id}: {e}")
                continue
            if request is None:
                continue
            request_id = existing.get(trace_id)
            if request_id is None:
                request_id = self._next_request_id
                self._next_request_id += 1
            rows.add_request(request_id, request, keep_text=self.keep_text)
            stats.requests += 1
            if request.record.outcome is not None:
                # A re-normalized trace keeps its outcome's id and arrival time: rebuilding
                # twice gives the same rows.
                oid, at = prior_outcomes.get(trace_id) or (self._take_outcome_id(), received_at)
                rows.add_outcome(oid, request.trace_id, "span", request.record.outcome, at,
                                 keep_text=self.keep_text)

    def _changing(self, outcomes: list[Outcome], stats: WriteStats) -> list[Outcome]:
        """The outcomes less the machine grades (references, judge) that would change nothing
        their kind already says: every field they set already holds that value. Re-running a
        grader then adds no rows (docs/grading.md, "Running it again"); a person's grade is
        always kept, as every post of it is."""
        ids = sorted({o.trace_id for o in outcomes if o.grader in MACHINE_GRADERS
                      and o.trace_id is not None})
        cursor = self.conn.execute(sqlfiles.query("machine_grades_of_traces"), {"trace_ids": ids})
        names = [d[0] for d in cursor.description]
        current: dict[tuple[str, str], dict[str, Any]] = {}
        for row in cursor.fetchall():
            values = dict(zip(names, row))
            current[(values.pop("trace_id"), values.pop("grader"))] = values
        return changing(outcomes, current, self.keep_text, stats)

    def _take_outcome_id(self) -> int:
        oid = self._next_outcome_id
        self._next_outcome_id += 1
        return oid

    def _insert(self, name: str, data: pa.Table, sql: str) -> None:
        self.conn.register(name, data)
        try:
            self.conn.execute(sql)
        finally:
            self.conn.unregister(name)

    def _append(self, rows: Rows) -> None:
        for table, data in rows.tables().items():
            if data.num_rows:
                self._insert("_rows", data, sqlfiles.query(f"insert_{table}"))

    def counts(self) -> dict[str, int]:
        cursor = self.conn.execute(sqlfiles.query("table_counts"))
        counts = cursor.fetchone()
        assert counts is not None
        return {d[0]: int(n) for d, n in zip(cursor.description, counts)}
