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
              help="Export batches the writer may hold before answering 503 Retry-After.")
def collector(db: Path, host: str, http_port: int, max_body_mb: int, queue_size: int) -> None:
    """Receive OTLP traces and outcomes and store them in DB."""
    from collector.server import CollectorSettings, run
    from collector.store import StoreError

    settings = CollectorSettings(db=str(db), host=host, http_port=http_port,
                                 max_body_bytes=max_body_mb * 1024 * 1024, queue_size=queue_size)
    try:
        run(settings)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)
    except OSError as e:
        _fail(f"cannot listen on {host}:{http_port}: {e.strerror or e}", EXIT_SOURCE)


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


token_option = click.option("--token", envvar="MIDTRACE_TOKEN", show_envvar=True, default=None,
                            help="Token that opening the dashboard asks for (required when --host "
                                 "is not loopback); also sent to the collector's query API.")
dashboard_port_option = click.option(
    "--port", envvar="MIDTRACE_DASHBOARD_PORT", show_envvar=True, default=8501,
    type=click.IntRange(0, 65535), help="Dashboard port; 0 picks a free one.")


@cli.command()
@click.option("--url", envvar="MIDTRACE_URL", show_envvar=True, default=None,
              help="A running collector to read through (its query API), e.g. http://127.0.0.1:4318.")
@db_option(required=False)
@token_option
@host_option
@dashboard_port_option
def dashboard(url: str | None, db: Path | None, token: str | None, host: str, port: int) -> None:
    """Open the dashboard on a running collector (--url) or a DuckDB file (--db, read-only)."""
    from collector.store import StoreError, connect
    from dashboard.launch import DashboardSettings, LaunchError, run_dashboard

    settings = DashboardSettings(url=url, db=str(db) if db else None, token=token, host=host,
                                 port=port)
    try:
        settings.check()
        if db is not None:
            connect(db, read_only=True).close()
        code = run_dashboard(settings)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)
    except LaunchError as e:
        _fail(str(e), EXIT_USAGE)
    sys.exit(code)


@cli.command()
@db_option()
@host_option
@click.option("--http-port", envvar="MIDTRACE_HTTP_PORT", show_envvar=True, default=4318,
              type=click.IntRange(0, 65535), help="OTLP/HTTP and query API port; 0 picks a free one.")
@dashboard_port_option
@token_option
def serve(db: Path, host: str, http_port: int, port: int, token: str | None) -> None:
    """Run a collector on DB and the dashboard reading through it; both stop together."""
    from dashboard.launch import LaunchError, run_serve

    try:
        code = run_serve(str(db), host, http_port, port, token)
    except LaunchError as e:
        _fail(str(e), EXIT_USAGE)
    sys.exit(code)


def main() -> None:
    cli(prog_name="midtrace")
