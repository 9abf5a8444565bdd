"""The intake log: acknowledged exports kept durably, as received, until they are derived.

An export is acknowledged once it is appended here (one commit for a group of exports), not
once it is normalized and its rows derived: that is the OpenTelemetry Collector's and
Kafka's contract, and it keeps the answer to the exporter cheap. The derive step deletes an
export's entry in the transaction that writes its rows (Store.write), so whatever is still
here after a crash is derived again when the store is next opened for writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from midtrace.collector.storage.database import CommittedThenInvalidated
from midtrace.collector.storage.execute import transaction
from midtrace.collector.storage.raw_export import RawExport
from midtrace.sql import sqlfiles

_SCHEMA = pa.schema([("export_id", pa.int64()), ("received_at", pa.timestamp("us", tz="UTC")),
                     ("content_type", pa.string()), ("content_encoding", pa.string()),
                     ("body", pa.binary())])


@dataclass(frozen=True)
class LoggedExport:
    export_id: int
    received_at: datetime
    export: RawExport


class IntakeLog:
    """Appends to the log on a cursor of its own, so a group commit here never waits for
    (or joins) the derive step's transaction on the store's connection."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, next_id: int = 1) -> None:
        """``next_id``: the lowest id to give (a log reopened on a new connection goes on
        counting, so ids stay in acknowledgement order for the freshness wait)."""
        self.conn = conn.cursor()
        row = self.conn.execute(sqlfiles.query("max_export_id")).fetchone()
        self._next_id = max(next_id, int(row[0]) + 1 if row else 1)

    @property
    def next_id(self) -> int:
        return self._next_id

    def append(self, exports: Sequence[RawExport]) -> list[int]:
        """Append the exports in one transaction; returns their ids once it is committed.
        A commit that held though the checkpoint after it did not raises
        CommittedThenInvalidated with the ids as its ``result``."""
        ids = list(range(self._next_id, self._next_id + len(exports)))
        now = datetime.now(UTC)
        table = pa.table([ids, [now] * len(ids), [e.content_type for e in exports],
                          [e.content_encoding for e in exports], [e.body for e in exports]],
                         schema=_SCHEMA)
        try:
            with transaction(self.conn):
                self.conn.register("_intake", table)
                try:
                    self.conn.execute(sqlfiles.query("insert_intake_log"))
                finally:
                    self.conn.unregister("_intake")
        except CommittedThenInvalidated as e:
            self._next_id += len(ids)
            e.result = ids
            raise
        self._next_id += len(ids)
        return ids

    def pending(self) -> list[LoggedExport]:
        return [LoggedExport(int(i), at, RawExport(bytes(body), ctype, enc))
                for i, at, ctype, enc, body in
                self.conn.execute(sqlfiles.query("pending_intake_log")).fetchall()]

    def close(self) -> None:
        self.conn.close()
