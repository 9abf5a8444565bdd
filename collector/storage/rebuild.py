"""Derive the request, chunk and placement rows again from the kept spans.

Run after upgrading the normalizer (a new convention understood, a bug fixed) so old traffic
is analysed the way new traffic is. Each trace keeps its request id and its span outcome's id,
so running it twice gives the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from midtrace.collector.storage.store import Store
from midtrace.sql import sqlfiles

BATCH_TRACES = 2_000


@dataclass
class RebuildReport:
    traces: int = 0
    requests: int = 0
    normalize_errors: int = 0


def trace_count(store: Store) -> int:
    ((n,),) = store.conn.execute(sqlfiles.query("trace_count")).fetchall()
    return int(n)


def rebuild(store: Store, progress: Callable[[int], None] | None = None,
            batch_traces: int = BATCH_TRACES) -> RebuildReport:
    """Re-normalize every stored trace, ``batch_traces`` per transaction."""
    report = RebuildReport()
    trace_ids = [t for (t,) in store.conn.execute(sqlfiles.query("all_trace_ids")).fetchall()]
    for i in range(0, len(trace_ids), batch_traces):
        batch = trace_ids[i:i + batch_traces]
        stats = store.rederive(batch)
        report.traces += stats.traces
        report.requests += stats.requests
        report.normalize_errors += len(stats.normalize_errors)
        if progress:
            progress(len(batch))
    return report
