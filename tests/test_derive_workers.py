"""Rows derived by worker processes equal rows derived in the writer thread.

The bundled sample traces (midtrace's own conventions and a recorded LangChain run through
OpenInference) are split so every trace arrives in two exports, the second half after the
first is stored: the path for split traces runs for every one of them. One store derives
them in the writer thread from the spans (as ``ingest`` does), another through a Writer
with a real DerivePool from the raw exports (as the collector does); every table must come
out the same, ids and arrival times aside.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from midtrace.collector.intake.otlp import json_spans, load_json, records_to_request
from midtrace.collector.receive.bodies import PROTOBUF, check_spans
from midtrace.collector.storage.derive import (
    ALIGN, STOP_SECONDS, DerivePool, WorkerGone, _receive, _send_answer, _socket_of, prepare)
from midtrace.collector.storage.intake_log import RawExport
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.storage.threads import arrow_allocator
from midtrace.collector.storage.writer import Writer
from midtrace.demo import sample_files
from midtrace.schemas.span import SpanRecord
from tests.procs import site_packages_mapped

LINES_PER_FILE = 6  # exports of each sample file: enough traces of every kind, quick to run

# Each table without what depends on arrival (ids, times), keyed so rows compare by trace.
TABLES = {
    "requests": "SELECT * EXCLUDE (request_id) FROM requests ORDER BY ALL",
    "chunks": "SELECT r.trace_id, c.* EXCLUDE (request_id) FROM chunks c JOIN requests r USING "
              "(request_id) ORDER BY ALL",
    "placements": "SELECT r.trace_id, p.* EXCLUDE (request_id) FROM placements p JOIN requests r "
                  "USING (request_id) ORDER BY ALL",
    "outcomes": "SELECT * EXCLUDE (outcome_id, received_at) FROM outcomes ORDER BY ALL",
    "span_keys": "SELECT trace_id, span_id FROM spans ORDER BY ALL",
    "chunk_texts": "SELECT * FROM chunk_texts ORDER BY ALL",
    "request_evidence": "SELECT * EXCLUDE (request_id) FROM request_evidence ORDER BY ALL",
}


def sample_exports() -> list[list[SpanRecord]]:
    out = []
    for path in sample_files():
        if "outcomes" in path.name:
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in itertools.islice(f, LINES_PER_FILE):
                out.append(check_spans(list(json_spans(load_json(line)))).accepted)
    return out


def halves(exports: list[list[SpanRecord]]) -> tuple[list[list[SpanRecord]], list[list[SpanRecord]]]:
    """Every export cut in two by span, so each trace of it is split between the halves."""
    return [e[0::2] for e in exports], [e[1::2] for e in exports]


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in TABLES.items()}


def stored_spans(db: Path) -> dict[str, Any]:
    store = Store.open(db)
    try:
        traces = [t for (t,) in store.conn.execute("SELECT DISTINCT trace_id FROM spans").fetchall()]
        return store.spans_of_traces(traces)
    finally:
        store.close()


@pytest.fixture(scope="module")
def split_exports() -> tuple[list[list[SpanRecord]], list[list[SpanRecord]]]:
    first, second = halves(sample_exports())
    assert sum(map(len, first)) > 500, "too few sample spans to prove anything"
    return first, second


def as_job(spans: list[SpanRecord], given: str, export_id: int) -> WriteJob:
    """The export as intake hands it to the writer: its raw bytes (a protobuf export), or
    the spans it decoded (OTLP/JSON, ``--no-text``), checked without keeping records."""
    if given == "raw":
        return WriteJob(raw=RawExport(records_to_request(spans).SerializeToString(), PROTOBUF),
                        count=len(spans), export_id=export_id)
    checked = check_spans([(dataclasses.replace(s, record=None), None) for s in spans],
                          keep_records=False)
    assert all(s.record is None for s in checked.accepted)
    return WriteJob(spans=checked.accepted, count=len(spans), export_id=export_id)


@pytest.mark.parametrize("given", ["raw", "spans"])
def test_workers_derive_what_the_writer_thread_derives(
        tmp_path: Path, split_exports: tuple[list[list[SpanRecord]], list[list[SpanRecord]]],
        given: str) -> None:
    first, second = split_exports
    in_thread = tmp_path / "thread.duckdb"
    store = Store.open(in_thread)
    for part in (first, second):
        store.write([WriteJob(spans=spans) for spans in part if spans])
    store.close()

    in_workers = tmp_path / "workers.duckdb"
    writer = Writer(Store.open(in_workers), pool=DerivePool(1)).start()
    export_id = itertools.count(1)
    for part in (first, second):  # the second half only once the first is stored
        futures = [writer.submit(as_job(spans, given, next(export_id)))
                   for spans in part if spans]
        stats = [f.result(120) for f in futures]
        assert not any(s.normalize_errors for s in stats)
    assert writer.counters.failed_jobs == 0
    assert writer.counters.worker_jobs + writer.counters.ahead_jobs == next(export_id) - 1, \
        "some exports bypassed the workers"
    writer.close()

    expected, got = snapshot(in_thread), snapshot(in_workers)
    assert len(expected["requests"]) > 100
    # the spans as read back, every text restored: how long strings were cut into stored
    # texts may differ (a worker sees only its own exports' spans), what they hold may not
    assert stored_spans(in_workers) == stored_spans(in_thread)
    for name in TABLES:
        extra = sorted(set(map(repr, got[name])) ^ set(map(repr, expected[name])))
        assert got[name] == expected[name], f"{name} differs: {len(got[name])} vs {len(expected[name])}; {extra[:2]}"


def test_a_worker_derives_without_loading_pandas_or_duckdb(
        split_exports: tuple[list[list[SpanRecord]], list[list[SpanRecord]]]) -> None:
    """Together they took about 57 MB of every worker's memory, and a worker needs neither:
    pyarrow builds its columns (tz-aware times included) without pandas, and a worker never
    opens the database. The rows it makes are checked above against the writer thread's."""
    first, _ = split_exports
    pool = DerivePool(1)
    try:
        exports = [RawExport(records_to_request(spans).SerializeToString(), PROTOBUF)
                   for spans in first if spans]
        prepared = pool.submit(exports, True).result(120)
        assert prepared.tables["requests"].num_rows > 50
        assert str(prepared.tables["requests"].schema.field("time").type) == "timestamp[us, tz=UTC]"
        mapped = site_packages_mapped(pool.pids[0])
        assert "pyarrow" in mapped, mapped  # the check sees what a worker loads
        assert not mapped & {"pandas", "duckdb"}, mapped
    finally:
        pool.close()


