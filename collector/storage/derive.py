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
import io
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import socket
import struct
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from concurrent.futures import Future
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from midtrace.collector.intake.otlp import spans_of_parsed_before
from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.receive.bodies import (
    PROTOBUF, REDACTED_PROTOBUF, BadInput, accepted_before, check_spans, decompress, media_type,
    parse_traces)
from midtrace.collector.storage.raw_export import RawExport, as_received
from midtrace.collector.storage.rows import Rows
from midtrace.collector.storage.spanstore import SpanEncoder, resolve
from midtrace.collector.storage.text_hashes import TextHashes
from midtrace.collector.storage.threads import NamedThread, arrow_on_malloc, name_this_thread
from midtrace.collector.storage.worker import serve as serve_in_worker
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
    if export.size > max_bytes:
        raise BadInput(413, f"the export is larger than the limit of {max_bytes} bytes")
    try:
        export = as_received(export)
    except (pa.ArrowException, OSError, ValueError) as e:  # a damaged entry: the file was hurt
        raise BadInput(400, f"the intake log's compressed body cannot be read: {e}") from e
    body = decompress(export.body, export.content_encoding, max_bytes)
    pairs: Iterable[tuple[SpanRecord | None, str | None]]
    if export.content_type == REDACTED_PROTOBUF:  # texts read as what they stand for
        pairs = [(None if span is None else dataclasses.replace(
                      span, attributes={k: resolve(v, {}) for k, v in span.attributes.items()}),
                  error) for span, error in parse_traces(body, export.content_type)]
    elif export.checked and media_type(export.content_type) == PROTOBUF:
        pairs = spans_of_parsed_before(body)
    else:
        pairs = parse_traces(body, export.content_type)
    return accepted_before(pairs) if export.checked else check_spans(pairs).accepted


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
    """A worker's start: its imports, its allocator (``arrow_on_malloc``), and a watch on its
    collector. A collector killed outright (kill -9, the OOM killer) cannot stop its workers;
    each leaves once it finds itself orphaned instead of waiting forever for work."""
    parent = os.getppid()
    name_this_thread("midtrace-derive-worker")  # ps and top show the worker as derive-worker
    arrow_on_malloc()

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    NamedThread(target=watch, name="midtrace-parent-watch", daemon=True).start()
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


class WorkerGone(RuntimeError):
    """A derive worker exited before it answered (killed, out of memory), or the pool it
    belonged to was closed."""


START_SECONDS = 120.0  # a worker's start (a fresh interpreter and its imports) on a busy machine
STOP_SECONDS = 10.0  # a worker's own exit once told to stop, before it is killed
_READY = "ready"


def _serve(conn: Connection) -> None:
    """A worker's life: start, say so, then run each ``(function, args)`` the collector sends
    and answer with ``(True, result)`` or ``(False, exception)``, until told to stop (None)
    or the collector's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the
    _start_worker()                               # collector stops its workers itself
    sock = _socket_of(conn)  # answers go out through it (_send_answer), tasks come in by conn
    if sock is None:
        raise RuntimeError("a derive worker needs a socket to its collector, not a pipe")
    conn.send(_READY)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as e:  # read whole but cannot be unpickled here: answer, go on
            task = None
            answer: Any = (False, RuntimeError(f"a derive worker could not read its task: {e!r}"))
        else:
            if task is None:
                return
            function, args = task
            try:
                answer = (True, function(*args))
            except Exception as e:
                answer = (False, e)
            del args
        try:
            _send_answer(sock, answer)
        except (EOFError, OSError):
            return
        except Exception as e:  # what it made (or raised) does not pickle: nothing was sent
            try:
                _send_answer(sock, (False, RuntimeError(
                    f"a derive worker could not send its answer: {e!r}")))
            except (EOFError, OSError):
                return
        del task, answer  # a group's exports and rows are megabytes: not kept while idle


_REAPING = threading.Lock()  # two threads waiting on one child at once: one of them may
# reap it while the other reads no exit status ("still running") from a process that is gone


def _reap(process: BaseProcess, timeout: float) -> int | None:
    """Wait up to ``timeout`` for ``process`` to end; its exit code, None while it runs."""
    with _REAPING:
        process.join(timeout)
        return process.exitcode


def _exit_of(process: BaseProcess) -> str:
    code = _reap(process, 1.0)
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    thread: threading.Thread | None = None
    sock: socket.socket | None = None  # conn's socket, to read answers (_receive)


def _socket_of(conn: Connection) -> socket.socket | None:
    """A socket on (a copy of) the connection's descriptor; None where it is no socket."""
    try:
        return socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return None


