"""Acknowledge after a durable append; derive behind it.

The appender thread takes accepted exports, appends a group of them (up to ``max_group``,
whatever is waiting) to the intake log in one commit, answers each caller's Future with its
export id, and hands the spans to the writer (collector/storage/writer.py), which derives
their rows in order. ``Freshness`` tracks which acknowledged exports are derived: the query
API's ``fresh=1`` waits on it and ``/healthz`` reports its lag.

Backpressure: ``submit`` raises QueueFull (503 / UNAVAILABLE) when the appender's queue is
full or the writer already holds ``capacity`` exports waiting to be derived, so memory and
lag stay bounded and nothing that was acknowledged is dropped.

A store that cannot write (a full disk) is answered the same way, StoreUnavailable, and
reported by ``unwritable`` until an append succeeds again. When DuckDB has invalidated the
database (a checkpoint failed), the appender reopens the store (at most once a second) and
calls ``on_reopen`` (the collector derives what the log still holds).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from midtrace.collector.receive.bodies import REDACTED_PROTOBUF
from midtrace.collector.storage.intake_log import IntakeLog
from midtrace.collector.storage.raw_export import RawExport, compact
from midtrace.collector.storage.database import (
    CommittedThenInvalidated, first_line, is_fatal, is_unreachable)
from midtrace.collector.storage.store import WriteJob
from midtrace.collector.storage.threads import STOP, NamedThread, settle, stop, take_group
from midtrace.collector.storage.writer import QueueFull, Writer
from midtrace.schemas.span import SpanRecord

log = logging.getLogger(__name__)


class StoreUnavailable(QueueFull):
    """The store cannot write now (e.g. the disk is full): retry later."""


class ExportTooLarge(ValueError):
    """One export is more than may wait to be derived (under ``--memory-limit``): retrying
    cannot help (413 / RESOURCE_EXHAUSTED without a retry delay)."""


REOPEN_INTERVAL_SECONDS = 1.0
_WAKE = object()  # put on the queue by mark_broken


class Freshness:
    """Which acknowledged exports are derived yet."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._acked = 0
        self._derived = 0
        self._pending: deque[tuple[int, float]] = deque()  # (export id, acked at), in order
        self._waiting = 0  # readers in ``wait``

    def acked(self, export_ids: Sequence[int]) -> None:
        at = time.time()
        with self._cond:
            for i in export_ids:
                self._pending.append((i, at))
            if export_ids:
                self._acked = max(self._acked, max(export_ids))

    def derived(self, through: int) -> None:
        """Every export up to ``through`` has been derived (or failed to derive, logged)."""
        with self._cond:
            self._derived = max(self._derived, through)
            while self._pending and self._pending[0][0] <= self._derived:
                self._pending.popleft()
            self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait until everything acknowledged before this call is derived; False on timeout."""
        with self._cond:
            target = self._acked
            self._waiting += 1
            try:
                return self._cond.wait_for(lambda: self._derived >= target, timeout)
            finally:
                self._waiting -= 1

    def readers_waiting(self) -> bool:
        """Whether a reader waits in ``wait``: the writer then refreshes the evidence it
        owes at once (collector/storage/writer.py, EVIDENCE_SECONDS)."""
        return self._waiting > 0

    def lag(self) -> dict[str, float | int]:
        with self._cond:
            oldest = self._pending[0][1] if self._pending else None
            return {"pending_exports": len(self._pending),
                    "oldest_pending_seconds": round(time.time() - oldest, 3) if oldest else 0.0}


@dataclass
class _Item:
    export: RawExport
    spans: Sequence[SpanRecord]  # decoded at intake, or () when a worker decodes the export
    count: int
    future: Future[int]


class Appender:
    def __init__(self, intake_log: IntakeLog, writer: Writer, freshness: Freshness,
                 max_queue: int = 64, max_group: int = 16,
                 on_reopen: Callable[[], object] | None = None,
                 max_export_bytes: int | None = None) -> None:
        self.log = intake_log
        # Under --memory-limit, an export larger than may wait to be derived is refused: DuckDB
        # may have no room for it at all (writer.backlog_bytes).
        self.max_export_bytes = max_export_bytes
        self.on_reopen = on_reopen
        self.unwritable: str | None = None
        self._broken = False  # DuckDB invalidated the database: reopen before the next append
        self.reopens = 0
        self._last_attempt = 0.0
        self.writer = writer
        self.freshness = freshness
        self.max_group = max_group
        self.appended = 0
        self.commits = 0
        self.last_error: str | None = None
        self._queue: queue.Queue[_Item | object] = queue.Queue(max_queue)
        self._thread = NamedThread(target=self._run, name="midtrace-appender", daemon=True)
        self._closed = False

    def start(self) -> Appender:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def derives_raw(self) -> bool:
        """Whether exports are derived from their raw bytes (by workers), so intake need
        not hand the writer decoded spans."""
        return self.writer.pool is not None

    def submit(self, export: RawExport, spans: Sequence[SpanRecord], count: int) -> Future[int]:
        """Queue one export (``count`` spans, decoded in ``spans`` or not); its Future gives
        the export id once the append is committed."""
        if self._closed:
            raise RuntimeError("appender is closed")
        if self.max_export_bytes is not None and len(export.body) > self.max_export_bytes:
            raise ExportTooLarge(
                f"an export of {len(export.body) / 1e6:.1f} MB is more than this collector lets "
                f"wait to be derived under its --memory-limit ({self.max_export_bytes / 1e6:.1f} "
                "MB): send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) or raise "
                "--memory-limit")
        if self.unwritable and time.monotonic() - self._last_attempt < REOPEN_INTERVAL_SECONDS:
            raise StoreUnavailable(f"{self.unwritable}; retry shortly")
        if self.writer.depth >= self.writer.capacity:
            raise QueueFull(f"derivation is behind by {self.writer.depth} exports; retry shortly")
        if self.writer.backlog_bytes >= self.writer.max_backlog_bytes:
            raise QueueFull(f"derivation is behind by {self.writer.backlog_bytes >> 20} MB of "
                            "exports; retry shortly")
        fut: Future[int] = Future()
        try:
            self._queue.put_nowait(_Item(export, spans, count, fut))
        except queue.Full:
            raise QueueFull(f"intake queue is full ({self._queue.maxsize} exports)") from None
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Append what is queued, then stop (the writer is closed separately, after this)."""
        if self._closed:
            return
        self._closed = True
        stop(self._queue, self._thread, timeout)
        self.log.close()

    def _run(self) -> None:
        try:
            while True:
                try:  # while the store is broken, try to reopen it even if nothing arrives
                    item = self._queue.get(timeout=REOPEN_INTERVAL_SECONDS if self._broken else None)
                except queue.Empty:
                    self._try_reopen()
                    continue
                if item is STOP:
                    return
                group, stopping = take_group(self._queue, item, lambda g: len(g) < self.max_group)
                group = [i for i in group if i is not _WAKE]
                if group:
                    self._append(group)  # reopens a broken store first (_durable)
                elif self._broken:  # woken by mark_broken alone: reopen now
                    self._try_reopen()
                if stopping:
                    return
        except BaseException as e:  # pragma: no cover - a bug; make it visible, not silent
            self.last_error = f"appender stopped: {e!r}"
            log.exception("the appender thread stopped")

    def mark_broken(self, error: BaseException) -> None:
        """The writer found the database invalidated (or out of memory): reopen it, now if
        this thread is idle, else before the next append. The writer waits for it: the
        exports it derives were acknowledged, and no new one need arrive to wake this
        thread."""
        self.unwritable = f"the store cannot write: {first_line(error)}"
        if not self._broken:
            self._broken = True
            try:
                self._queue.put_nowait(_WAKE)
            except queue.Full:  # exports are waiting: the next one reopens it
                pass

    def _try_reopen(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            self._reopen()
        except Exception as e:
            log.warning("the store cannot be reopened yet: %s", e)
            return
        self.unwritable = None
        log.warning("the store writes again")

    def _reopen(self) -> None:
        """Reopen the store, point the log at the new connection, derive what it holds."""
        store = self.writer.store
        log.warning("reopening %s after DuckDB invalidated it", store.path)
        try:
            self.log.close()
        except Exception:  # the old connection is dead; closing it may say so
            pass
        next_id = self.log.next_id
        store.reopen()
        self.log = IntakeLog(store.conn, next_id=next_id)
        self._broken = False
        self.reopens += 1
        if self.on_reopen is not None:
            self.on_reopen()

    def _append(self, group: list[_Item]) -> None:
        self._last_attempt = time.monotonic()
        try:
            ids = self._durable(group)
        except CommittedThenInvalidated as e:
            # Durable: acknowledge it (a 503 would have the exporter send it again). Nothing
            # more is appended until the store is reopened, in a second or at the next append.
            ids = e.result
            self.last_error = str(e)
            self.unwritable = f"the store cannot write: {first_line(e)}"
            self._broken = True
            log.error("the append of %d exports is durable and acknowledged, but the "
                      "checkpoint after it failed: %s", len(group), first_line(e))
        except Exception as e:
            self.last_error = str(e)
            log.error("append of %d exports failed: %s", len(group), e)
            error = self._refusal(e)
            for item in group:
                settle(item.future, error=error)
            return
        else:
            if self.unwritable:
                log.warning("the store writes again")
            self.unwritable = None
        self.appended += len(group)
        self.commits += 1
        self.freshness.acked(ids)
        for export_id, item in zip(ids, group):
            settle(item.future, export_id)  # durable now: acknowledge
        for export_id, item in zip(ids, group):
            # In order, so the writer derives exports in the order they were acknowledged.
            self.writer.submit_blocking(self._job(export_id, item))

    def _durable(self, group: list[_Item]) -> list[int]:
        """Make the group's exports durable in one commit; their export ids, in order."""
        if self._broken:
            self._reopen()
        for item in group:  # kept compressed from here on: in the log, the backlog, to a worker
            item.export = compact(item.export)
        return self.log.append([item.export for item in group])

    def _refusal(self, error: Exception) -> Exception:
        """What a caller whose export could not be made durable is answered."""
        self.unwritable = f"the store cannot write: {first_line(error)}"
        self._broken = self._broken or is_fatal(error)
        return StoreUnavailable(f"{self.unwritable}; nothing of this export was kept, retry")

    def _job(self, export_id: int, item: _Item) -> WriteJob:
        """The writer's job for an export made durable under ``export_id``."""
        raw = None if item.export.content_type == REDACTED_PROTOBUF else item.export
        return WriteJob(spans=item.spans, export_id=export_id, raw=raw, count=item.count)


class SharedAppender(Appender):
    """The intake of a store many collectors share (ClickHouse, docs/clickhouse.md), which
    keeps no intake log of its own: the store's table of received spans is the log. A group of
    exports is acknowledged once its spans are inserted there (``store.store_spans``), and
    derived behind, as on DuckDB. A collector that stops after acknowledging leaves spans that
    no derivation has read; the next writer to open the store derives them
    (``ClickHouseStore.recover``). A group the server could not take (unreachable, timed out)
    is answered 503 / UNAVAILABLE, which exporters retry; any other failure as it is."""

    derives_raw = False  # intake hands over decoded spans: they are what the store keeps

    def __init__(self, writer: Writer, freshness: Freshness, max_queue: int = 64,
                 max_group: int = 16) -> None:
        super().__init__(None, writer, freshness, max_queue=max_queue,  # type: ignore[arg-type]
                         max_group=max_group)
        self._next_id = 1

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        self._closed = True
        stop(self._queue, self._thread, timeout)

    def _durable(self, group: list[_Item]) -> list[int]:
        self.writer.store.store_spans([item.spans for item in group])
        ids = list(range(self._next_id, self._next_id + len(group)))
        self._next_id += len(group)
        return ids

    def _refusal(self, error: Exception) -> Exception:
        if not is_unreachable(error):  # what was sent is wrong: retrying will not help
            return error
        self.unwritable = f"the store cannot be reached: {first_line(error)}"
        return StoreUnavailable(f"{self.unwritable}; nothing of this export was kept, retry")

    def _job(self, export_id: int, item: _Item) -> WriteJob:
        return WriteJob(spans=item.spans, export_id=export_id, count=item.count, stored=True)