def test_a_worker_builds_its_tables_on_the_c_heap() -> None:
    """pyarrow's own pool (mimalloc) kept what a group's tables freed: each worker peaked
    about 20 MB higher (docs/collector.md, "Memory"). A worker switches to the C library's heap
    as it starts, before any table is built."""
    pool = DerivePool(1)
    try:
        assert pool.submit_call(arrow_allocator, ()).result(60) == "system"
    finally:
        pool.close()


def test_workers_do_not_run_the_parents_script_again(tmp_path: Path) -> None:
    """A spawned child imports its parent's ``__main__``; when that is a script (as under a
    test harness that runs an app, or in a notebook) the workers must still start."""
    script = tmp_path / "script.py"
    script.write_text("raise SystemExit('the parent script ran again in a worker')\n")
    code = (
        "import sys, types\n"
        "from midtrace.collector.storage.derive import DerivePool\n"
        f"fake = types.ModuleType('__main__'); fake.__file__ = {str(script)!r}\n"
        "sys.modules['__main__'] = fake\n"
        "pool = DerivePool(1)\n"
        "print('spans', pool.submit([], True).result(60).spans)\n"
        "pool.close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "spans 0" in done.stdout


def test_an_answer_comes_out_whole_with_its_arrow_buffers_read_in_place() -> None:
    """What a worker sends (``_send_answer``: protocol 5, buffers out of band) is what the
    pool reads (``_receive``), megabytes and many buffers at once; each Arrow buffer is read
    into one aligned block without a copy; a worker gone halfway through a message is the
    end of the stream, not a hang."""
    import multiprocessing
    import struct
    import threading

    import pyarrow as pa

    ours, theirs = multiprocessing.Pipe()
    sock, their_sock = _socket_of(ours), _socket_of(theirs)
    assert sock is not None and their_sock is not None
    rows = pa.table({"text": [os.urandom(40).hex() for _ in range(50_000)],  # 4 MB of text
                     "n": list(range(50_000))})
    tables = {f"t{i}": rows.slice(i * 7, 1000 + i) for i in range(300)}  # 600+ buffers
    answer = (True, {"rows": rows, "tables": tables, "raw": os.urandom(3_000_001),
                     "ids": list(range(1000))})
    sender = threading.Thread(target=_send_answer, args=(their_sock, answer))
    sender.start()
    ok, got = _receive(sock)
    sender.join()
    assert ok and got["ids"] == answer[1]["ids"] and got["raw"] == answer[1]["raw"]
    assert got["rows"].equals(rows)
    assert all(got["tables"][k].equals(t) for k, t in tables.items())
    starts = [b.address for b in got["rows"].column("text").chunk(0).buffers() if b is not None]
    assert all(a % ALIGN == 0 for a in starts), starts
    _send_answer(their_sock, "small")
    assert _receive(sock) == "small"
    their_sock.sendall(struct.pack("!QI", 10, 0) + b"not pickle")  # whole, but not a pickle
    with pytest.raises(Exception):
        _receive(sock)
    their_sock.sendall(struct.pack("!QI", 1_000_000, 0) + b"x" * 1000)  # then it dies
    their_sock.close()
    theirs.close()
    raised: list[BaseException] = []

    def receive() -> None:
        try:
            _receive(sock)
        except BaseException as e:
            raised.append(e)

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "a message cut short left the reader waiting"
    assert len(raised) == 1 and isinstance(raised[0], EOFError), raised
    sock.close()
    ours.close()


def test_a_worker_killed_at_work_fails_its_task_and_the_pool_stops_quickly() -> None:
    pool = DerivePool(1)
    try:
        [pid] = pool.pids
        busy = pool.submit_call(time.sleep, (60,))  # a task that would hold the worker a minute
        queued = pool.submit([], True)
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)  # as the OOM killer would
        with pytest.raises(WorkerGone, match="killed by SIGKILL"):
            busy.result(30)
        with pytest.raises(WorkerGone):  # what waited behind it is handed back, not lost
            queued.result(30)
        with pytest.raises(WorkerGone):  # and the pool takes nothing more
            pool.submit([], True)
    finally:
        started = time.monotonic()
        pool.close()
        closing = time.monotonic() - started
    assert closing < STOP_SECONDS, f"close took {closing:.1f} s"


