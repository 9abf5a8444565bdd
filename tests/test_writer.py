"""The writer thread in-process: callers that give up never hurt it, and the health endpoint
tells the truth when it is not running."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from midtrace.collector.intake import otlp
from midtrace.collector.intake.accept import BUSY_SECONDS
from midtrace.collector.receive.http import create_app
from midtrace.collector.settings import CollectorSettings
from midtrace.collector.storage.store import Store, WriteJob, WriteStats
from midtrace.collector.storage.threads import OS_NAME_BYTES, NamedThread
from midtrace.collector.storage.writer import Writer
from tests.e2e.test_collector import rows
from tests.e2e.test_grpc_overload import batch_of_spans


def jobs(n: int, tag: str) -> list[WriteJob]:
    out = []
    for i in range(n):
        spans = [s for s, _ in otlp.spans_of(otlp.encode_sdk_spans(batch_of_spans(1, f"{tag}{i}")))]
        out.append(WriteJob(spans=[s for s in spans if s is not None]))
    return out


def test_cancelled_callers_are_committed_and_the_writer_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    writer = Writer(Store.open(db), max_queue=64).start()
    futures = [writer.submit(job) for job in jobs(20, "gone")]
    cancelled = sum(f.cancel() for f in futures)
    assert cancelled > 0, "every job was committed before its cancel: the test proves nothing"
    later = writer.submit(jobs(1, "later")[0])
    # the stats of the commit it went in, which may hold the cancelled jobs too
    assert later.result(30).requests >= 1
    assert writer.alive
    writer.close()
    assert rows(db, "SELECT count(*) FROM requests") == [(21,)]


class BrokenStore(Store):
    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        raise SystemExit("the store went away")  # not an Exception: the thread stops


def test_health_says_not_ready_when_the_writer_is_not_running(tmp_path: Path) -> None:
    writer = Writer(BrokenStore.open(tmp_path / "b.duckdb")).start()
    client = TestClient(create_app(writer, CollectorSettings(db=str(tmp_path / "b.duckdb"))))
    assert client.get("/healthz").json()["status"] == "ready"
    writer.submit(jobs(1, "x")[0])
    writer._thread.join(10)
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] == "not ready"
    assert "the store went away" in health.json()["reason"]
    writer.close(timeout=1)


class FailingStore(Store):
    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        raise RuntimeError("disk on fire")


def test_a_failed_write_is_answered_in_json_not_plain_text(tmp_path: Path) -> None:
    writer = Writer(FailingStore.open(tmp_path / "f.duckdb")).start()
    client = TestClient(create_app(writer, CollectorSettings(db=str(tmp_path / "f.duckdb"))),
                        raise_server_exceptions=False)
    answer = client.post("/v1/outcomes", json={"outcomes": [{"trace_id": "ab" * 16, "correct": True}]})
    assert answer.status_code == 500
    assert "disk on fire" in answer.json()["error"]
    writer.close(timeout=5)


def test_a_backlog_of_large_exports_is_refused_by_its_bytes(tmp_path: Path) -> None:
    from midtrace.collector.storage.appender import Appender, Freshness
    from midtrace.collector.storage.intake_log import IntakeLog, RawExport
    from midtrace.collector.storage.writer import QueueFull

    store = Store.open(tmp_path / "bytes.duckdb")
    writer = Writer(store, max_backlog_bytes=1000)  # not started yet: nothing is derived
    appender = Appender(IntakeLog(store.conn), writer, Freshness()).start()
    body = otlp.encode_sdk_spans(batch_of_spans(3, "big")).SerializeToString()
    assert len(body) > 1000
    appender.submit(RawExport(body, "application/x-protobuf"), [], 3).result(10)
    assert writer.backlog_bytes == len(body)
    with pytest.raises(QueueFull, match="MB of exports"):
        appender.submit(RawExport(body, "application/x-protobuf"), [], 3)
    writer.start()
    writer.flush(30)
    assert writer.backlog_bytes == 0
    appender.submit(RawExport(body, "application/x-protobuf"), [], 3).result(10)  # room again
    appender.close()
    writer.close()
    assert rows(tmp_path / "bytes.duckdb", "SELECT count(*) FROM requests") == [(3,)]


def test_a_mixed_group_is_cut_in_order_into_runs_by_what_a_worker_derives_them_from() -> None:
    from midtrace.collector.storage.intake_log import RawExport
    from midtrace.collector.storage.writer import _runs, _worker_input
    from midtrace.schemas.model import Outcome

    raw = RawExport(b"x", "application/x-protobuf")
    decoded = jobs(1, "own")[0]
    kinds = [WriteJob(raw=raw, count=1, export_id=1), WriteJob(raw=raw, count=1, export_id=2),
             WriteJob(spans=decoded.spans, raw=raw, export_id=3),
             WriteJob(spans=decoded.spans, raw=raw, export_id=4),
             WriteJob(outcomes=[Outcome(correct=True, trace_id="a" * 32)]),
             WriteJob(spans=decoded.spans, export_id=5, stored=True),
             WriteJob(raw=raw, count=1, export_id=6), WriteJob()]
    runs = _runs([(job, None) for job in kinds], _worker_input)  # type: ignore[misc]
    assert [[job.export_id for job, _ in run] for run in runs] == [[1, 2], [3, 4], [None, 5], [6], [None]]
    assert [_worker_input(run[0][0]) for run in runs] == ["raw", "spans", None, "raw", None]


def test_a_named_thread_takes_its_name_in_the_os_cut_to_what_linux_keeps() -> None:
    seen: list[str] = []

    def read_own_name() -> None:
        seen.append(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip())

    for name in ("midtrace-writer", "midtrace-" + "x" * 40):
        thread = NamedThread(target=read_own_name, name=name)
        thread.start()
        thread.join(10)
    assert seen == ["writer", "x" * OS_NAME_BYTES]


def test_an_export_waits_in_the_log_compressed_and_is_derived_as_sent(tmp_path: Path) -> None:
    """What came uncompressed waits zstd-compressed (in DuckDB's memory, its write-ahead log
    and the backlog); what came gzipped waits as it came; both count as received."""
    import gzip

    from midtrace.collector.storage.appender import Appender, Freshness
    from midtrace.collector.storage.intake_log import IntakeLog, RawExport
    from midtrace.collector.storage.raw_export import STORED_ZSTD

    db = tmp_path / "compact.duckdb"
    store = Store.open(db)
    writer = Writer(store)  # not started yet: the exports wait in the log
    appender = Appender(IntakeLog(store.conn), writer, Freshness()).start()
    plain = otlp.encode_sdk_spans(batch_of_spans(40, "plain")).SerializeToString()
    gzipped = gzip.compress(otlp.encode_sdk_spans(batch_of_spans(40, "gz")).SerializeToString())
    appender.submit(RawExport(plain, "application/x-protobuf"), [], 40).result(10)
    appender.submit(RawExport(gzipped, "application/x-protobuf", "gzip"), [], 40).result(10)
    kept = store.conn.execute("SELECT content_encoding, octet_length(body) FROM intake_log "
                              "ORDER BY export_id").fetchall()
    assert kept[0][0] == STORED_ZSTD and kept[0][1] < len(plain) / 3, (kept, len(plain))
    assert kept[1] == ("gzip", len(gzipped))
    assert writer.backlog_bytes == len(plain) + len(gzipped)
    writer.start()
    writer.flush(30)
    appender.close()
    writer.close()
    assert writer.counters.failed_jobs == 0, writer.counters.last_error
    assert rows(db, "SELECT count(*) FROM requests") == [(80,)]
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]


def test_a_store_out_of_memory_is_reopened_and_nothing_acknowledged_is_lost(
        tmp_path: Path) -> None:
    """DuckDB out of memory may fail even the rollback, leaving a transaction nothing ends
    ("Current transaction is aborted"): the writer must not fail the acknowledged export but
    wait while the appender reopens the store (a new instance, with its memory), then derive
    it. Here the running instance is starved on purpose; the reopened one is not."""
    from midtrace.collector.intake.accept import recover
    from midtrace.collector.storage.appender import Appender, Freshness
    from midtrace.collector.storage.intake_log import IntakeLog, RawExport

    db = tmp_path / "oom.duckdb"
    store = Store.open(db)
    writer = Writer(store)  # started below, once the export is acknowledged
    appender = Appender(IntakeLog(store.conn), writer, Freshness(),
                        on_reopen=lambda: recover(store)).start()
    writer.on_fatal = appender.mark_broken
    body = otlp.encode_sdk_spans(batch_of_spans(200, "oom")).SerializeToString()
    assert appender.submit(RawExport(body, "application/x-protobuf"), [], 200).result(10) == 1
    used = store.conn.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
    store.conn.execute(f"SET memory_limit = '{(used >> 10) + 256}KiB'")  # about what it holds
    writer.start()
    writer.flush(60)
    appender.close()
    writer.close()
    assert writer.counters.failed_jobs == 0, writer.counters.last_error
    assert writer.counters.last_error is not None, "DuckDB never ran out of memory: the test proves nothing"
    assert "memory" in writer.counters.last_error.lower() or "aborted" in writer.counters.last_error
    assert appender.unwritable is None
    assert rows(db, "SELECT count(*) FROM requests") == [(200,)]
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]


class OneTraceFaults(Store):
    """A store whose derivation of one trace fails for what the trace holds (a fault in the
    code that derives it): what the mixed-type array did before spanstore handled it."""

    poisoned: str = ""

    def _store_and_derive(self, new_spans, rows, received_at, stats):  # type: ignore[no-untyped-def]
        if any(trace_id == self.poisoned for trace_id, _ in new_spans):
            raise TypeError("object of type 'int' has no len()")
        return super()._store_and_derive(new_spans, rows, received_at, stats)


def export_of_three(tag: str) -> tuple[bytes, str]:
    """One export of three traces, and the trace id of its second."""
    request = otlp.encode_sdk_spans(batch_of_spans(3, tag))
    spans = [s for s, _ in otlp.spans_of(request) if s is not None]
    second = sorted({s.trace_id for s in spans}, key=[s.trace_id for s in spans].index)[1]
    return request.SerializeToString(), second


def test_a_fault_in_one_traces_derivation_costs_that_trace_only(tmp_path: Path) -> None:
    from midtrace.collector.storage.appender import Appender, Freshness
    from midtrace.collector.storage.intake_log import IntakeLog, RawExport

    body, poisoned = export_of_three("fault")
    store = OneTraceFaults.open(tmp_path / "fault.duckdb")
    store.poisoned = poisoned
    writer = Writer(store).start()
    appender = Appender(IntakeLog(store.conn), writer, Freshness()).start()
    appender.submit(RawExport(body, "application/x-protobuf"), [], 9).result(10)
    writer.flush(30)
    appender.close()
    writer.close()
    db = tmp_path / "fault.duckdb"
    stored = {t for (t,) in rows(db, "SELECT trace_id FROM requests")}
    assert len(stored) == 2 and poisoned not in stored
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]  # no restart meets it again
    assert writer.counters.failed_traces == 1 and writer.counters.failed_jobs == 0


def test_an_export_that_faults_in_the_log_does_not_stop_a_start(tmp_path: Path) -> None:
    """Recovery (a collector's start, ingest, ...) once raised on such an export, so the
    collector could not start again until the file was mended by hand."""
    from midtrace.collector.intake.accept import recover
    from midtrace.collector.storage.intake_log import IntakeLog, RawExport

    body, poisoned = export_of_three("start")
    db = tmp_path / "start.duckdb"
    store = Store.open(db)
    IntakeLog(store.conn).append([RawExport(body, "application/x-protobuf")])
    store.close()  # a stop before the export was derived
    faulty = OneTraceFaults.open(db)
    faulty.poisoned = poisoned
    assert recover(faulty) == 1
    faulty.close()
    stored = {t for (t,) in rows(db, "SELECT trace_id FROM requests")}
    assert len(stored) == 2 and poisoned not in stored
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]


def test_the_writer_derives_nothing_ahead_while_exports_arrive(tmp_path: Path) -> None:
    """The app tells its writer when intake is busy: for BUSY_SECONDS after each export."""
    db = tmp_path / "busy.duckdb"
    writer = Writer(Store.open(db)).start()
    client = TestClient(create_app(writer, CollectorSettings(db=str(db))))
    assert not writer.intake_busy()
    body = otlp.encode_sdk_spans(batch_of_spans(1, "busy")).SerializeToString()
    answer = client.post("/v1/traces", content=body,
                         headers={"content-type": "application/x-protobuf"})
    assert answer.status_code == 200
    assert writer.intake_busy()
    time.sleep(BUSY_SECONDS * 2)
    assert not writer.intake_busy()
    writer.close()


def test_a_workers_group_waits_while_exports_arrive_but_never_a_flush(tmp_path: Path) -> None:
    """While intake is busy the apply thread holds a worker's group back (intake checks
    under the same GIL), up to YIELD_SECONDS; a reader waiting for fresh rows, a flush (or
    outcomes) behind it, and intake going quiet each end the wait."""
    from midtrace.collector.receive.bodies import PROTOBUF
    from midtrace.collector.storage.derive import DerivePool
    from midtrace.collector.storage.raw_export import RawExport
    from midtrace.collector.storage.writer import YIELD_SECONDS

    def raw_job(tag: str) -> WriteJob:
        body = otlp.encode_sdk_spans(batch_of_spans(3, tag)).SerializeToString()
        return WriteJob(raw=RawExport(body, PROTOBUF), count=3)

    db = tmp_path / "yield.duckdb"
    writer = Writer(Store.open(db), pool=DerivePool(1))
    busy, fresh = [False], [False]
    writer.intake_busy = lambda: busy[0]
    writer.wants_fresh = lambda: fresh[0]
    writer.start()
    try:
        writer.submit(raw_job("warm")).result(120)  # the worker has started: not held
        busy[0] = True
        held = writer.submit(raw_job("held"))
        time.sleep(YIELD_SECONDS / 4)
        assert not held.done(), "stored while exports arrive"
        busy[0] = False
        held.result(YIELD_SECONDS / 2)  # quiet again: stored before the wait would end

        busy[0] = True
        behind = writer.submit(raw_job("behind"))
        writer.flush(YIELD_SECONDS / 2)  # a flush behind it is not kept waiting
        assert behind.done()

        fresh_one = writer.submit(raw_job("fresh"))
        time.sleep(YIELD_SECONDS / 4)
        assert not fresh_one.done()
        fresh[0] = True
        fresh_one.result(YIELD_SECONDS / 2)
        fresh[0] = False

        started = time.monotonic()
        writer.submit(raw_job("bounded")).result(YIELD_SECONDS * 5)  # busy throughout
        assert time.monotonic() - started >= YIELD_SECONDS / 2
    finally:
        writer.close()
    assert writer.counters.failed_jobs == 0, writer.counters.last_error
    assert rows(db, "SELECT count(*) FROM requests") == [(15,)]
