"""Offline commands on a store no collector holds: ingest, rebuild, prune, export."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from midtrace.collector.settings import ClickHouseURL
from midtrace.commands.options import (
    EXIT_USAGE, StoreCommand, fail, open_store, store_option, trace_id_option)

if TYPE_CHECKING:
    from midtrace.collector.storage.retention import PruneReport

WRITE_ANY_STORE_HELP = ("Where midtrace stores traces: a DuckDB file path or duckdb:///path "
                        "(no collector may hold it), or a ClickHouse store: "
                        "clickhouse://user@host:8123/db, clickhouses://..., chdb:///folder.")


@click.command(cls=StoreCommand)
@store_option(clickhouse=True, help=WRITE_ANY_STORE_HELP)
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
def ingest(db: Path, files: tuple[Path, ...]) -> None:
    """Load OTLP/JSON trace files and outcome files into the store (no collector may hold it)."""
    from midtrace.collector.intake.ingest import ingest_files

    store = open_store(db)
    try:
        with click.progressbar(length=len(files), label="ingesting", file=sys.stderr,
                               show_pos=True) as bar:
            report = ingest_files(store, list(files), progress=bar.update)
    finally:
        store.close()
    click.echo(f"ingested {report.spans} spans ({report.requests} request updates) and "
               f"{report.outcomes} outcomes from {report.files} file(s) into {db}")
    for message in report.refused[:20]:
        click.echo(f"refused: {message}", err=True)
    if len(report.refused) > 20:
        click.echo(f"refused: ... and {len(report.refused) - 20} more", err=True)
    if report.refused:
        sys.exit(1)


@click.command(cls=StoreCommand)
@store_option(clickhouse=True, help=WRITE_ANY_STORE_HELP)
def rebuild(db: Path) -> None:
    """Derive request, chunk and placement rows again from the kept spans (no collector may hold the store)."""
    from midtrace.collector.storage.rebuild import rebuild as rebuild_all
    from midtrace.collector.storage.rebuild import trace_count

    store = open_store(db)
    try:
        with click.progressbar(length=trace_count(store), label="rebuilding", file=sys.stderr,
                               show_pos=True) as bar:
            report = rebuild_all(store, progress=bar.update)
    finally:
        store.close()
    click.echo(f"rebuilt {report.requests} requests from {report.traces} traces in {db}")
    if report.normalize_errors:
        click.echo(f"{report.normalize_errors} trace(s) could not be normalized; run with "
                   "--log-level warning to see which", err=True)
        sys.exit(1)


@click.command(cls=StoreCommand)
@store_option(clickhouse=True, help=WRITE_ANY_STORE_HELP + " On ClickHouse, --older-than sets "
              "a retention (a TTL in whole days) instead, and --trace-id erases by mutations "
              "that rewrite the parts holding the traces' rows.")
@click.option("--older-than", envvar="MIDTRACE_OLDER_THAN", show_envvar=True, default=None,
              help="Delete traces whose newest span ended longer ago than this: 30d, 12h, 2w.")
@trace_id_option
@click.option("--compact/--no-compact", envvar="MIDTRACE_COMPACT", show_envvar=True, default=True,
              help="Rewrite the file afterwards so deleted text leaves no bytes on disk; also "
                   "done when an earlier prune's rewrite was skipped or cut short. On chdb: wait "
                   "until the parts the deletion replaced have left the disk (about 30 s); a "
                   "ClickHouse server removes them itself.")
def prune(db: Path, older_than: str | None, trace_ids: tuple[str, ...], compact: bool) -> None:
    """Delete whole traces (spans, derived rows, outcomes, orphaned texts) by age or id."""
    from midtrace.collector.storage.retention import check_trace_id, compaction_pending, parse_age
    from midtrace.collector.storage.retention import compact as compact_file
    from midtrace.collector.storage.retention import prune as prune_traces

    if older_than is None and not trace_ids:
        fail("say what to delete: --older-than AGE and/or --trace-id ID", EXIT_USAGE)
    try:
        age = parse_age(older_than) if older_than is not None else None
        for t in trace_ids:
            check_trace_id(t)
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    if isinstance(db, ClickHouseURL):
        _retain(db, age, trace_ids, compact)
        return
    store = open_store(db)
    try:
        report = prune_traces(store, age, trace_ids)
        compact = compact and compaction_pending(store)
    finally:
        store.close()
    if compact:
        compact_file(db)
    _said(report, str(db), " (file compacted)" if compact else "")


def _retain(url: ClickHouseURL, age: timedelta | None, trace_ids: tuple[str, ...],
            compact: bool) -> None:
    """``prune`` on ClickHouse: keep ``age`` of rows from now on, as a TTL on every
    day-partitioned table (docs/clickhouse.md, "Retention"), and erase the traces
    ``trace_ids`` now (collector/storage/clickhouse_erase.py; "Erasing traces"). On chdb,
    ``compact`` waits until the parts the erase replaced have left the disk: the process
    holding the folder removes them, and this one is about to end."""
    from midtrace.collector.storage import clickhouse
    from midtrace.collector.storage.clickhouse_erase import erase, wait_for_replaced_parts

    days = None
    if age is not None:
        days, rest = divmod(age, timedelta(days=1))
        if rest or days < 1:
            fail(f"a ClickHouse store keeps whole days: give --older-than in days or weeks "
                 f"(30d, 2w), not {age}", EXIT_USAGE)
    open_store(url).close()  # its tables brought up to date first
    conn = clickhouse.connect(url)
    if days is not None:
        clickhouse.set_retention(conn, days)
        click.echo(f"{url} keeps {days} days from now on: ClickHouse drops older rows as it "
                   "merges their parts (a TTL on every day-partitioned table)")
    if trace_ids:
        report = erase(conn, trace_ids)
        removed = ""
        if compact and url.scheme == "chdb":
            removed = (" (replaced parts removed)" if wait_for_replaced_parts(conn) else
                       " (replaced parts not yet removed: the next process holding the folder "
                       "removes them)")
        _said(report, str(url), removed)


def _said(report: PruneReport, store: str, done: str) -> None:
    """What ``prune`` deleted, and which of the trace ids it was given the store held nothing
    of (a mistyped id, a trace erased already): those are named, not counted as deleted."""
    click.echo(f"deleted {report.traces} trace(s): {report.spans} spans, {report.requests} "
               f"requests, {report.outcomes} outcomes from {store}{done}")
    if report.not_stored:
        click.echo(f"not stored, so not deleted: {len(report.not_stored)} trace id(s) named: "
                   + ", ".join(report.not_stored))


@click.command(cls=StoreCommand)
@store_option(clickhouse=True, help=WRITE_ANY_STORE_HELP)
@trace_id_option
def export(db: Path, trace_ids: tuple[str, ...]) -> None:
    """Write chosen traces to stdout as OTLP/JSON lines, the format `ingest` reads."""
    from midtrace.collector.storage.export import export_lines

    if not trace_ids:
        fail("name the traces to export with --trace-id ID (repeatable)", EXIT_USAGE)
    store = open_store(db)
    missing = []
    try:
        for trace_id, line in export_lines(store, trace_ids):
            if line is None:
                missing.append(trace_id)
            else:
                click.echo(line)
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    finally:
        store.close()
    if missing:
        fail(f"no spans stored for trace(s) {', '.join(missing)}", 1)
