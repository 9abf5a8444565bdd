"""Retention and erasure: delete whole traces (every row of them) by age or by id.

Deleted rows leave their bytes in DuckDB's file blocks until those blocks are reused, so
for an erasure request the file is then compacted: copied table by table into a fresh file
that replaces it (``compact``), after which the deleted text is gone from the disk file.

The deletion records in the same transaction that the file owes a compaction (the
``pending_work`` table), and only the compacted copy is without that record: a compaction cut
short (the process killed while copying) or skipped (``--no-compact``) is still owed, and the
next prune does it even when it deletes nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from midtrace.collector.storage.execute import run_script, transaction
from midtrace.collector.storage.store import Store, connect
from midtrace.sql import sqlfiles

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``, ``90m``, ``45s`` as a timedelta."""
    match = _AGE.match(text.lower())
    if not match:
        raise ValueError(f"{text!r} is not an age; write a number and a unit, e.g. 30d, 12h, 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def check_trace_id(trace_id: str) -> str:
    value = trace_id.strip().lower()
    if not _TRACE_ID.match(value):
        raise ValueError(f"trace id {trace_id!r} is not 32 hex characters")
    return value


@dataclass
class PruneReport:
    traces: int = 0  # traces deleted: those the store held anything of
    spans: int = 0
    requests: int = 0
    outcomes: int = 0
    not_stored: list[str] = field(default_factory=list)  # ids named that it held nothing of


def prune(store: Store, older_than: timedelta | None = None, trace_ids: Sequence[str] = (),
          now: datetime | None = None) -> PruneReport:
    """Delete the named traces and those older than ``older_than``, in one transaction."""
    conn = store.conn
    named = sorted({check_trace_id(t) for t in trace_ids})
    chosen = {t for (t,) in conn.execute(sqlfiles.query("stored_traces"),
                                          {"trace_ids": named}).fetchall()} if named else set()
    not_stored = [t for t in named if t not in chosen]
    if older_than is not None:
        cutoff = (now or datetime.now(UTC)) - older_than
        cutoff_ns = int(cutoff.timestamp() * 1e9)
        chosen.update(t for (t,) in conn.execute(sqlfiles.query("traces_older_than"),
                                                  [cutoff_ns, cutoff]).fetchall())
    report = PruneReport(traces=len(chosen), not_stored=not_stored)
    if not chosen:
        return report
    before = store.counts()
    with transaction(conn):
        run_script(conn, sqlfiles.query("delete_traces"), {"trace_ids": sorted(chosen)})
        conn.execute(sqlfiles.query("record_pending_compaction"), {"since": datetime.now(UTC)})
    store.forget_texts()
    after = store.counts()
    report.spans = before["spans"] - after["spans"]
    report.requests = before["requests"] - after["requests"]
    report.outcomes = before["outcomes"] - after["outcomes"]
    conn.checkpoint()
    return report


def compaction_pending(store: Store) -> bool:
    """Whether rows were deleted since the file was last compacted."""
    return store.conn.execute(sqlfiles.query("pending_compaction")).fetchone() is not None


def compact(path: str | Path) -> None:
    """Rewrite the database into a fresh file so deleted rows leave no bytes behind.

    The fresh file is written beside the database and renamed over it only when complete; one
    left by a compaction that was cut short is discarded first."""
    path = Path(path)
    fresh = path.with_name(path.name + ".compacting")
    for leftover in (fresh, _wal(fresh)):
        leftover.unlink(missing_ok=True)
    conn = connect(path)
    try:
        # fold the source's .wal in first: once the fresh file replaces it, a .wal left
        # beside it would belong to the old file
        conn.checkpoint()
        ((name,),) = conn.execute(sqlfiles.query("current_database")).fetchall()
        run_script(conn, sqlfiles.query("copy_database", database=name), {"path": str(fresh)})
    finally:
        conn.close()
    _wal(path).unlink(missing_ok=True)
    os.replace(fresh, path)


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")
