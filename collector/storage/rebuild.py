"""Derive the request, chunk and placement rows again from the kept spans.

Run after upgrading the normalizer (a new convention understood, a bug fixed) so old traffic
is analysed the way new traffic is. Each trace keeps its request id and its span outcome's id,
so running it twice gives the same rows. On ClickHouse each trace gets a new version
(clickhouse_store.py), which the views read in place of the old one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from midtrace.collector.storage.clickhouse_store import ClickHouseStore
from midtrace.collector.storage.store import Store
from midtrace.sql import sqlfiles

BATCH_TRACES = 2_000


@dataclass
class RebuildReport:
    traces: int = 0
    requests: int = 0
    normalize_errors: int = 0


def trace_count(store: Store | ClickHouseStore) -> int:
    return int(_column(store, "trace_count")[0])


def _column(store: Store | ClickHouseStore, name: str) -> list[Any]:
    """The first column of the named query's rows, on either engine."""
    if isinstance(store, ClickHouseStore):
        return store.conn.query(sqlfiles.query(name, engine="clickhouse")).column(0).to_pylist()
    return [row[0] for row in store.conn.execute(sqlfiles.query(name)).fetchall()]


def rebuild(store: Store | ClickHouseStore, progress: Callable[[int], None] | None = None,
            batch_traces: int = BATCH_TRACES) -> RebuildReport:
    """Re-normalize every stored trace, ``batch_traces`` per transaction."""
    report = RebuildReport()
    trace_ids = _column(store, "all_trace_ids")
    for i in range(0, len(trace_ids), batch_traces):
        batch = trace_ids[i:i + batch_traces]
        stats = store.rederive(batch)
        report.traces += stats.traces
        report.requests += stats.requests
        report.normalize_errors += len(stats.normalize_errors)
        if progress:
            progress(len(batch))
    return report