def test_a_worker_that_dies_idle_is_noticed_before_it_is_given_work() -> None:
    pool = DerivePool(2)
    try:
        assert pool.submit([], True).result(60).spans == 0
        os.kill(pool.pids[1], signal.SIGKILL)
        time.sleep(3)  # no work given: only the watch on the workers can notice the death
        with pytest.raises(WorkerGone, match="killed by SIGKILL"):
            pool.submit([], True)
    finally:
        pool.close(wait=False)
    for pid in pool.pids:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_groups_stored_in_one_commit_equal_groups_stored_one_by_one(
        tmp_path: Path, split_exports: tuple[list[list[SpanRecord]], list[list[SpanRecord]]]) -> None:
    """Two groups applied in one transaction, every trace split between them (so the second
    group finds the first's spans, uncommitted, as stored): the same rows as the writer
    thread storing the halves in two commits."""
    first, second = ([s for spans in part for s in spans] for part in split_exports)
    in_thread = tmp_path / "thread.duckdb"
    store = Store.open(in_thread)
    for part in (first, second):
        store.write([WriteJob(spans=part)])
    store.close()

    merged = tmp_path / "merged.duckdb"
    store = Store.open(merged)
    stats = store.apply([(prepare(part, True), [WriteJob()]) for part in (first, second)])
    store.close()
    assert [s.spans for s in stats] == [len(first), len(second)]
    assert stats[1].requests > 0, "the second group derived none of the split traces again"

    expected, got = snapshot(in_thread), snapshot(merged)
    assert len(expected["requests"]) > 100
    assert stored_spans(merged) == stored_spans(in_thread)
    for name in TABLES:
        assert got[name] == expected[name], f"{name} differs"