# A worker's answer on the wire (``_send_answer``, ``_receive``): a header (the pickle's
# length, how many buffers follow it), each buffer's length, the pickle (protocol 5), then
# the buffers it left out of itself, each padded to ALIGN bytes.
_HEADER = struct.Struct("!QI")
ALIGN = 64  # Arrow's alignment: each buffer read back starts on it
_PADDING = bytes(ALIGN)
IOV_PARTS = 512  # pieces given to one sendmsg call (Linux takes up to 1,024)


def _send_answer(sock: socket.socket, answer: Any) -> None:
    """Send ``answer`` to the collector: pickled with protocol 5, so that its Arrow
    buffers (a group's rows: megabytes) go out of band, straight from where they are. The
    connection's own ``send`` (protocol 4) copies each buffer into the pickle first, and
    unpickling copies it again: handing over a group of bench/ingest.py's (400 requests,
    23 KB of answer each) cost 100 µs of CPU a request that way, 30 this way. Raises what
    pickling raises before anything is sent."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    ForkingPickler(out, 5, True, buffers.append).dump(answer)
    head = out.getbuffer()
    views = [b.raw() for b in buffers]
    sizes = [v.nbytes for v in views]
    parts: list[Any] = [_HEADER.pack(head.nbytes, len(views)),
                        struct.pack(f"!{len(sizes)}Q", *sizes), head]
    for view, n in zip(views, sizes):
        parts.append(view)
        if n % ALIGN:
            parts.append(_PADDING[:ALIGN - n % ALIGN])
    _send_parts(sock, parts)


def _send_parts(sock: socket.socket, parts: list[Any]) -> None:
    """Send every byte of ``parts``, in order, a few hundred pieces to a system call."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    first = 0
    while first < len(views):
        sent = sock.sendmsg(views[first:first + IOV_PARTS])
        while sent:
            n = views[first].nbytes
            if sent < n:  # part of a piece went: the rest goes first in the next call
                views[first] = views[first][sent:]
                break
            sent -= n
            first += 1


def _receive(sock: socket.socket) -> Any:
    """One answer a worker sent (``_send_answer``), each part read by one blocking call.

    A socket read as it fills (``Connection.recv``) is read a socket buffer (about 200 KB)
    at a time, taking the GIL back after each read; while the collector's other threads
    run, each take can wait a switch interval (5 ms), and a worker's answer is megabytes:
    reading it took longer than making it. The buffers are read into one Arrow buffer,
    aligned, and the tables unpickled from it use it as it is, without a copy."""
    head_bytes, count = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    front = _read_exactly(sock, 8 * count + head_bytes)
    sizes = struct.unpack_from(f"!{count}Q", front)
    padded = [n + (-n % ALIGN) for n in sizes]
    data = pa.allocate_buffer(sum(padded))
    if data.size:
        _read_into(sock, memoryview(data).cast("B"))
    buffers, offset = [], 0
    for n, room in zip(sizes, padded):
        buffers.append(data.slice(offset, n))
        offset += room
    return pickle.loads(memoryview(front)[8 * count:], buffers=buffers)


