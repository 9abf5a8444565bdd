"""The one writer (the derive step): a bounded queue, group commit, an answer after commit.

Jobs come from the appender (collector/storage/appender.py: exports already acknowledged,
their rows derived here in order), from outcome posts and from recovery of the intake
log. Each submitted job gets a Future that completes once its rows are committed, so an
outcome post is answered only once it is applied (DuckDB syncs its WAL on commit); after
each group the writer reports the last export id it derived to ``on_derived``. When the
queue is full, ``submit`` raises QueueFull at once and the caller asks the client to retry.
A job that fails is retried alone so one bad job never fails the ones committed with it.

With a DerivePool (collector/storage/derive.py) the derive step runs in two threads and the
pool's processes: the dispatch thread takes a group of acknowledged exports and hands their
raw bytes to a worker, which decodes, normalizes and builds the rows; the apply thread
stores each group's rows in the order the groups were taken (Store.apply). A group that
holds outcomes, or whose worker fails, is derived in the apply thread from the spans in
hand, as without a pool. An export that intake decoded (OTLP/JSON, a ``--no-text`` export,
GenAI events) goes to a worker as those spans; a protobuf export as its raw bytes. While
the apply thread waits on a group no worker has finished, it takes the next group, and if
no worker has started that one either, derives it itself, as a worker would
(``_derive_next_here``): the collector process has CPU to spare while its workers are busy
(bench/ingest.py on 2 cores: 5-12% more requests derived per second). It does not while
exports are arriving (``intake_busy``): then the process's CPU is intake's, whose checks
(midtrace's own attributes) hold the same GIL. For the same reason, while exports arrive,
it holds a worker's finished group back for a while before storing it
(``_yield_to_intake``), and the workers go on with the groups behind. The other way round,
when the workers are ahead of the apply thread, the groups whose rows are ready are stored
together in one commit (``_ready_behind``): a commit costs tens of milliseconds however few
requests it holds.

The request_evidence rows of what workers derived are not refreshed in each commit but at
most every EVIDENCE_SECONDS, for every commit since (Store.refresh_owed): the refresh costs
about 45 ms whatever it covers, and a collector below its limit commits each export on its
own (sampled at a steady 400 requests/s, the refresh in each commit was 17% of the
collector's busy time). It runs at once when a reader waits for fresh rows (``wants_fresh``),
before any other job (outcomes, a flush) and at stop. ``on_derived`` is told an export is
derived only once its requests' evidence is in.

A caller may stop waiting (a gRPC deadline passes, a client hangs up) and cancel its Future:
the job is still committed, its answer dropped. Nothing a caller does can stop the thread;
``alive`` says whether it runs, and the health endpoint reports "not ready" when it does not.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from midtrace.collector.storage.threads import (
    STOP, NamedThread, give_back_memory, settle, stop, take_group)
from midtrace.collector.storage.database import (
    CommittedThenInvalidated, first_line, is_fatal, is_storage_error, is_unreachable)
from midtrace.collector.storage.derive import (DerivePool, Prepared, prepare, prepare_exports,
                                                spans_of_raw)
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
    failed_traces: int = 0  # traces a fault in their data kept out, their exports' others kept
    worker_jobs: int = 0  # jobs whose rows a derive worker made
    ahead_jobs: int = 0  # jobs the apply thread derived itself while the workers were busy
    evidence_refreshes: int = 0  # refreshes of the request_evidence rows commits left owed
    normalize_errors: int = 0
    last_error: str | None = None


STORAGE_RETRY_SECONDS = 0.5
POOL_BATCH_SPANS = 1_500  # spans per worker task: small enough to keep the workers and the
# apply thread busy at once and a worker's peak memory low (4,000 spans: about 110 MB more
# per worker and collector, bench/ingest.py), large enough to share one commit among many
# exports

MAX_BACKLOG_BYTES = 96 * 1024 * 1024  # raw exports waiting to be derived, at most: what
# bounds the collector's memory when exports are large (a batch of long prompts is megabytes)


def backlog_bytes(memory_limit: int | None) -> int:
    """The bound on raw exports waiting to be derived, under DuckDB's ``memory_limit``: they
    wait in the intake log, whose blocks stay in DuckDB's memory until derived, so at most
    three eighths of it. Held to 64 MiB with 96 MB let wait, DuckDB could not checkpoint;
    with a half or three eighths of it, 20,000 OpenInference requests were derived in 39 s,
    with a quarter in 50 s (one run each, none failed)."""
    if memory_limit is None:
        return MAX_BACKLOG_BYTES
    return min(MAX_BACKLOG_BYTES, memory_limit * 3 // 8)


EVIDENCE_SECONDS = 1.0  # the longest a stored request waits for its request_evidence rows
# (and so to count in the metrics) while no reader asks for fresh rows
WAKE_SECONDS = 0.02  # how often a waiting writer thread looks whether a reader wants fresh
# rows (or, in the apply thread, whether owed evidence is due)
MAX_OWED_REQUESTS = 20_000  # refreshed at once past this many, to bound one refresh
LINGER_SECONDS = 0.25  # how long a small group of exports waits for more (Writer._linger)
MERGE_SPANS = 6_000  # the groups whose rows are ready are stored in one commit while they
# hold fewer spans than this: a commit costs tens of milliseconds however few requests it holds
AHEAD_POLL_SECONDS = 0.01  # while a worker's group is not ready: how often to look behind it
YIELD_SECONDS = 2.0  # the longest the apply thread holds a group back while exports arrive
# (Writer._yield_to_intake): about a burst of 5,000 requests, and the most it adds to the lag
YIELD_GROUPS = 4  # groups the dispatch thread takes ahead of the apply thread, beyond one a
# worker: room for the workers to go on while the apply thread yields to intake
MAX_POOL_RESTARTS = 3  # worker pools started again after one died, before giving up on them

Batch = list[tuple[WriteJob, "Future[WriteStats]"]]


def _worker_input(job: WriteJob) -> str | None:
    """What a worker derives the job from: the spans intake decoded ("spans": OTLP/JSON, a
    ``--no-text`` export, GenAI events), an export's raw bytes ("raw"), or nothing (None:
    outcomes, a flush, spans a shared store holds already), when the writer thread derives it."""
    if job.outcomes or job.stored:
        return None
    if job.spans:
        return "spans"
    return "raw" if job.raw is not None else None


def _task(batch: Batch, keep_text: bool) -> tuple[Callable[..., Prepared], tuple]:
    """What derives a group a worker can derive, and its arguments: ``prepare`` of the spans
    intake decoded, or ``prepare_exports`` of the raw exports."""
    if _worker_input(batch[0][0]) == "spans":
        return prepare, ([s for job, _ in batch for s in job.spans], keep_text)
    return prepare_exports, ([job.raw for job, _ in batch if job.raw is not None], keep_text)


def _runs(batch: Batch, key: Callable[[WriteJob], object]) -> list[Batch]:
    """The batch cut, in order, into runs of jobs that agree on ``key``."""
    runs: list[Batch] = []
    for item in batch:
        if runs and key(runs[-1][0][0]) == key(item[0]):
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _decoded(batch: Batch) -> Batch:
    """The batch with the spans of every export that came undecoded (see Intake.export)."""
    out = []
    for job, fut in batch:
        if job.raw is not None and not job.spans and job.count:
            try:
                job = dataclasses.replace(job, spans=spans_of_raw(job.raw))
            except Exception as e:  # checked at intake already: a bug, not bad input
                log.error("intake log entry %s cannot be read again: %s", job.export_id, e)
        out.append((job, fut))
    return out


def is_data_fault(error: BaseException) -> bool:
    """Whether a write failed for what it was writing (a fault deriving one of its traces),
    not for want of the store: the same write fails again, and one trace at a time the
    fault costs only its own trace (``write_by_trace``)."""
    return not (is_storage_error(error) or is_unreachable(error))


def write_by_trace(store: Any, job: WriteJob) -> WriteStats:
    """Store the spans of ``job``, which failed whole for a fault in its data, one trace at
    a time, then take its intake log entry out, so that no restart meets the fault again:
    a trace that still fails is left out and named in the stats' ``failed_traces``, and the
    others are kept. An error of the store itself is raised, as from any write."""
    by_trace: dict[str, list[Any]] = {}
    for span in job.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    total = WriteStats()
    for trace_id, spans in by_trace.items():
        try:
            stats = store.write([WriteJob(spans=spans, stored=job.stored)])
        except Exception as e:
            if not is_data_fault(e):
                raise
            log.error("trace %s could not be stored, left out: %s", trace_id, first_line(e))
            total.failed_traces.append(f"{trace_id}: {first_line(e)}")
            continue
        total.add(stats)
    if job.export_id is not None:
        store.write([WriteJob(export_id=job.export_id)])
    return total


def _ready(prepared: Future[Prepared] | None) -> bool:
    """Whether a worker's rows for a group are there to be stored (not failed)."""
    return (prepared is not None and prepared.done() and not prepared.cancelled()
            and prepared.exception() is None)


