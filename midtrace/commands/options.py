"""Options and helpers shared by midtrace's commands, each defined once.

Every option can also be set by the environment variable shown in `--help`; a flag wins
over the variable, the variable over the default. Defaults come from the settings
dataclasses (midtrace.collector.settings, midtrace.supervise).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from midtrace.collector.settings import (
    DEFAULT_FORWARD_QUEUE, DEFAULT_GRPC_PORT, DEFAULT_HOST, DEFAULT_HTTP_PORT, DEFAULT_MAX_BODY_MB,
    DEFAULT_QUEUE_SIZE, ClickHouseURL, CollectorSettings, SettingsError, parse_store, store_path)
from midtrace.collector.settings import memory_limit as parse_memory_limit
from midtrace.supervise import DEFAULT_DASHBOARD_PORT

EXIT_USAGE = 2
EXIT_SOURCE = 3
EXIT_POST = 4  # the report or verdict was made but its post to a webhook failed

log = logging.getLogger(__name__)


def default_of(settings: type, name: str) -> Any:
    """The default the settings dataclass ``settings`` gives field ``name``: an option takes
    its default from there instead of writing it again."""
    for field in dataclasses.fields(settings):
        if field.name == name:
            if field.default is dataclasses.MISSING:
                raise TypeError(f"{settings.__name__}.{name} has no default")
            return field.default
    raise TypeError(f"{settings.__name__} has no field {name}")


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"midtrace: {message}", err=True)
    sys.exit(code)


def from_env(param: str) -> bool:
    source = click.get_current_context().get_parameter_source(param)
    return source is click.core.ParameterSource.ENVIRONMENT


class StoreURL(click.ParamType):
    """``--store``: a DuckDB path or ``duckdb:///path``, which becomes the file's Path; with
    ``clickhouse``, also a ClickHouse store's URL, which becomes a ClickHouseURL."""

    name = "URL|PATH"

    def __init__(self, clickhouse: bool = False) -> None:
        self.clickhouse = clickhouse

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path | ClickHouseURL:
        if isinstance(value, Path | ClickHouseURL):
            return value
        try:
            return parse_store(str(value)) if self.clickhouse else store_path(str(value))
        except SettingsError as e:
            self.fail(str(e), param, ctx)


url_option = click.option(
    "--url", envvar="MIDTRACE_URL", show_envvar=True, default=None,
    help="A running collector, e.g. http://127.0.0.1:4318: reads go through its query API "
         "(sweep sends its traces to it).")
READ_STORE_HELP = ("A store to read instead of --url, opened read-only (no collector may hold "
                   "it): a DuckDB file path or duckdb:///path.")
READ_ANY_STORE_HELP = ("A store to read instead of --url, opened read-only: a DuckDB file path "
                       "or duckdb:///path (no collector may hold it), or a ClickHouse store, "
                       "clickhouse://user@host:8123/database, clickhouses://... or "
                       "chdb:///folder (password in MIDTRACE_CLICKHOUSE_PASSWORD).")


def store_option(required: bool = True, help: str = "Where midtrace stores traces: a DuckDB "
                 "file path or duckdb:///path.", envvar: tuple[str, ...] = (
                     "MIDTRACE_STORE", "MIDTRACE_DB"),
                 clickhouse: bool = False):  # type: ignore[no-untyped-def]
    """``--store URL`` with ``--db PATH`` as its alias; the value arrives as ``db``. With
    ``clickhouse`` the command takes a ClickHouse store too (docs/architecture.md)."""
    return click.option("--store", "--db", "db", envvar=list(envvar), show_envvar=True,
                        required=required, type=StoreURL(clickhouse), help=help)


def filter_options(fn):  # type: ignore[no-untyped-def]
    """``--since``, ``--until`` and ``--filter KEY=VALUE``: the one set of filters."""
    fn = click.option("--since", default=None, help="Start of the time range, inclusive "
                      "(RFC 3339 or YYYY-MM-DD, UTC).")(fn)
    fn = click.option("--until", default=None, help="End of the time range, exclusive.")(fn)
    fn = click.option("--filter", "filter_pairs", multiple=True, metavar="KEY=VALUE",
                      help="Keep requests with KEY=VALUE; keys: since, until, service, model, "
                      "template, strategy, experiment, context_bucket, traffic, grader. Repeatable.")(fn)
    return fn


