"""Erasing chosen traces from a ClickHouse store: ``midtrace prune --trace-id`` on ClickHouse,
with the meaning it has on DuckDB (collector/storage/retention.py): every row of the traces
goes, and the texts only they referred to.

Where the rows of a trace are on ClickHouse (migrations/*.sql, their ClickHouse branches):

- by trace id: ``spans``, ``outcomes_versions`` (posted and span outcomes), ``derivations``,
  ``requests_versions``, ``request_evidence_versions``;
- by request id: ``chunks_versions``, ``placements_versions``, ``answer_sources_versions``,
  ``request_evidence_versions``, ``requests_versions``, ``derivations``. The request ids are
  read from the rows that name the trace, in every version, plus the trace's hashed id
  (clickhouse_store.request_id): a writer that stopped part way may have inserted chunks under
  it before the request row that names the trace;
- the copies a refresh of request_evidence made within the hour (``scoped_*``,
  queries/create_evidence_scopes.sql): by request id, and ``scoped_outcomes`` by trace id;
- by hash, shared between traces: ``texts`` (a span's large strings) and ``chunk_texts``,
  deleted only when no span or chunk left refers to them;
- none: ``settings``, ``prices``, ``derived_state``, ``pending_work`` (where an erase records
  its time, :class:`ErasureWatch`), ``schema_migrations``; ``intake_log`` is not written on
  ClickHouse (a shared store keeps no intake log).

Each table is a mutation (``ALTER TABLE ... DELETE``, queries/erase_traces.sql) that rewrites
the parts of the partitions holding the rows; the spans' is waited for first, then the others
run at once and are all waited for. A submitted mutation is kept by ClickHouse and finishes
even if this process stops. The parts a mutation replaced leave the disk when ClickHouse cleans
up old parts (docs/clickhouse.md, "Erasing traces").
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.database import StoreError
from midtrace.collector.storage.retention import PruneReport, check_trace_id
from midtrace.sql import sqlfiles

ENGINE = clickhouse.ENGINE
WAIT_SECONDS = 3600.0  # for the deletions to finish: a big store rewrites many parts
PARTS_SECONDS = 120.0  # for replaced parts to leave the disk: chdb removes them within ~30 s


def erase(conn: clickhouse.Connection, trace_ids: Sequence[str]) -> PruneReport:
    """Delete every row of the traces ``trace_ids`` from the store on ``conn``, and the texts
    nothing left refers to. Counted as DuckDB's prune counts: the traces it held anything of
    (the others named are listed in ``not_stored``), and their spans, current requests and
    outcomes.

    The texts go first, then the rows, table by table (parts/erase.sql). Nothing is lost if it
    stops part way: what is left of the traces is found again by the next erase of the same ids,
    and nothing left is derived back meanwhile."""
    chosen = sorted({check_trace_id(t) for t in trace_ids})
    report = PruneReport(traces=len(chosen))
    if not chosen:
        return report
    from midtrace.collector.storage.clickhouse_store import request_id  # which imports this

    found = conn.query(sqlfiles.query("erase_targets", engine=ENGINE),
                       {"trace_ids": chosen, "hashed": [request_id(t) for t in chosen]})
    targets = found.to_pylist()[0]
    stored = set(targets["stored_traces"] or [])
    report.traces = len(stored)
    report.not_stored = [t for t in chosen if t not in stored]
    report.spans = int(targets["spans"] or 0)
    report.requests = int(targets["requests"] or 0)
    report.outcomes = int(targets["outcomes"] or 0)
    ids = {"trace_ids": chosen, "request_ids": sorted(targets["request_ids"] or [])}
    texts = {"text_hashes": sorted(targets["text_hashes"] or []),
             "chunk_text_hashes": sorted(targets["chunk_text_hashes"] or [])}
    if any(texts.values()):
        clickhouse.run(conn, sqlfiles.query("record_erasure", engine=ENGINE))
        unused = conn.query(sqlfiles.query("erase_texts", engine=ENGINE), ids | texts)
        hashes = {name: sorted(unused.column(name)[0].as_py() or [])
                  for name in ("texts", "chunk_texts")}
        clickhouse.run(conn, sqlfiles.query("delete_texts", engine=ENGINE,
                                            tables=[t for t, h in hashes.items() if h]), hashes)
    partitions: dict[str, list[str]] = {}
    for row in conn.query(sqlfiles.query("erase_partitions", engine=ENGINE), ids).to_pylist():
        partitions.setdefault(row["table"], []).append(_partition_id(row["partition"]))
    clickhouse.run(conn, sqlfiles.query("erase_traces", engine=ENGINE, partitions=partitions),
                   ids)
    _wait_for_mutations(conn)
    return report


def _wait_for_mutations(conn: clickhouse.Connection, timeout: float = WAIT_SECONDS) -> None:
    """Wait until no mutation of the store's tables is left to run; one that failed, or
    still runs after ``timeout`` seconds, raises StoreError (it goes on in ClickHouse, and
    the same erase run again waits for it once more)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        unfinished = conn.query(sqlfiles.query("unfinished_mutations", engine=ENGINE)).to_pylist()
        if not unfinished:
            return
        failed = [m for m in unfinished if m["latest_fail_reason"]]
        if failed or time.monotonic() > deadline:
            first = (failed or unfinished)[0]
            raise StoreError(f"{len(unfinished)} deletion(s) on {conn.url} not finished, e.g. "
                             f"on {first['table']}: "
                             f"{first['latest_fail_reason'] or f'running after {timeout:.0f} s'}")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


_PARTITION_ID = re.compile(r"^[0-9A-Za-z_-]+$")


def _partition_id(value: str) -> str:
    """A partition id as ClickHouse gave it, checked before it is written into a statement."""
    if not _PARTITION_ID.match(value):
        raise StoreError(f"unexpected partition id {value!r}")
    return value


def wait_for_replaced_parts(conn: clickhouse.Connection, timeout: float = PARTS_SECONDS) -> bool:
    """Wait until the parts that mutations (or merges) replaced have left the disk, with the
    erased rows in them: whether they did within ``timeout`` seconds. ClickHouse removes them
    in the background: chdb within about 30 s while a process holds the folder, a server after
    its ``old_parts_lifetime``."""
    deadline = time.monotonic() + timeout
    sql = sqlfiles.query("replaced_parts", engine=ENGINE)
    while conn.query(sql).column("parts")[0].as_py():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class ErasureWatch:
    """Whether texts were erased from the store since a writer last looked: a writer remembers
    which texts and chunk texts it stored and does not insert them again, so after an erase it
    must forget them, or a trace sent again would be stored without the texts erased with it."""

    def __init__(self) -> None:
        self._looked = False
        self._seen: object = None

    def erased_since(self, conn: clickhouse.Connection) -> bool:
        """Whether an erase began since the last call (the first call only looks)."""
        found = conn.query(sqlfiles.query("last_erasure", engine=ENGINE)).column(0)[0].as_py()
        changed = self._looked and found != self._seen
        self._looked, self._seen = True, found
        return changed