def test_groups_ready_behind_a_slow_commit_share_the_next_commit(tmp_path: Path) -> None:
    """While a commit waits (here on the store's lock), the groups the worker finishes
    behind it are stored together in one commit; their rows are what the writer thread
    derives."""
    exports = [spans for spans in sample_exports() if spans]
    in_thread = tmp_path / "thread.duckdb"
    store = Store.open(in_thread)
    store.write([WriteJob(spans=spans) for spans in exports])
    store.close()

    store = Store.open(tmp_path / "shared.duckdb")
    writer = Writer(store, pool=DerivePool(1), max_batch_spans=1).start()  # a group each
    with store.lock:  # every commit waits until the worker has derived what it can
        futures = [writer.submit(as_job(spans, "raw", i)) for i, spans in enumerate(exports, 1)]
        time.sleep(2)  # the worker derives the groups queued behind the waiting commit
    stats = [f.result(120) for f in futures]
    assert not any(s.normalize_errors for s in stats)
    c = writer.counters
    assert c.failed_jobs == 0 and c.worker_jobs + c.ahead_jobs == len(exports)
    assert c.commits < len(exports), c
    writer.close()

    expected, got = snapshot(in_thread), snapshot(tmp_path / "shared.duckdb")
    for name in TABLES:
        assert got[name] == expected[name], f"{name} differs"


@pytest.mark.parametrize("given, intake_busy", [("raw", False), ("spans", False), ("raw", True)])
def test_while_the_worker_is_busy_the_writer_thread_derives_the_next_group(
        tmp_path: Path, given: str, intake_busy: bool) -> None:
    """The apply thread, waiting on a worker's group, derives the group after it itself,
    unless exports are arriving (intake needs the process then); what it stores equals what
    the writer thread derives from the spans."""
    exports = [spans for spans in sample_exports() if spans]
    in_thread = tmp_path / "thread.duckdb"
    store = Store.open(in_thread)
    store.write([WriteJob(spans=spans) for spans in exports])
    store.close()

    pool = DerivePool(1)
    busy = pool.submit_call(time.sleep, (2,))  # the worker is busy when the exports arrive
    shared = tmp_path / "shared.duckdb"
    writer = Writer(Store.open(shared), pool=pool, max_batch_spans=1)  # a group each
    writer.intake_busy = lambda: intake_busy
    writer.start()
    futures = [writer.submit(as_job(spans, given, i)) for i, spans in enumerate(exports, 1)]
    stats = [f.result(120) for f in futures]
    busy.result(30)
    assert not any(s.normalize_errors for s in stats)
    assert writer.counters.failed_jobs == 0
    if intake_busy:
        assert writer.counters.ahead_jobs == 0, writer.counters
    else:
        assert 0 < writer.counters.ahead_jobs < len(exports), writer.counters
    assert writer.counters.worker_jobs + writer.counters.ahead_jobs == len(exports)
    writer.close()

    expected, got = snapshot(in_thread), snapshot(shared)
    assert len(expected["requests"]) > 10
    for name in TABLES:
        assert got[name] == expected[name], f"{name} differs"
