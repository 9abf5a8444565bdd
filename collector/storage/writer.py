"""The one writer (the derive step): a bounded queue, group commit, an answer after commit.

Jobs come from the appender (collector/storage/appender.py: exports already acknowledged,
their rows derived here in order), from outcome posts and from recovery of the intake
log. Each submitted job gets a Future that completes once its rows are committed, so an
outcome post is answered only once it is applied (DuckDB syncs its WAL on commit); after
each group the writer reports the last export id it derived to ``on_derived``. When the
queue is full, ``submit`` raises QueueFull at once and the caller asks the client to retry.
A job that fails is retried alone so one bad job never fails the ones committed with it.

A caller may stop waiting (a gRPC deadline passes, a client hangs up) and cancel its Future:
the job is still committed, its answer dropped. Nothing a caller does can stop the thread;
``alive`` says whether it runs, and the health endpoint reports "not ready" when it does not.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from collections.abc import Callable
from dataclasses import dataclass

from midtrace.collector.storage.threads import STOP, settle, stop, take_group
from midtrace.collector.storage.database import first_line, is_fatal, is_storage_error
from midtrace.collector.storage.store import Store, WriteJob, WriteStats

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The writer's queue is full: retry shortly."""


@dataclass
class WriterCounters:
    jobs: int = 0
    spans: int = 0
    requests: int = 0
    commits: int = 0
    failed_jobs: int = 0
    normalize_errors: int = 0
    last_error: str | None = None


STORAGE_RETRY_SECONDS = 0.5


class Writer:
    def __init__(self, store: Store, max_queue: int = 256, max_batch_spans: int = 20_000,
                 on_derived: Callable[[int], None] | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None) -> None:
        self.store = store
        self.on_derived = on_derived
        self.on_fatal = on_fatal  # DuckDB invalidated the database: someone must reopen it
        self.max_batch_spans = max_batch_spans
        self.counters = WriterCounters()
        self._queue: queue.Queue[tuple[WriteJob, Future[WriteStats]] | object] = queue.Queue(max_queue)
        self._thread = threading.Thread(target=self._run, name="midtrace-writer", daemon=True)
        self._closed = False

    def start(self) -> Writer:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    @property
    def capacity(self) -> int:
        return self._queue.maxsize

    def submit(self, job: WriteJob) -> Future[WriteStats]:
        if self._closed:
            raise RuntimeError("writer is closed")
        fut: Future[WriteStats] = Future()
        try:
            self._queue.put_nowait((job, fut))
        except queue.Full:
            raise QueueFull(f"writer queue is full ({self._queue.maxsize} batches)") from None
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything submitted so far is committed."""
        self.submit_blocking(WriteJob()).result(timeout)

    def submit_blocking(self, job: WriteJob) -> Future[WriteStats]:
        fut: Future[WriteStats] = Future()
        self._queue.put((job, fut))
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then stop the thread and close the database."""
        if self._closed:
            return
        self._closed = True
        stop(self._queue, self._thread, timeout)
        self.store.close()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # pragma: no cover - a bug; make it visible, not silent
            self.counters.last_error = f"writer stopped: {e!r}"
            log.exception("the writer thread stopped")

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is STOP:
                return
            n_spans = 0

            def room(batch: list[tuple[WriteJob, Future[WriteStats]]]) -> bool:
                nonlocal n_spans
                n_spans += len(batch[-1][0].spans)
                return n_spans < self.max_batch_spans

            batch, stopping = take_group(self._queue, item, room)
            self._commit(batch)
            export_ids = [job.export_id for job, _ in batch  # type: ignore[misc]
                          if job.export_id is not None]
            if export_ids and self.on_derived is not None:
                self.on_derived(max(export_ids))
            if stopping:
                return

    def _commit(self, batch: list[tuple[WriteJob, Future[WriteStats]]]) -> None:
        started = time.perf_counter()
        try:
            stats = self.store.write(job for job, _ in batch)
        except Exception as e:
            log.warning("group commit of %d jobs failed (%s); retrying them one by one", len(batch), e)
            for job, fut in batch:
                self._commit_one(job, fut)
            return
        self._count(stats, len(batch))
        for _, fut in batch:
            settle(fut, stats)
        log.debug("committed %d jobs, %d spans in %.1f ms", len(batch), stats.spans,
                  (time.perf_counter() - started) * 1000)

    def _commit_one(self, job: WriteJob, fut: Future[WriteStats]) -> None:
        while True:
            try:
                stats = self.store.write([job])
                break
            except Exception as e:
                if is_fatal(e) and self.on_fatal is not None:
                    self.on_fatal(e)
                if job.export_id is not None and is_storage_error(e) and not self._closed:
                    # Acknowledged already: wait for the store to write again (a full disk,
                    # a reopen under way) rather than leave the export underived.
                    self.counters.last_error = str(e)
                    log.warning("derive waits for the store to write again: %s", first_line(e))
                    time.sleep(STORAGE_RETRY_SECONDS)
                    continue
                self._fail(job, fut, e)
                return
        self._count(stats, 1)
        settle(fut, stats)

    def _fail(self, job: WriteJob, fut: Future[WriteStats], e: Exception) -> None:
        self.counters.failed_jobs += 1
        self.counters.last_error = str(e)
        trace_ids = sorted({s.trace_id for s in job.spans})[:5]
        log.error("write failed for traces %s: %s", ", ".join(trace_ids) or "-", e)
        settle(fut, error=e)

    def _count(self, stats: WriteStats, jobs: int) -> None:
        c = self.counters
        c.jobs += jobs
        c.spans += stats.spans
        c.requests += stats.requests
        c.commits += 1
        c.normalize_errors += len(stats.normalize_errors)
