"""The `midtrace` command: a thin layer over library functions.

Each command calls one function and turns midtrace's own errors into a one-line message
and an exit code. Every option can also be set by the environment variable shown in
`--help` (flag > MIDTRACE_* variable > default).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

EXIT_USAGE = 2
EXIT_SOURCE = 3


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"midtrace: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--log-level", envvar="MIDTRACE_LOG_LEVEL", default="warning", show_envvar=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Logging verbosity.")
def cli(log_level: str) -> None:
    """midtrace: where the evidence sat in the prompt when a RAG answer went wrong."""
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")


def db_option(required: bool = True):  # type: ignore[no-untyped-def]
    return click.option("--db", envvar="MIDTRACE_DB", show_envvar=True, required=required,
                        type=click.Path(dir_okay=False, path_type=Path),
                        help="DuckDB file midtrace stores traces in.")


host_option = click.option("--host", envvar="MIDTRACE_HOST", show_envvar=True, default="127.0.0.1",
                           help="Address to bind; anything but loopback exposes the server.")


@cli.command()
@db_option()
@host_option
@click.option("--http-port", envvar="MIDTRACE_HTTP_PORT", show_envvar=True, default=4318,
              type=click.IntRange(0, 65535), help="OTLP/HTTP port; 0 picks a free one.")
@click.option("--max-body-mb", envvar="MIDTRACE_MAX_BODY_MB", show_envvar=True, default=64,
              type=click.IntRange(1, 4096), help="Largest request body accepted (after gunzip).")
@click.option("--queue-size", envvar="MIDTRACE_QUEUE_SIZE", show_envvar=True, default=256,
              type=click.IntRange(1, 100_000),
              help="Export batches the writer may hold before answering 503 Retry-After "
                   "(UNAVAILABLE over gRPC).")
@click.option("--grpc-port", envvar="MIDTRACE_GRPC_PORT", show_envvar=True, default=4317,
              type=click.IntRange(0, 65535), help="OTLP/gRPC port; 0 picks a free one.")
@click.option("--token", envvar="MIDTRACE_TOKEN", show_envvar=True, default=None,
              help="Shared token: every endpoint but /healthz then wants "
                   "'Authorization: Bearer <token>' (prefer the variable: flags show in ps).")
@click.option("--no-text", envvar="MIDTRACE_NO_TEXT", show_envvar=True, is_flag=True,
              help="Never store chunk, prompt, question or answer text: hashes, offsets and "
                   "lengths only.")
@click.option("--forward", envvar="MIDTRACE_FORWARD", show_envvar=True, multiple=True,
              callback=lambda ctx, param, value: _split_commas(value),
              help="Also send every accepted batch to this OTLP/HTTP endpoint (repeatable; "
                   "the variable takes a comma-separated list).")
@click.option("--forward-header", envvar="MIDTRACE_FORWARD_HEADERS", show_envvar=True,
              multiple=True, callback=lambda ctx, param, value: _split_commas(value),
              help="KEY=VALUE header sent to every forward target, e.g. "
                   "Authorization=Basic%20... (repeatable; the variable is comma-separated).")
@click.option("--forward-queue", envvar="MIDTRACE_FORWARD_QUEUE", show_envvar=True, default=1000,
              type=click.IntRange(1, 1_000_000),
              help="Batches held per forward target; when full the oldest is dropped.")
def collector(db: Path, host: str, http_port: int, max_body_mb: int, queue_size: int,
              grpc_port: int, token: str | None, no_text: bool, forward: tuple[str, ...],
              forward_header: tuple[str, ...], forward_queue: int) -> None:
    """Receive OTLP traces (HTTP and gRPC) and outcomes and store them in DB."""
    from urllib.parse import unquote

    from collector.forward import traces_url
    from collector.server import CollectorSettings, run
    from collector.store import StoreError

    headers = {}
    for item in forward_header:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            _fail(f"--forward-header {item!r} must look like KEY=VALUE", EXIT_USAGE)
        headers[key.strip()] = unquote(value.strip())
    for url in forward:
        try:
            traces_url(url)
        except ValueError as e:
            _fail(str(e), EXIT_USAGE)
    if token is not None and not token.strip():
        _fail("--token / MIDTRACE_TOKEN is empty; set a token or leave it unset", EXIT_USAGE)
    settings = CollectorSettings(db=str(db), host=host, http_port=http_port,
                                 max_body_bytes=max_body_mb * 1024 * 1024, queue_size=queue_size,
                                 grpc_port=grpc_port, token=token, keep_text=not no_text,
                                 forward=forward, forward_headers=headers,
                                 forward_queue=forward_queue)
    try:
        run(settings)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)
    except OSError as e:
        _fail(f"cannot listen on {host}: {e.strerror or e}", EXIT_SOURCE)


def _split_commas(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _open_store(db: Path):  # type: ignore[no-untyped-def]
    from collector.store import Store, StoreError

    try:
        return Store.open(db)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)


@cli.command()
@db_option()
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
def ingest(db: Path, files: tuple[Path, ...]) -> None:
    """Load OTLP/JSON trace files and outcome files into DB (no collector may hold it)."""
    from collector.ingest import ingest_files
    from collector.store import Store, StoreError

    try:
        store = Store.open(db)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)
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


@cli.command()
@db_option()
def rebuild(db: Path) -> None:
    """Derive request, chunk and placement rows again from the kept spans (no collector may hold DB)."""
    from collector.rebuild import rebuild as rebuild_all
    from collector.rebuild import trace_count

    store = _open_store(db)
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


trace_id_option = click.option(
    "--trace-id", "trace_ids", envvar="MIDTRACE_TRACE_ID", show_envvar=True, multiple=True,
    help="A trace id (32 hex characters); repeatable.")


@cli.command()
@db_option()
@click.option("--older-than", envvar="MIDTRACE_OLDER_THAN", show_envvar=True, default=None,
              help="Delete traces whose newest span ended longer ago than this: 30d, 12h, 2w.")
@trace_id_option
@click.option("--compact/--no-compact", envvar="MIDTRACE_COMPACT", show_envvar=True, default=True,
              help="Rewrite the file afterwards so deleted text leaves no bytes on disk.")
def prune(db: Path, older_than: str | None, trace_ids: tuple[str, ...], compact: bool) -> None:
    """Delete whole traces (spans, derived rows, outcomes, orphaned texts) by age or id."""
    from collector.retention import check_trace_id, parse_age
    from collector.retention import compact as compact_file
    from collector.retention import prune as prune_traces

    if older_than is None and not trace_ids:
        _fail("say what to delete: --older-than AGE and/or --trace-id ID", EXIT_USAGE)
    try:
        age = parse_age(older_than) if older_than is not None else None
        for t in trace_ids:
            check_trace_id(t)
    except ValueError as e:
        _fail(str(e), EXIT_USAGE)
    store = _open_store(db)
    try:
        report = prune_traces(store, age, trace_ids)
    finally:
        store.close()
    if compact and report.traces:
        compact_file(db)
    click.echo(f"deleted {report.traces} trace(s): {report.spans} spans, {report.requests} "
               f"requests, {report.outcomes} outcomes from {db}"
               + (" (file compacted)" if compact and report.traces else ""))


@cli.command()
@db_option()
@trace_id_option
def export(db: Path, trace_ids: tuple[str, ...]) -> None:
    """Write chosen traces to stdout as OTLP/JSON lines, the format `ingest` reads."""
    from collector.export import export_lines

    if not trace_ids:
        _fail("name the traces to export with --trace-id ID (repeatable)", EXIT_USAGE)
    store = _open_store(db)
    missing = []
    try:
        for trace_id, line in export_lines(store, trace_ids):
            if line is None:
                missing.append(trace_id)
            else:
                click.echo(line)
    except ValueError as e:
        _fail(str(e), EXIT_USAGE)
    finally:
        store.close()
    if missing:
        _fail(f"no spans stored for trace(s) {', '.join(missing)}", 1)


def main() -> None:
    cli(prog_name="midtrace")
