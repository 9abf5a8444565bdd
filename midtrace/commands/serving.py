"""Commands that run servers: collector, dashboard, serve, demo."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from midtrace.collector.settings import ClickHouseURL
from midtrace.commands.options import (
    EXIT_SOURCE, EXIT_USAGE, StoreCommand, collector_options, collector_settings,
    dashboard_port_option, fail, READ_ANY_STORE_HELP, host_option, store_option,
    token_option, url_option)
from midtrace.supervise import (
    DashboardSettings, LaunchError, ServeSettings, check_store, port_or_any, run_dashboard,
    run_serve)


@click.command(cls=StoreCommand)
@store_option(clickhouse=True, help="Where midtrace stores traces: a DuckDB file path or "
              "duckdb:///path, or a ClickHouse store shared with other collectors: "
              "clickhouse://user@host:8123/db, clickhouses://..., chdb:///folder.")
@collector_options
def collector(db: Path, **options: Any) -> None:
    """Receive OTLP traces (HTTP and gRPC) and outcomes and store them in the store."""
    from midtrace.collector.keep_out import keep_out

    if not isinstance(db, ClickHouseURL):
        keep_out()  # pandas: about 33 MB of the process's memory, for nothing (keep_out.py)
    from midtrace.collector.normalize.locate import InvalidCitationPattern, citation_pattern
    from midtrace.collector.receive.http import run
    from midtrace.collector.storage.store import StoreError

    try:
        citation_pattern()
    except InvalidCitationPattern as e:
        fail(f"MIDTRACE_CITATION_PATTERN: {e}", EXIT_USAGE)
    settings = collector_settings(db, **options)
    try:
        run(settings)
    except StoreError as e:
        fail(str(e), EXIT_SOURCE)
    except OSError as e:
        fail(f"cannot listen on {settings.host}: {e.strerror or e}", EXIT_SOURCE)


@click.command(cls=StoreCommand)
@url_option
@store_option(required=False, help=READ_ANY_STORE_HELP, clickhouse=True)
@token_option
@host_option
@dashboard_port_option
def dashboard(url: str | None, db: Path | ClickHouseURL | None, token: str | None, host: str,
              port: int) -> None:
    """Open the dashboard on a running collector (--url) or a store (--store, read-only: a
    DuckDB file or a ClickHouse store)."""
    from midtrace.client import FileClient, SourceError

    if isinstance(db, ClickHouseURL) and db.path is not None:
        db = replace(db, path=db.path.resolve())  # the dashboard's process opens it
    settings = DashboardSettings(url=url, db=str(db) if db else None, token=token, host=host,
                                 port=port)
    try:
        settings.check()
        # what the first page reads, read now: a store it cannot use fails here
        if isinstance(db, ClickHouseURL):
            try:
                check_store(str(db))
            except LaunchError as e:
                fail(str(e), EXIT_SOURCE)
        elif db is not None:
            with FileClient(db) as client:
                client.view("overview")
        code = run_dashboard(settings)
    except SourceError as e:
        fail(str(e), EXIT_SOURCE)
    except LaunchError as e:
        fail(str(e), EXIT_USAGE)
    sys.exit(code)


@click.command()
@store_option(clickhouse=True, help="Where midtrace stores traces: a DuckDB file path or "
              "duckdb:///path, or a ClickHouse store shared with other collectors: "
              "clickhouse://user@host:8123/db, clickhouses://..., chdb:///folder.")
@collector_options
@dashboard_port_option
def serve(db: Path, port: int, **options: Any) -> None:
    """Run a collector on the store and the dashboard reading through it; both stop together."""
    settings = ServeSettings(collector_settings(db, **options), dashboard_port=port)
    try:
        code = run_serve(settings)
    except LaunchError as e:
        fail(str(e), EXIT_USAGE)
    sys.exit(code)


@click.command()
@store_option(required=False, envvar=("MIDTRACE_DEMO_STORE", "MIDTRACE_DEMO_DB"),
              clickhouse=True,
              help="A new store for the demo: a DuckDB file path or duckdb:///path, or a "
                   "chdb:///folder, that must not exist; or an empty database of a ClickHouse "
                   "server, clickhouse://user@host:8123/db or clickhouses://... (password in "
                   "MIDTRACE_CLICKHOUSE_PASSWORD; one that holds a midtrace store is refused, "
                   "never dropped). Default: .midtrace/demo.duckdb, replaced on every run.")
@collector_options
@dashboard_port_option
@click.pass_context
def demo(ctx: click.Context, db: Path | ClickHouseURL | None, port: int, **options: Any) -> None:
    """Load the bundled sample traces into a fresh store and start collector + dashboard.

    A default port that something else holds (an OpenTelemetry Collector on 4317, say) is
    swapped for a free one; a port you name is used as given.
    """
    from midtrace.collector.storage.database import StoreError
    from midtrace.demo import DEFAULT_DB, DemoError, fresh_database, load_samples, sample_files

    path = db or DEFAULT_DB
    if isinstance(path, ClickHouseURL) and path.path is not None:
        path = replace(path, path=path.path.resolve())  # the collector's process opens it
    host = options["host"]
    for name in ("http_port", "grpc_port"):
        if _is_default(ctx, name):
            options[name] = _swap_if_taken(host, options[name])
    if _is_default(ctx, "port"):
        port = _swap_if_taken(host, port)
    settings = ServeSettings(collector_settings(path, **options), dashboard_port=port)
    try:
        settings.check()
        fresh_database(path, owned=db is None)
        files = sample_files()
        with click.progressbar(length=len(files), label="loading sample traces", file=sys.stderr,
                               show_pos=True) as bar:
            report = load_samples(path, keep_text=settings.collector.keep_text,
                                  progress=bar.update)
    except (DemoError, LaunchError) as e:
        fail(str(e), EXIT_USAGE)
    except StoreError as e:
        fail(str(e), EXIT_SOURCE)
    click.echo(f"loaded {report.spans} spans and {report.outcomes} late outcomes from "
               f"{report.files} sample files into {path} (synthetic data, see sample_traces/README.md)",
               err=True)
    try:
        code = run_serve(settings)
    except LaunchError as e:
        fail(f"{e} (pass --http-port 0 --grpc-port 0 --port 0 to pick free ports)", EXIT_USAGE)
    sys.exit(code)


def _is_default(ctx: click.Context, param: str) -> bool:
    return ctx.get_parameter_source(param) is click.core.ParameterSource.DEFAULT


def _swap_if_taken(host: str, port: int) -> int:
    free = port_or_any(host, port)
    if free != port:
        click.echo(f"port {port} is taken; the demo uses a free one instead", err=True)
    return free
