"""A collector on a shared store (ClickHouse) answers an export whose spans could not be
stored for want of the server with 503 / UNAVAILABLE, which exporters retry, and any other
failure as it is; a server that went away after the acknowledgement delays the derivation
until it is back, and loses nothing.

No ClickHouse server runs here, so the store stands in for one whose server has gone away:
its statements raise clickhouse-connect's OperationalError, as a refused connection does."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest
from clickhouse_connect.driver.exceptions import OperationalError, ProgrammingError

from midtrace.collector.storage.appender import Freshness, SharedAppender, StoreUnavailable
from midtrace.collector.storage.intake_log import RawExport
from midtrace.collector.storage.store import WriteJob, WriteStats
from midtrace.collector.storage.writer import Writer
from midtrace.schemas.span import SpanRecord

SPAN = SpanRecord("ab" * 16, "cd" * 8, "llm", 1_000, 2_000, {})


class FailingStore:
    shared = True
    keep_text = True
    owed_evidence = 0  # as ClickHouseStore: every write computes its request_evidence

    def __init__(self, error: Exception, store_fails: bool = True, write_failures: int = 1_000_000) -> None:
        self.error = error
        self.store_fails = store_fails
        self.write_failures = write_failures  # derivations that fail before the server is back
        self.attempts = 0
        self.writes = 0
        self.stored: list[SpanRecord] = []
        self.derived: list[str] = []

    def store_spans(self, exports: Sequence[Sequence[SpanRecord]]) -> None:
        self.attempts += 1
        if self.store_fails:
            raise self.error
        self.stored.extend(s for spans in exports for s in spans)

    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        jobs = list(jobs)
        self.writes += 1
        if self.writes <= self.write_failures:
            raise self.error
        self.derived.extend(s.trace_id for job in jobs for s in job.spans)
        return WriteStats(spans=sum(len(job.spans) for job in jobs))

    def close(self) -> None:
        pass


@pytest.mark.parametrize("error, answered", [
    (OperationalError("HTTPConnectionPool(host='ch', port=8123): Connection refused"),
     StoreUnavailable),
    (ProgrammingError("Code: 62. Syntax error"), ProgrammingError),
])
def test_a_failed_write_is_answered_by_its_cause(error: Exception, answered: type) -> None:
    store = FailingStore(error)
    writer = Writer(store).start()  # type: ignore[arg-type]
    appender = SharedAppender(writer, Freshness()).start()
    try:
        done = appender.submit(RawExport(b"", "application/x-protobuf"), [SPAN], 1)
        with pytest.raises(answered) as raised:
            done.result(10)
        assert type(raised.value) is answered
        assert store.attempts == 1 and not store.stored and not store.derived
        assert appender.last_error and str(error).split(":")[0] in appender.last_error
        assert appender.alive and writer.alive  # one failed export stops nothing
        # an unreachable server makes the collector unready until a statement succeeds
        assert bool(appender.unwritable) is (answered is StoreUnavailable)
    finally:
        appender.close()
        writer.close()


def test_an_acknowledged_export_is_derived_once_the_server_is_back() -> None:
    # the spans are stored and acknowledged; then the server goes away for 3 statements
    store = FailingStore(OperationalError("Connection refused"), store_fails=False,
                         write_failures=3)
    writer = Writer(store).start()  # type: ignore[arg-type]
    freshness = Freshness()
    writer.on_derived = freshness.derived
    appender = SharedAppender(writer, freshness).start()
    try:
        done = appender.submit(RawExport(b"", "application/x-protobuf"), [SPAN], 1)
        assert done.result(10) == 1
        assert store.stored == [SPAN]
        assert freshness.wait(10)
        assert store.derived == [SPAN.trace_id]
        assert store.writes == 3 + 1  # three refused, then the one that went through
        assert writer.counters.failed_jobs == 0
    finally:
        appender.close()
        writer.close()