def _waited_on(item: object) -> bool:
    """Whether a group taken (or STOP) is one someone waits on: STOP, outcomes, a flush."""
    return item is STOP or item[1] is None  # type: ignore[index]


class _DerivedHere(Future):  # type: ignore[type-arg]
    """A group's rows that the apply thread made itself (Writer._derive_next_here)."""


class Writer:
    def __init__(self, store: Store, max_queue: int = 256, max_batch_spans: int = 20_000,
                 on_derived: Callable[[int], None] | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None,
                 pool: DerivePool | None = None,
                 max_backlog_bytes: int = MAX_BACKLOG_BYTES) -> None:
        self.store = store
        self.pool = pool
        self.max_backlog_bytes = max_backlog_bytes
        self._backlog_bytes = 0
        self._backlog_lock = threading.Lock()
        self.pool_restarts = 0
        self.on_derived = on_derived
        self.wants_fresh: Callable[[], bool] = lambda: False  # a reader waits for fresh rows
        self.intake_busy: Callable[[], bool] = lambda: False  # exports arrive: derive none ahead
        self._stored_through = 0  # the last export whose rows are committed
        self._reported_through = 0  # the last export on_derived was told of
        self._owed_since: float | None = None  # when the oldest owed evidence was stored
        self._evidence_retry_at = 0.0
        self.on_fatal = on_fatal  # DuckDB invalidated the database: someone must reopen it
        self.max_batch_spans = max_batch_spans
        self.counters = WriterCounters()
        self._queue: queue.Queue[tuple[WriteJob, Future[WriteStats]] | object] = queue.Queue(max_queue)
        # groups taken, in order, each with its worker's Future (None: derive in the thread)
        self._taken: queue.Queue[tuple[Batch, Future[Prepared] | None] | object] = queue.Queue(
            (pool.workers + YIELD_GROUPS) if pool else 1)
        self._dispatcher = NamedThread(target=self._run_dispatch, name="midtrace-writer-dispatch",
                                       daemon=True)
        self._thread = NamedThread(target=self._run, name="midtrace-writer", daemon=True)
        self._closed = False

    def start(self) -> Writer:
        self._dispatcher.start()
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._dispatcher.is_alive() and self._thread.is_alive()

    @property
    def depth(self) -> int:
        return self._queue.qsize() + self._taken.qsize()

    @property
    def capacity(self) -> int:
        return self._queue.maxsize

    @property
    def backlog_bytes(self) -> int:
        """Bytes of the raw exports waiting to be derived (submitted, not yet committed)."""
        return self._backlog_bytes

    def _held(self, job: WriteJob, sign: int) -> None:
        if job.raw is not None:
            with self._backlog_lock:
                self._backlog_bytes += sign * job.raw.size

    def submit(self, job: WriteJob) -> Future[WriteStats]:
        if self._closed:
            raise RuntimeError("writer is closed")
        fut: Future[WriteStats] = Future()
        try:
            self._queue.put_nowait((job, fut))
        except queue.Full:
            raise QueueFull(f"writer queue is full ({self._queue.maxsize} batches)") from None
        self._held(job, +1)
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything submitted so far is committed."""
        self.submit_blocking(WriteJob()).result(timeout)

    def submit_blocking(self, job: WriteJob) -> Future[WriteStats]:
        fut: Future[WriteStats] = Future()
        self._queue.put((job, fut))
        self._held(job, +1)
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then stop the thread and close the database."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        stop(self._queue, self._dispatcher, timeout)
        if not self._dispatcher.is_alive():  # it passed STOP on to the apply thread
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self.pool is not None:
            self.pool.close()
        self.store.close()

    def _run_dispatch(self) -> None:
        self._guarded(self._dispatch, "the writer's dispatch thread")

    def _run(self) -> None:
        self._guarded(self._apply_loop, "the writer thread")

    def _guarded(self, loop: Callable[[], None], what: str) -> None:
        try:
            loop()
        except BaseException as e:  # pragma: no cover - a bug; make it visible, not silent
            self.counters.last_error = f"writer stopped: {e!r}"
            log.exception("%s stopped", what)

    def _dispatch(self) -> None:
        limit = min(self.max_batch_spans, POOL_BATCH_SPANS) if self.pool else self.max_batch_spans
        while True:
            item = self._queue.get()
            if item is STOP:
                self._taken.put(STOP)
                return
            n_spans = 0

            def room(batch: Batch) -> bool:
                nonlocal n_spans
                n_spans += batch[-1][0].size
                return n_spans < limit

            batch, stopping = take_group(self._queue, item, room)
            if not stopping and n_spans < limit:
                stopping = self._linger(batch, room, lambda: n_spans >= limit)
            for run in _runs(batch, _worker_input):  # in order: mixed traffic keeps its workers busy
                self._taken.put((run, self._to_worker(run)))
            if stopping:
                self._taken.put(STOP)
                return

    def _linger(self, batch: Batch, room: Callable[[Batch], bool],
                full: Callable[[], bool]) -> bool:
        """Add to a group of exports for the workers what arrives in the next
        LINGER_SECONDS, while there is room (Kafka's linger.ms): below its limit a collector
        gets exports one at a time, and each group costs its worker task, its inserts and
        its commit however few requests it holds. Not for a group with outcomes or a flush
        (someone waits on it), nor while a reader waits for fresh rows. Returns whether STOP
        was taken."""
        if self.pool is None or any(_worker_input(job) is None for job, _ in batch):
            return False
        deadline = time.monotonic() + LINGER_SECONDS
        while not self.wants_fresh():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                item = self._queue.get(timeout=min(left, WAKE_SECONDS))
            except queue.Empty:
                continue
            if item is STOP:
                return True
            more, stopping = take_group(self._queue, item, room)
            batch.extend(more)
            if stopping or full() or any(_worker_input(job) is None for job, _ in more):
                return stopping
        return False

    def _to_worker(self, batch: Batch) -> Future[Prepared] | None:
        """A worker's Future for the group, when a worker can derive all of it."""
        if self.pool is None or _worker_input(batch[0][0]) is None:
            return None
        try:
            return self.pool.submit_call(*_task(batch, self.store.keep_text))
        except Exception as e:  # a worker died (killed, out of memory): start them again
            self._restart_pool(e)
            return None  # this group is derived in the writer thread

    def _restart_pool(self, error: Exception) -> None:
        assert self.pool is not None
        workers = self.pool.workers
        try:
            self.pool.close(wait=False)
        except Exception:  # a broken pool may say so again on the way out
            pass
        self.pool = None
        if self.pool_restarts >= MAX_POOL_RESTARTS:
            log.error("derive workers are gone (%s), restarted %d times already; deriving in "
                      "the writer thread from now on", error, self.pool_restarts)
            return
        self.pool_restarts += 1
        log.error("derive workers are gone (%s); starting them again", error)
        try:
            self.pool = DerivePool(workers)
        except Exception as e:
            log.error("derive workers cannot start (%s); deriving in the writer thread", e)

    def _apply_loop(self) -> None:
        ahead: object = None  # the next group, taken (and derived here) while a worker was busy
        while True:
            item, ahead = (self._take() if ahead is None else ahead), None
            if item is STOP:
                self._settle_evidence(force=True)
                return
            batch, prepared = item  # type: ignore[misc]
            while prepared is not None and ahead is None and not prepared.done():
                ahead = self._derive_next_here()  # rather than only wait on the worker
                if ahead is None:  # nothing behind it yet
                    wait_for([prepared], timeout=AHEAD_POLL_SECONDS)
            groups: list[tuple[Batch, Future[Prepared] | None]] = [(batch, prepared)]
            self._yield_to_intake(prepared, ahead)
            if _ready(prepared):
                ahead = self._ready_behind(groups, ahead)
            self._store_groups(groups)
            export_ids = []
            for group, _ in groups:
                for job, _ in group:
                    self._held(job, -1)
                    if job.export_id is not None:
                        export_ids.append(job.export_id)
            if export_ids:
                self._stored_through = max(self._stored_through, max(export_ids))
            self._settle_evidence()
            del item, batch, prepared, groups  # a group's exports and rows: not kept while idle
            give_back_memory()

    def _yield_to_intake(self, prepared: Future[Prepared] | None, ahead: object) -> None:
        """While exports arrive, hold a worker's group back (up to YIELD_SECONDS) before
        storing it: intake checks those exports in this process, under the same GIL, and
        answers them sooner with the apply thread out of its way (bench/ingest.py). The
        workers go on deriving meanwhile, and the groups whose rows are ready by then are
        stored together, in fewer commits. Owed evidence is still refreshed when due. Not
        for a group someone waits on (outcomes, a flush: ``prepared`` is None) or one taken
        behind it (``ahead`` or still queued), nor once the workers have nothing left to
        derive, nor while the writer's queue or backlog is three quarters full (intake would
        refuse exports), nor while a reader waits for fresh rows, nor once the writer is
        closing."""
        if prepared is None or (ahead is not None and _waited_on(ahead)):
            return
        deadline = time.monotonic() + YIELD_SECONDS
        while (self.intake_busy() and not self._closed and not self.wants_fresh()
               and self._queue.qsize() * 4 < self._queue.maxsize * 3
               and self._backlog_bytes * 4 < self.max_backlog_bytes * 3
               and time.monotonic() < deadline and self._workers_have_work()):
            time.sleep(AHEAD_POLL_SECONDS)
            self._settle_evidence()

    def _workers_have_work(self) -> bool:
        """Whether a worker still derives a group queued behind the one in hand, or has room
        to be given another; False too when a group queued behind is waited on."""
        with self._taken.mutex:
            behind = list(self._taken.queue)
        if any(_waited_on(item) for item in behind):
            return False
        return len(behind) < self._taken.maxsize or not all(_ready(item[1]) for item in behind)  # type: ignore[index]

    def _take(self) -> object:
        """The next group taken (or STOP), waiting for it; while evidence is owed the wait
        is cut short to refresh it when it falls due."""
        while True:
            if not self._owes_evidence():
                return self._taken.get()
            try:
                return self._taken.get(timeout=WAKE_SECONDS)
            except queue.Empty:
                self._settle_evidence()

    def _owes_evidence(self) -> bool:
        return self.store.owed_evidence > 0

    def _settle_evidence(self, force: bool = False) -> None:
        """Refresh the evidence the commits left owed when it is due (or ``force``), then
        tell ``on_derived`` how far everything is derived. A refresh that fails for want of
        the store is tried again after STORAGE_RETRY_SECONDS; one that fails for what the
        rows hold is done again one trace at a time, leaving out the traces that fail."""
        owed = self._owes_evidence()
        now = time.monotonic()
        if owed:
            if self._owed_since is None:
                self._owed_since = now
            due = (force or now - self._owed_since >= EVIDENCE_SECONDS or self.wants_fresh()
                   or self.store.owed_evidence >= MAX_OWED_REQUESTS)
            if not due or (not force and now < self._evidence_retry_at):
                return
            try:
                try:
                    self.store.refresh_owed()
                except Exception as e:
                    if not is_data_fault(e):
                        raise
                    log.error("request_evidence of %d request(s) could not be refreshed "
                              "together (%s); refreshing it one trace at a time",
                              self.store.owed_evidence, first_line(e))
                    self.counters.failed_traces += len(self.store.refresh_owed_by_trace())
            except Exception as e:  # for want of the store: everything stays owed
                if is_fatal(e) and self.on_fatal is not None:
                    self.on_fatal(e)  # the reopen computes what is owed (Store._setup)
                self.counters.last_error = str(e)
                log.warning("request_evidence not refreshed, tried again shortly: %s",
                            first_line(e))
                self._evidence_retry_at = now + STORAGE_RETRY_SECONDS
                return
            self.counters.evidence_refreshes += 1
            self._owed_since = None
        if self._stored_through > self._reported_through and not self._owes_evidence():
            self._reported_through = self._stored_through
            if self.on_derived is not None:
                self.on_derived(self._stored_through)

    def _ready_behind(self, groups: list[tuple[Batch, Future[Prepared] | None]],
                      ahead: object) -> object:
        """Add to ``groups`` the groups behind them whose rows are ready, while they hold
        fewer than MERGE_SPANS spans, to be stored in one commit; returns the next group
        not added (taken already), or None."""
        spans = sum(job.size for batch, _ in groups for job, _ in batch)
        while spans < MERGE_SPANS:
            if ahead is None:
                ahead = self._next_taken()
            if ahead is None or ahead is STOP:
                return ahead
            batch, prepared = ahead  # type: ignore[misc]
            if not _ready(prepared):
                return ahead
            groups.append((batch, prepared))
            spans += sum(job.size for job, _ in batch)
            ahead = None
        return ahead

    def _store_groups(self, groups: list[tuple[Batch, Future[Prepared] | None]]) -> None:
        """Store the groups' rows in one commit; if that fails, each group alone, and a group
        without rows from a worker, or whose rows cannot be stored, is derived here."""
        if len(groups) > 1:
            try:
                stats = self.store.apply([(prepared.result(), [job for job, _ in batch])  # type: ignore[union-attr]
                                          for batch, prepared in groups], defer_evidence=True)
            except CommittedThenInvalidated as e:
                stats = self._committed(e)
            except Exception as e:
                log.warning("%d worker-derived groups not stored together (%s); storing them "
                            "one by one", len(groups), first_line(e))
                stats = None
            if stats is not None:
                for i, ((batch, prepared), group_stats) in enumerate(zip(groups, stats)):
                    self._stored(batch, prepared, group_stats, commits=int(i == 0))  # type: ignore[arg-type]
                return
        for batch, prepared in groups:
            if prepared is None or not self._commit_prepared(batch, prepared):
                # a job stored as ``write`` stores it (outcomes, a flush) refreshes its own
                # evidence, and follows the owed refreshes: a flush leaves nothing owed
                self._settle_evidence(force=True)
                self._commit(_decoded(batch))

    def _next_taken(self) -> object:
        """The next group taken (or STOP) if one is waiting, else None."""
        try:
            return self._taken.get_nowait()
        except queue.Empty:
            return None

    def _derive_next_here(self) -> object:
        """The next group, derived in this thread if no worker has started it: while the
        workers are busy this thread would only wait. Not while exports arrive
        (``intake_busy``): intake checks them in this process, under the same GIL, and a
        group derived here (1,500 spans: 340-400 ms of a core with midtrace's own
        conventions, about 520 ms with OpenInference) would slow their answers."""
        item = self._next_taken()
        if item is None or item is STOP:
            return item
        batch, prepared = item  # type: ignore[misc]
        if prepared is None or self.intake_busy() or not prepared.cancel():
            return item
        here: Future[Prepared] = _DerivedHere()
        function, args = _task(batch, self.store.keep_text)
        try:
            here.set_result(function(*args))
        except Exception as e:
            here.set_exception(e)
        return batch, here

    def _commit_prepared(self, batch: Batch, prepared: Future[Prepared]) -> bool:
        """Store what the worker made of the group; False when it must be derived here."""
        try:
            stats = self.store.apply([(prepared.result(), [job for job, _ in batch])],
                                     defer_evidence=True)[0]
        except CommittedThenInvalidated as e:
            stats = self._committed(e)[0]
        except Exception as e:
            log.warning("worker-derived group of %d exports not stored (%s); deriving it here",
                        len(batch), first_line(e))
            return False
        self._stored(batch, prepared, stats)
        return True

    def _stored(self, batch: Batch, prepared: Future[Prepared], stats: WriteStats,
                commits: int = 1) -> None:
        self._count(stats, len(batch), commits)
        if isinstance(prepared, _DerivedHere):
            self.counters.ahead_jobs += len(batch)
        else:
            self.counters.worker_jobs += len(batch)
        for _, fut in batch:
            settle(fut, stats)

    def _commit(self, batch: list[tuple[WriteJob, Future[WriteStats]]]) -> None:
        started = time.perf_counter()
        try:
            stats = self.store.write(job for job, _ in batch)
        except CommittedThenInvalidated as e:
            stats = self._committed(e)
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
            except CommittedThenInvalidated as e:
                stats = self._committed(e)
                break
            except Exception as e:
                if is_fatal(e) and self.on_fatal is not None:
                    self.on_fatal(e)
                if (job.export_id is not None and (is_storage_error(e) or is_unreachable(e))
                        and not self._closed):
                    # Acknowledged already: wait for the store to write again (a full disk,
                    # a reopen under way, a server out of reach) rather than leave the export
                    # underived.
                    self.counters.last_error = str(e)
                    log.warning("derive waits for the store to write again: %s", first_line(e))
                    time.sleep(STORAGE_RETRY_SECONDS)
                    continue
                if job.spans and not job.outcomes and is_data_fault(e):
                    log.error("an export's traces could not be stored together (%s); storing "
                              "them one at a time", first_line(e))
                    try:
                        stats = write_by_trace(self.store, job)
                    except Exception as again:
                        self._fail(job, fut, again)
                        return
                    self.counters.last_error = str(e)
                    break
                self._fail(job, fut, e)
                return
        self._count(stats, 1)
        settle(fut, stats)

    def _committed(self, e: CommittedThenInvalidated) -> Any:
        """What a commit that held returned, though DuckDB's checkpoint after it failed:
        stored, so it is not derived again; the store is reopened before the next write."""
        log.error("a commit is durable, but the checkpoint after it failed: %s", first_line(e))
        self.counters.last_error = str(e)
        if self.on_fatal is not None:
            self.on_fatal(e)
        return e.result

    def _fail(self, job: WriteJob, fut: Future[WriteStats], e: Exception) -> None:
        self.counters.failed_jobs += 1
        self.counters.last_error = str(e)
        trace_ids = sorted({s.trace_id for s in job.spans})[:5]
        log.error("write failed for traces %s: %s", ", ".join(trace_ids) or "-", e)
        settle(fut, error=e)

    def _count(self, stats: WriteStats, jobs: int, commits: int = 1) -> None:
        c = self.counters
        c.failed_traces += len(stats.failed_traces)
        c.jobs += jobs
        c.spans += stats.spans
        c.requests += stats.requests
        c.commits += commits
        c.normalize_errors += len(stats.normalize_errors)
