"""A collector on a shared store (ClickHouse) answers a write that failed for want of the
server with 503 / UNAVAILABLE, which exporters retry, and any other failure as it is.

No ClickHouse server runs here, so the store stands in for one whose server has gone away:
its writes raise clickhouse-connect's OperationalError, as a refused connection does."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from clickhouse_connect.driver.exceptions import OperationalError, ProgrammingError

from midtrace.collector.storage.appender import DirectAppender, StoreUnavailable
from midtrace.collector.storage.intake_log import RawExport
from midtrace.collector.storage.store import WriteJob, WriteStats
from midtrace.collector.storage.writer import Writer
from midtrace.schemas.span import SpanRecord

SPAN = SpanRecord("ab" * 16, "cd" * 8, "llm", 1_000, 2_000, {})


class FailingStore:
    shared = True
    keep_text = True

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.writes = 0

    def write(self, jobs: Iterable[WriteJob]) -> WriteStats:
        self.writes += 1
        raise self.error

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
    appender = DirectAppender(writer)
    try:
        done = appender.submit(RawExport(b"", "application/x-protobuf"), [SPAN], 1)
        with pytest.raises(answered) as raised:
            done.result(10)
        assert type(raised.value) is answered
        assert store.writes >= 1
        assert appender.last_error and str(error).split(":")[0] in appender.last_error
        assert appender.alive  # one failed write does not stop the writer
    finally:
        writer.close()