def parse_filters(since: str | None, until: str | None, pairs: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """The Filters of ``--since``, ``--until`` and ``--filter`` pairs; a bad one is a usage error."""
    from midtrace.collector.query.reads import Filters, QueryError

    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--filter wants KEY=VALUE, got {pair!r}")
        params[key.strip()] = value.strip()
    if since:
        params["since"] = since
    if until:
        params["until"] = until
    try:
        return Filters.from_params(params)
    except QueryError as e:
        raise click.UsageError(str(e)) from None


host_option = click.option("--host", envvar="MIDTRACE_HOST", show_envvar=True, default=DEFAULT_HOST,
                           help="Address to bind; anything but loopback exposes the server and "
                                "needs a token.")
def _token(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # click reads an empty variable as unset, which would start an exposed server open.
    if value is None and os.environ.get("MIDTRACE_TOKEN") == "":
        raise click.BadParameter("MIDTRACE_TOKEN is set but empty; set a token or unset it",
                                 ctx, param)
    if value is not None and not value.strip():
        raise click.BadParameter("the token is empty; give a token or leave it out", ctx, param)
    return value


token_option = click.option(
    "--token", envvar="MIDTRACE_TOKEN", show_envvar=True, default=None, callback=_token,
    help="Shared token: every endpoint but /healthz, and opening the dashboard, then want it "
         "('Authorization: Bearer <token>'); required when --host is not loopback. Prefer the "
         "variable: flags show in ps.")


def http_port_option(default: int = DEFAULT_HTTP_PORT):  # type: ignore[no-untyped-def]
    return click.option("--http-port", envvar="MIDTRACE_HTTP_PORT", show_envvar=True,
                        default=default, type=click.IntRange(0, 65535),
                        help="OTLP/HTTP and query API port; 0 picks a free one.")


def collector_options(fn):  # type: ignore[no-untyped-def]
    """The collector's options, shared by `collector`, `serve` and `demo`."""
    for option in reversed([
        host_option,
        http_port_option(),
        click.option("--grpc-port", envvar="MIDTRACE_GRPC_PORT", show_envvar=True,
                     default=DEFAULT_GRPC_PORT, type=click.IntRange(0, 65535),
                     help="OTLP/gRPC port; 0 picks a free one."),
        token_option,
        click.option("--max-body-mb", envvar="MIDTRACE_MAX_BODY_MB", show_envvar=True,
                     default=DEFAULT_MAX_BODY_MB, type=click.IntRange(1, 4096),
                     help="Largest request body accepted (after gunzip)."),
        click.option("--queue-size", envvar="MIDTRACE_QUEUE_SIZE", show_envvar=True,
                     default=DEFAULT_QUEUE_SIZE, type=click.IntRange(1, 100_000),
                     help="Export batches the writer may hold before answering 503 Retry-After "
                          "(UNAVAILABLE over gRPC)."),
        click.option("--derive-workers", envvar="MIDTRACE_DERIVE_WORKERS", show_envvar=True,
                     default=None, type=click.IntRange(0, 64),
                     help="Worker processes that derive rows from acknowledged exports "
                          "[default: the cores but one, at least 1]; 0 derives in the writer "
                          "thread."),
        click.option("--memory-limit", envvar="MIDTRACE_MEMORY_LIMIT", show_envvar=True,
                     default=None, metavar="SIZE",
                     help="Memory DuckDB may keep for the store's cache, e.g. 512MB or 2GiB "
                          "[default: DuckDB's, 80% of the machine's memory]."),
        click.option("--no-text", envvar="MIDTRACE_NO_TEXT", show_envvar=True, is_flag=True,
                     help="Store no free text from the traces (questions, answers, prompts, "
                          "documents, tool calls, notes): ids, labels, numbers, offsets and "
                          "content hashes only."),
        click.option("--forward", envvar="MIDTRACE_FORWARD", show_envvar=True, multiple=True,
                     callback=lambda ctx, param, value: split_commas(value),
                     help="Also send every accepted batch to this OTLP/HTTP endpoint "
                          "(repeatable; the variable takes a comma-separated list)."),
        click.option("--forward-header", envvar="MIDTRACE_FORWARD_HEADERS", show_envvar=True,
                     multiple=True, callback=lambda ctx, param, value: split_commas(value),
                     help="KEY=VALUE header sent to every forward target, e.g. "
                          "Authorization=Basic%20... (repeatable; the variable is "
                          "comma-separated)."),
        click.option("--forward-queue", envvar="MIDTRACE_FORWARD_QUEUE", show_envvar=True,
                     default=DEFAULT_FORWARD_QUEUE, type=click.IntRange(1, 1_000_000),
                     help="Batches held per forward target; when full the oldest is dropped."),
        prices_option,
    ]):
        fn = option(fn)
    return fn


def collector_settings(db: Path, host: str, http_port: int, grpc_port: int, token: str | None,
                        max_body_mb: int, queue_size: int, derive_workers: int | None, no_text: bool,
                        forward: tuple[str, ...], forward_header: tuple[str, ...],
                        forward_queue: int, prices_file: Path | None = None,
                        memory_limit: str | None = None) -> CollectorSettings:
    """Check the collector's options and build its settings; usage errors exit 2."""
    from urllib.parse import unquote

    from midtrace.collector.receive.forward import traces_url

    headers = {}
    for item in forward_header:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--forward-header {item!r} must look like KEY=VALUE", EXIT_USAGE)
        headers[key.strip()] = unquote(value.strip())
    for url in forward:
        try:
            traces_url(url)
        except ValueError as e:
            fail(str(e), EXIT_USAGE)
    try:
        limit = parse_memory_limit(memory_limit)
    except SettingsError as e:
        fail(str(e), EXIT_USAGE)
    settings = CollectorSettings(db=str(db), host=host, http_port=http_port,
                                 max_body_bytes=max_body_mb * 1024 * 1024, queue_size=queue_size,
                                 derive_workers=derive_workers,
                                 grpc_port=grpc_port, token=token, keep_text=not no_text,
                                 forward=forward, forward_headers=headers,
                                 forward_queue=forward_queue, prices=prices_file,
                                 memory_limit=limit)
    try:
        settings.check()
    except SettingsError as e:
        fail(str(e), EXIT_USAGE)
    return settings


def split_commas(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


class StoreCommand(click.Command):
    """A command that opens a store. A store found unusable at any point, on opening or
    halfway through (a damaged block is found only when something reads it), ends the command
    with one line that says what is wrong and what to do, exit status 3."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as e:
            from midtrace.collector.storage.database import StoreError, describe

            if isinstance(e, StoreError):
                fail(str(e), EXIT_SOURCE)
            duckdb = sys.modules.get("duckdb")  # loaded if it raised: --url alone never loads it
            if duckdb is None or not isinstance(e, duckdb.Error):
                raise
            log.debug("store error", exc_info=True)
            fail(str(describe(ctx.params.get("db"), e)), EXIT_SOURCE)


def open_store(db: Path | ClickHouseURL):  # type: ignore[no-untyped-def]
    """Open a store for writing, first deriving what a collector's stop left underived (a
    DuckDB file's intake log; on ClickHouse, traces whose stored spans no derivation has
    read), so every offline command sees every acknowledged export."""
    from midtrace.collector.storage.store import StoreError, open_writable

    try:
        store = open_writable(db)
    except StoreError as e:
        fail(str(e), EXIT_SOURCE)
    if isinstance(db, ClickHouseURL):
        recovered = store.recover().traces
        if recovered:
            click.echo(f"derived {recovered} traces a stopped writer left in {db}", err=True)
        return store
    from midtrace.collector.intake.accept import recover

    recovered = recover(store)
    if recovered:
        click.echo(f"derived {recovered} exports left in the intake log of {db}", err=True)
    return store


dashboard_port_option = click.option(
    "--port", envvar="MIDTRACE_DASHBOARD_PORT", show_envvar=True, default=DEFAULT_DASHBOARD_PORT,
    type=click.IntRange(0, 65535), help="Dashboard port; 0 picks a free one.")


trace_id_option = click.option(
    "--trace-id", "trace_ids", envvar="MIDTRACE_TRACE_ID", show_envvar=True, multiple=True,
    help="A trace id (32 hex characters); repeatable.")


def one_source(ctx: click.Context, url: str | None, db: Path | ClickHouseURL | None
               ) -> tuple[str | None, Path | ClickHouseURL | None]:
    """``--url`` or ``--store``, exactly one; a flag given on the command line wins over the
    other's environment variable (an explicit --url over MIDTRACE_DB)."""
    from click.core import ParameterSource

    if url and db:
        if ctx.get_parameter_source("db") is ParameterSource.ENVIRONMENT:
            db = None
        elif ctx.get_parameter_source("url") is ParameterSource.ENVIRONMENT:
            url = None
        else:
            raise click.UsageError("give --store or --url, not both")
    if not url and not db:
        raise click.UsageError("give --store PATH (a DuckDB file) or --url URL (a running collector)")
    return url, db


def open_source(ctx: click.Context, db: Path | ClickHouseURL | None, url: str | None,
                token: str | None):  # type: ignore[no-untyped-def]
    """A client on the one source given, reading everything a collector acknowledged so far
    (``fresh``); a source that cannot be opened exits 3."""
    from midtrace.client import ClientError, open_client

    url, db = one_source(ctx, url, db)
    try:
        return open_client(url=url, db=db, token=token, fresh=True)
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)


api_key_env_option = click.option(
    "--api-key-env", "api_key_env", default=None, metavar="VAR",
    help="The environment variable holding the model endpoint's API key (sent as 'Authorization: "
         "Bearer <key>'); the one convention of every command that calls a model.")


prices_option = click.option(
    "--prices", "prices_file", envvar="MIDTRACE_PRICES", show_envvar=True, default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Price table, JSON {model: {input_per_mtok, output_per_mtok}}, the one every command "
         "that calls a model counts its cost from, and the collector prices requests that "
         "report no cost with; default: the one shipped with midtrace (examples).")


def key_and_price(api_key_env: str | None, prices_file: Path | None, model: str,
                  fallbacks: Sequence[str] | None = None) -> tuple[str | None, Path, Any]:
    """What a command that calls a model needs before its first call: the endpoint's API key
    (``--api-key-env VAR``, else the first of ``fallbacks`` that is set) and the model's
    price from the price table, with the table's path (None when the model is not in it).
    A key variable that is unset or a price table that cannot be read exits 2."""
    from midtrace.llm import DEFAULT_KEY_ENVS, ApiKeyError, api_key
    from midtrace.prices import PriceError, load_prices, prices_path

    try:
        key = api_key(os.environ, api_key_env, DEFAULT_KEY_ENVS if fallbacks is None else fallbacks)
    except ApiKeyError as e:
        fail(str(e), EXIT_USAGE)
    table = prices_path(prices_file)
    try:
        price = load_prices(table).get(model)
    except PriceError as e:
        fail(str(e), EXIT_USAGE)
    return key, table, price


def load_references_or_exit(path: Path, nothing_done: str):  # type: ignore[no-untyped-def]
    """The references file (midtrace/references.py); a bad line is reported with its number
    and nothing is done (exit 2)."""
    from midtrace.references import load_references

    refs = load_references(path)
    if refs.bad:
        for message in refs.bad:
            click.echo(f"{path}: {message}", err=True)
        fail(f"{len(refs.bad)} line(s) of {path} cannot be used; {nothing_done}", EXIT_USAGE)
    return refs
