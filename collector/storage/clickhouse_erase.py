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
- by hash, shared between traces: ``texts`` (a span's large strings) and ``chunk_texts``,
  deleted only when no span or chunk left refers to them;
- none: ``settings``, ``prices``, ``derived_state``, ``pending_work``, ``schema_migrations``;
  ``intake_log`` is not written on ClickHouse (a shared store keeps no intake log).

Each table is a mutation (``ALTER TABLE ... DELETE``, queries/erase_traces.sql) that rewrites
the parts holding the rows, waited for; the parts it replaced leave the disk when ClickHouse
cleans up old parts (docs/clickhouse.md, "Erasing traces").
"""

from __future__ import annotations

from collections.abc import Sequence

from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.clickhouse_store import request_id
from midtrace.collector.storage.database import StoreError
from midtrace.collector.storage.retention import PruneReport, check_trace_id
from midtrace.sql import sqlfiles

ENGINE = clickhouse.ENGINE


def erase(conn: clickhouse.Connection, trace_ids: Sequence[str]) -> PruneReport:
    """Delete every row of the traces ``trace_ids`` from the store on ``conn``, and the texts
    nothing left refers to. Counted as DuckDB's prune counts: the traces named, and their spans,
    current requests and outcomes."""
    chosen = sorted({check_trace_id(t) for t in trace_ids})
    report = PruneReport(traces=len(chosen))
    if not chosen:
        return report
    found = conn.query(sqlfiles.query("erase_targets", engine=ENGINE),
                       {"trace_ids": chosen, "hashed": [request_id(t) for t in chosen]})
    targets = found.to_pylist()[0]
    report.spans = int(targets["spans"] or 0)
    report.requests = int(targets["requests"] or 0)
    report.outcomes = int(targets["outcomes"] or 0)
    clickhouse.run(conn, sqlfiles.query("erase_traces", engine=ENGINE), {
        "trace_ids": chosen,
        "request_ids": sorted(targets["request_ids"] or []),
        "text_hashes": sorted(targets["text_hashes"] or []),
        "chunk_text_hashes": sorted(targets["chunk_text_hashes"] or []),
    })
    unfinished = conn.query(sqlfiles.query("unfinished_mutations", engine=ENGINE)).to_pylist()
    if unfinished:
        first = unfinished[0]
        raise StoreError(f"{len(unfinished)} deletion(s) on {conn.url} not finished, e.g. on "
                         f"{first['table']}: {first['latest_fail_reason'] or 'still running'}")
    return report