def _read_exactly(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    if size:
        _read_into(sock, memoryview(buf))
    return buf


def _read_into(sock: socket.socket, view: memoryview) -> None:
    got, size = 0, view.nbytes
    while got < size:  # MSG_WAITALL returns early only on a signal or the end of the stream
        n = sock.recv_into(view[got:], size - got, socket.MSG_WAITALL)
        if n == 0:
            raise EOFError("the derive worker closed its end")
        got += n


_Task = tuple[Future, Callable[..., Prepared], tuple]


class DerivePool:
    """Worker processes that run ``prepare_exports`` (or ``prepare``), one task at a time each.

    Started with ``spawn``: the collector runs threads (and DuckDB's), which a forked child
    must not inherit. Each worker has its own pipe, whose far end only the worker holds, and
    one thread here that feeds it: when a worker dies (kill -9, the OOM killer), even halfway
    through sending a result, its thread reads end-of-file at once, fails that task's Future
    with WorkerGone and marks the pool broken. A broken pool fails what is still queued and
    refuses new work, so its owner derives those groups itself and starts a new pool; nothing
    waits forever on a worker that is gone."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a derive pool needs at least one worker, not {workers}")
        self.workers = workers
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._broken: WorkerGone | None = None
        self._closed = False
        context = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        try:
            with _without_main_module():
                for _ in range(workers):
                    ours, theirs = context.Pipe()
                    process = context.Process(target=serve_in_worker, args=(theirs,),
                                              name="midtrace-derive", daemon=True)
                    process.start()
                    theirs.close()  # only the worker holds its end: its death is our EOF
                    self._workers.append(_Worker(process, ours))
            for worker in self._workers:  # all started before the first export waits on one
                if not worker.conn.poll(START_SECONDS):
                    raise WorkerGone(f"a derive worker did not start within {START_SECONDS:.0f} s")
                if worker.conn.recv() != _READY:
                    raise WorkerGone("a derive worker started wrong")
        except (EOFError, OSError) as e:
            self._kill()
            raise WorkerGone(f"a derive worker exited as it started ({e!r})") from e
        except BaseException:
            self._kill()
            raise
        for worker in self._workers:
            worker.sock = _socket_of(worker.conn)
            if worker.sock is None:  # the pipe of a spawned process is a socket pair
                self._kill()
                raise WorkerGone("a derive worker's pipe is no socket")
            worker.thread = NamedThread(target=self._feed, args=(worker,), daemon=True,
                                        name=f"midtrace-feed-{worker.process.pid}")
            worker.thread.start()
        self._watch = NamedThread(target=self._watch_workers, daemon=True,
                                  name="midtrace-derive-watch")
        self._watch.start()

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    def submit(self, exports: Sequence[RawExport], keep_text: bool) -> Future[Prepared]:
        return self.submit_call(prepare_exports, (list(exports), keep_text))

    def submit_call(self, function: Callable[..., Prepared], args: tuple) -> Future[Prepared]:
        """``function(*args)`` in a worker: ``prepare_exports`` for raw exports, ``prepare``
        for spans intake decoded already (a worker decodes their midtrace attributes itself).
        Both must pickle."""
        future: Future[Prepared] = Future()
        with self._lock:
            if self._broken is not None:
                raise self._broken
            if self._closed:
                raise WorkerGone("the derive pool is closed")
            self._tasks.put((future, function, args))
        return future

    def _feed(self, worker: _Worker) -> None:
        sock = worker.sock
        assert sock is not None  # set before the thread starts
        while True:
            task = self._tasks.get()
            if task is None:
                try:
                    worker.conn.send(None)
                except (EOFError, OSError):
                    pass
                return
            future, function, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                worker.conn.send((function, args))
                ok, value = _receive(sock)
            except (EOFError, OSError):
                gone = WorkerGone(f"derive worker {worker.process.pid} exited "
                                  f"({_exit_of(worker.process)})")
                future.set_exception(gone)
                self._break(gone)
                return
            except BaseException as e:  # an argument that does not pickle: this task only
                future.set_exception(e)
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
            del task, future, args, value  # the writer holds what it needs; idle, keep nothing

    def _watch_workers(self) -> None:
        """Notice a worker's death while it is idle, not only when it is next given work."""
        sentinels = {w.process.sentinel: w for w in self._workers}
        while not self._closed and self._broken is None:
            for ready in wait_for(list(sentinels), timeout=1.0):
                if self._closed:
                    return
                process = sentinels[ready].process  # type: ignore[index]
                self._break(WorkerGone(f"derive worker {process.pid} exited ({_exit_of(process)})"))
                return

    def _break(self, error: WorkerGone) -> None:
        """Refuse new work and fail what is queued: the owner derives it without workers."""
        with self._lock:
            if self._broken is None and not self._closed:
                log.warning("%s", error)
            self._broken = self._broken or error
            pending = self._drain()
        for future in pending:
            if future.set_running_or_notify_cancel():
                future.set_exception(error)

    def _drain(self) -> list[Future]:
        pending: list[Future] = []
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                return pending
            if task is not None:
                pending.append(task[0])

    def close(self, wait: bool = True) -> None:
        """Stop the workers: what is queued is cancelled; ``wait`` lets each finish the task
        it has (up to STOP_SECONDS), ``wait=False`` kills them at once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = self._drain()
        for future in pending:
            future.cancel()
        for _ in self._workers:
            self._tasks.put(None)
        if not wait:
            self._kill()
        deadline = time.monotonic() + STOP_SECONDS
        for worker in self._workers:
            if worker.thread is not None:
                worker.thread.join(max(0.0, deadline - time.monotonic()))
            _reap(worker.process, max(0.0, deadline - time.monotonic()))
        self._kill()
        for worker in self._workers:
            worker.conn.close()
            if worker.sock is not None:
                worker.sock.close()

    def _kill(self) -> None:
        for worker in self._workers:
            if _reap(worker.process, 0) is None:
                worker.process.kill()
        for worker in self._workers:
            _reap(worker.process, 1.0)
