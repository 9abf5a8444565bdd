"""The `midtrace` command: a thin layer over library functions.

Each command calls one function and turns midtrace's own errors into a one-line message
and an exit code. Every option can also be set by the environment variable shown in
`--help` (flag > MIDTRACE_* variable > default).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from midtrace.collector.settings import (
    DEFAULT_FORWARD_QUEUE, DEFAULT_GRPC_PORT, DEFAULT_HOST, DEFAULT_HTTP_PORT, DEFAULT_MAX_BODY_MB,
    DEFAULT_QUEUE_SIZE, CollectorSettings, SettingsError)
from midtrace.supervise import (
    DEFAULT_DASHBOARD_PORT, DashboardSettings, LaunchError, ServeSettings, port_or_any,
    run_dashboard, run_serve)

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


def _from_env(param: str) -> bool:
    source = click.get_current_context().get_parameter_source(param)
    return source is click.core.ParameterSource.ENVIRONMENT


def db_option(required: bool = True):  # type: ignore[no-untyped-def]
    return click.option("--db", envvar="MIDTRACE_DB", show_envvar=True, required=required,
                        type=click.Path(dir_okay=False, path_type=Path),
                        help="DuckDB file midtrace stores traces in.")


host_option = click.option("--host", envvar="MIDTRACE_HOST", show_envvar=True, default=DEFAULT_HOST,
                           help="Address to bind; anything but loopback exposes the server and "
                                "needs a token.")
token_option = click.option(
    "--token", envvar="MIDTRACE_TOKEN", show_envvar=True, default=None,
    help="Shared token: every endpoint but /healthz, and opening the dashboard, then want it "
         "('Authorization: Bearer <token>'); required when --host is not loopback. Prefer the "
         "variable: flags show in ps.")


def _http_port_option(default: int = DEFAULT_HTTP_PORT):  # type: ignore[no-untyped-def]
    return click.option("--http-port", envvar="MIDTRACE_HTTP_PORT", show_envvar=True,
                        default=default, type=click.IntRange(0, 65535),
                        help="OTLP/HTTP and query API port; 0 picks a free one.")


def collector_options(fn):  # type: ignore[no-untyped-def]
    """The collector's options, shared by `collector`, `serve` and `demo`."""
    for option in reversed([
        host_option,
        _http_port_option(),
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
        click.option("--no-text", envvar="MIDTRACE_NO_TEXT", show_envvar=True, is_flag=True,
                     help="Never store chunk, prompt, question or answer text: hashes, offsets "
                          "and lengths only."),
        click.option("--forward", envvar="MIDTRACE_FORWARD", show_envvar=True, multiple=True,
                     callback=lambda ctx, param, value: _split_commas(value),
                     help="Also send every accepted batch to this OTLP/HTTP endpoint "
                          "(repeatable; the variable takes a comma-separated list)."),
        click.option("--forward-header", envvar="MIDTRACE_FORWARD_HEADERS", show_envvar=True,
                     multiple=True, callback=lambda ctx, param, value: _split_commas(value),
                     help="KEY=VALUE header sent to every forward target, e.g. "
                          "Authorization=Basic%20... (repeatable; the variable is "
                          "comma-separated)."),
        click.option("--forward-queue", envvar="MIDTRACE_FORWARD_QUEUE", show_envvar=True,
                     default=DEFAULT_FORWARD_QUEUE, type=click.IntRange(1, 1_000_000),
                     help="Batches held per forward target; when full the oldest is dropped."),
    ]):
        fn = option(fn)
    return fn


def _collector_settings(db: Path, host: str, http_port: int, grpc_port: int, token: str | None,
                        max_body_mb: int, queue_size: int, no_text: bool,
                        forward: tuple[str, ...], forward_header: tuple[str, ...],
                        forward_queue: int) -> CollectorSettings:
    """Check the collector's options and build its settings; usage errors exit 2."""
    from urllib.parse import unquote

    from midtrace.collector.receive.forward import traces_url

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
    settings = CollectorSettings(db=str(db), host=host, http_port=http_port,
                                 max_body_bytes=max_body_mb * 1024 * 1024, queue_size=queue_size,
                                 grpc_port=grpc_port, token=token, keep_text=not no_text,
                                 forward=forward, forward_headers=headers,
                                 forward_queue=forward_queue)
    try:
        settings.check()
    except SettingsError as e:
        _fail(str(e), EXIT_USAGE)
    return settings


@cli.command()
@db_option()
@collector_options
def collector(db: Path, **options: Any) -> None:
    """Receive OTLP traces (HTTP and gRPC) and outcomes and store them in DB."""
    from midtrace.collector.normalize.locate import InvalidCitationPattern, citation_pattern
    from midtrace.collector.receive.http import run
    from midtrace.collector.storage.store import StoreError

    try:
        citation_pattern()
    except InvalidCitationPattern as e:
        _fail(f"MIDTRACE_CITATION_PATTERN: {e}", EXIT_USAGE)
    settings = _collector_settings(db, **options)
    try:
        run(settings)
    except StoreError as e:
        _fail(str(e), EXIT_SOURCE)
    except OSError as e:
        _fail(f"cannot listen on {settings.host}: {e.strerror or e}", EXIT_SOURCE)


def _split_commas(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _open_store(db: Path):  # type: ignore[no-untyped-def]
    from midtrace.collector.storage.store import Store, StoreError

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
    from midtrace.collector.intake.ingest import ingest_files
    from midtrace.collector.storage.store import Store, StoreError

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
@click.option("--cases", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cases file, JSON lines (docs/sweep.md).")
@click.option("--endpoint", envvar="MIDTRACE_SWEEP_ENDPOINT", show_envvar=True, required=True,
              help="OpenAI-compatible API base URL; calls POST {endpoint}/chat/completions "
                   "(e.g. http://localhost:8000/v1). API key from MIDTRACE_SWEEP_API_KEY, "
                   "else OPENAI_API_KEY.")
@click.option("--model", envvar="MIDTRACE_SWEEP_MODEL", show_envvar=True, required=True,
              help="Model name sent to the endpoint and recorded on every trace.")
@click.option("--experiment", envvar="MIDTRACE_SWEEP_EXPERIMENT", show_envvar=True,
              help="Experiment name; rerunning one resumes it. Default: "
                   "<cases file stem>-<model>-<YYYYMMDD>.")
@click.option("--ranks", envvar="MIDTRACE_SWEEP_RANKS", show_envvar=True, default="all",
              help="Retrieval ranks for the decisive chunk: all, edges+middle (1, ceil(k/2), k) "
                   "or a list such as 1,5,10.")
@click.option("--strategies", envvar="MIDTRACE_SWEEP_STRATEGIES", show_envvar=True,
              default="score_order",
              help="Packing strategies, comma-separated: score_order, edge, "
                   "long_context_reorder, reverse, doc_order_within_source.")
@click.option("--absent", is_flag=True, envvar="MIDTRACE_SWEEP_ABSENT", show_envvar=True,
              help="Add the closed-book condition: the distractors without the decisive chunk.")
@click.option("--repeats", envvar="MIDTRACE_SWEEP_REPEATS", show_envvar=True, default=1,
              type=click.IntRange(1, 1000), help="Calls per condition (raise --temperature too).")
@click.option("--concurrency", envvar="MIDTRACE_SWEEP_CONCURRENCY", show_envvar=True, default=4,
              type=click.IntRange(1, 256), help="Calls in flight at once.")
@click.option("--template", envvar="MIDTRACE_SWEEP_TEMPLATE", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Prompt template file with {documents}, {question} and optional {k}; "
                   "default: the Lost in the Middle QA prompt.")
@click.option("--url", envvar="MIDTRACE_URL", show_envvar=True,
              help="Send traces to the collector at this URL (OTLP/HTTP).")
@click.option("--token", envvar="MIDTRACE_TOKEN", show_envvar=True,
              help="Bearer token for the collector at --url.")
@db_option(required=False)
@click.option("--state-dir", envvar="MIDTRACE_SWEEP_STATE_DIR", show_envvar=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where resume journals live. Default: .midtrace/sweeps next to the cases file.")
@click.option("--temperature", envvar="MIDTRACE_SWEEP_TEMPERATURE", show_envvar=True, default=0.0,
              type=click.FloatRange(0, 2), help="Sampling temperature sent to the endpoint.")
@click.option("--max-tokens", envvar="MIDTRACE_SWEEP_MAX_TOKENS", show_envvar=True, default=100,
              type=click.IntRange(1), help="Most tokens the model may answer with.")
@click.option("--timeout", envvar="MIDTRACE_SWEEP_TIMEOUT", show_envvar=True, default=120.0,
              type=click.FloatRange(0.1), help="Seconds to wait for one answer before retrying.")
@click.option("--retries", envvar="MIDTRACE_SWEEP_RETRIES", show_envvar=True, default=5,
              type=click.IntRange(0, 100), help="Retries of a call on 429, 5xx or a timeout.")
@click.option("--backoff", envvar="MIDTRACE_SWEEP_BACKOFF", show_envvar=True, default=0.5,
              type=click.FloatRange(0), help="First retry wait in seconds, doubling each retry "
                                             "(Retry-After wins when the endpoint sends it).")
@click.option("--format", "output_format", envvar="MIDTRACE_SWEEP_FORMAT", show_envvar=True,
              default="text", type=click.Choice(["text", "json"]), help="Summary format on stdout.")
def sweep(cases: Path, endpoint: str, model: str, experiment: str | None, ranks: str,
          strategies: str, absent: bool, repeats: int, concurrency: int, template: Path | None,
          url: str | None, token: str | None, db: Path | None, state_dir: Path | None,
          temperature: float, max_tokens: int, timeout: float, retries: int, backoff: float,
          output_format: str) -> None:
    """Measure a model's accuracy by evidence position on your own cases."""
    import json
    import os

    from midtrace.sweep import summary as summaries
    from midtrace.sweep.client import RetryPolicy, api_key_from_env
    from midtrace.sweep.conditions import ConditionError, parse_ranks, parse_strategies
    from midtrace.sweep.prompt import Template, TemplateError
    from midtrace.sweep.runner import Sweep, SweepError, SweepSettings

    if url is not None and db is not None and _from_env("db"):
        db = None  # MIDTRACE_DB set for other commands; --url given for this one
    if (url is None) == (db is None):
        _fail("give exactly one of --url (a running collector) or --db (a DuckDB file)", EXIT_USAGE)
    try:
        settings = SweepSettings(
            cases=cases, endpoint=endpoint, model=model, experiment=experiment,
            ranks=parse_ranks(ranks), strategies=parse_strategies(strategies), absent=absent,
            repeats=repeats, concurrency=concurrency,
            template=Template.load(template) if template else None, url=url, token=token,
            db=db, state_dir=state_dir, api_key=api_key_from_env(os.environ), timeout=timeout,
            retry=RetryPolicy(retries=retries, backoff=backoff), temperature=temperature,
            max_tokens=max_tokens)
    except (ConditionError, TemplateError) as e:
        _fail(str(e), EXIT_USAGE)
    try:
        run = Sweep.prepare(settings)
    except SweepError as e:
        _fail(str(e))
    for line in run.bad_lines:
        click.echo(f"{cases}: {line}", err=True)
    for note in run.notes:
        click.echo(f"note: {note}", err=True)
    todo = len(run.todo)
    click.echo(f"experiment {run.experiment}: {len(run.trials)} calls planned, "
               f"{run.resumed} already recorded, {todo} to run", err=True)
    try:
        with click.progressbar(length=todo, label="sweeping", file=sys.stderr, show_pos=True,
                               show_eta=True) as bar:
            result = run.run(progress=bar.update)
    except SweepError as e:
        _fail(str(e))
    for failure in run.failures[:20]:
        click.echo("failed: case {}, {}, {}, repeat {}: ".format(*failure.key) + failure.message,
                   err=True)
    if output_format == "json":
        click.echo(json.dumps(summaries.to_json(result), indent=2))
    else:
        click.echo(summaries.to_text(result))
    if run.failures:
        click.echo(f"{len(run.failures)} call(s) failed; rerun the same command to retry them",
                   err=True)
    if run.bad_lines or run.failures:
        sys.exit(1)


dashboard_port_option = click.option(
    "--port", envvar="MIDTRACE_DASHBOARD_PORT", show_envvar=True, default=DEFAULT_DASHBOARD_PORT,
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
    from midtrace.collector.storage.store import StoreError, connect

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
def rebuild(db: Path) -> None:
    """Derive request, chunk and placement rows again from the kept spans (no collector may hold DB)."""
    from midtrace.collector.storage.rebuild import rebuild as rebuild_all
    from midtrace.collector.storage.rebuild import trace_count

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
@collector_options
@dashboard_port_option
def serve(db: Path, port: int, **options: Any) -> None:
    """Run a collector on DB and the dashboard reading through it; both stop together."""
    settings = ServeSettings(_collector_settings(db, **options), dashboard_port=port)
    try:
        code = run_serve(settings)
    except LaunchError as e:
        _fail(str(e), EXIT_USAGE)
    sys.exit(code)


@cli.command()
@click.option("--db", envvar="MIDTRACE_DEMO_DB", show_envvar=True, default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="New DuckDB file for the demo; must not exist. Default: .midtrace/demo.duckdb, "
                   "replaced on every run.")
@collector_options
@dashboard_port_option
@click.pass_context
def demo(ctx: click.Context, db: Path | None, port: int, **options: Any) -> None:
    """Load the bundled sample traces into a fresh database and start collector + dashboard.

    A default port that something else holds (an OpenTelemetry Collector on 4317, say) is
    swapped for a free one; a port you name is used as given.
    """
    from midtrace.demo import DEFAULT_DB, DemoError, fresh_database, load_samples, sample_files

    path = db or DEFAULT_DB
    host = options["host"]
    for name in ("http_port", "grpc_port"):
        if _is_default(ctx, name):
            options[name] = _swap_if_taken(host, options[name])
    if _is_default(ctx, "port"):
        port = _swap_if_taken(host, port)
    settings = ServeSettings(_collector_settings(path, **options), dashboard_port=port)
    try:
        settings.check()
        fresh_database(path, owned=db is None)
        files = sample_files()
        with click.progressbar(length=len(files), label="loading sample traces", file=sys.stderr,
                               show_pos=True) as bar:
            report = load_samples(path, keep_text=settings.collector.keep_text,
                                  progress=bar.update)
    except (DemoError, LaunchError) as e:
        _fail(str(e), EXIT_USAGE)
    click.echo(f"loaded {report.spans} spans and {report.outcomes} late outcomes from "
               f"{report.files} sample files into {path} (synthetic data, see sample_traces/README.md)",
               err=True)
    try:
        code = run_serve(settings)
    except LaunchError as e:
        _fail(f"{e} (pass --http-port 0 --grpc-port 0 --port 0 to pick free ports)", EXIT_USAGE)
    sys.exit(code)


def _is_default(ctx: click.Context, param: str) -> bool:
    return ctx.get_parameter_source(param) is click.core.ParameterSource.DEFAULT


def _swap_if_taken(host: str, port: int) -> int:
    free = port_or_any(host, port)
    if free != port:
        click.echo(f"port {port} is taken; the demo uses a free one instead", err=True)
    return free


# --- reading: report and gate ------------------------------------------------------------------


def _source_options(fn):  # type: ignore[no-untyped-def]
    fn = click.option("--token", envvar="MIDTRACE_TOKEN", show_envvar=True, default=None,
                      help="Bearer token for the collector's query API, if it asks for one.")(fn)
    fn = click.option("--url", envvar="MIDTRACE_URL", show_envvar=True, default=None,
                      help="A running collector to read through (its query API).")(fn)
    fn = click.option("--db", envvar="MIDTRACE_DB", show_envvar=True, default=None,
                      type=click.Path(dir_okay=False, path_type=Path),
                      help="A DuckDB file to read, opened read-only (no collector may hold it).")(fn)
    fn = click.option("--since", default=None, help="Start of the time range, inclusive "
                      "(RFC 3339 or YYYY-MM-DD, UTC).")(fn)
    fn = click.option("--until", default=None, help="End of the time range, exclusive.")(fn)
    fn = click.option("--filter", "filter_pairs", multiple=True, metavar="KEY=VALUE",
                      help="Keep requests with KEY=VALUE; keys: since, until, service, model, "
                      "template, strategy, experiment, context_bucket. Repeatable.")(fn)
    return fn


def _filters(since: str | None, until: str | None, pairs: tuple[str, ...]):  # type: ignore[no-untyped-def]
    from midtrace.schemas.reads import Filters, QueryError

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


def _group_by(value: str | None) -> tuple[str, ...]:
    from midtrace.schemas.reads import QueryError, parse_group_by

    try:
        return parse_group_by(value)
    except QueryError as e:
        raise click.UsageError(str(e)) from None


def _open_source(ctx: click.Context, db: Path | None, url: str | None, token: str | None):  # type: ignore[no-untyped-def]
    from click.core import ParameterSource

    from midtrace.client import ClientError, open_client

    if url and db:
        if ctx.get_parameter_source("db") is ParameterSource.ENVIRONMENT:
            db = None  # an explicit --url wins over MIDTRACE_DB
        elif ctx.get_parameter_source("url") is ParameterSource.ENVIRONMENT:
            url = None
        else:
            raise click.UsageError("give --db or --url, not both")
    if not url and not db:
        raise click.UsageError("give --db PATH (a DuckDB file) or --url URL (a running collector)")
    try:
        return open_client(url=url, db=db, token=token)
    except ClientError as e:
        _fail(str(e), EXIT_SOURCE)


def _read(fn):  # type: ignore[no-untyped-def]
    """Run a read, turning a source that cannot be read into exit 3."""
    from midtrace.client import ClientError, QueryError, SourceError
    from midtrace.collector.storage.store import StoreError

    try:
        return fn()
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    except (SourceError, StoreError) as e:
        _fail(str(e), EXIT_SOURCE)
    except ClientError as e:
        _fail(str(e), EXIT_SOURCE)


@cli.command()
@_source_options
@click.option("--group-by", "group_by", default=None, metavar="KEY,...",
              help="Split every figure by these keys: service, model, template, strategy, "
              "experiment, context_bucket, week.")
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="md",
              help="json (docs/report-schema.md), Markdown, or HTML with inline SVG charts.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.pass_context
def report(ctx: click.Context, db: Path | None, url: str | None, token: str | None,
           since: str | None, until: str | None, filter_pairs: tuple[str, ...],
           group_by: str | None, fmt: str, output: Path | None) -> None:
    """The weekly review: accuracy by band and slot, taxonomy, citations, sweeps."""
    from midtrace.report import build_report, render

    filters = _filters(since, until, filter_pairs)
    keys = _group_by(group_by)
    client = _open_source(ctx, db, url, token)
    try:
        text = render(_read(lambda: build_report(client, filters, keys)), fmt)
    finally:
        client.close()
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)


class _Threshold(click.ParamType):
    name = "NUMBER|off"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if value is None or isinstance(value, float):
            return value
        if str(value).lower() == "off":
            return None
        try:
            return float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number or 'off'", param, ctx)


@cli.command()
@_source_options
@click.option("--max-buried-rate", type=_Threshold(), default="0.1", envvar="MIDTRACE_MAX_BURIED_RATE",
              show_envvar=True, help="Fail when buried / graded-wrong is above this ('off' skips).")
@click.option("--max-sensitivity-delta", type=_Threshold(), default="0.15",
              envvar="MIDTRACE_MAX_SENSITIVITY_DELTA", show_envvar=True,
              help="Fail when a sweep's max-min accuracy across placements is above this "
              "('off' skips; no sweep data fails).")
@click.option("--min-accuracy", type=_Threshold(), default="0.8", envvar="MIDTRACE_MIN_ACCURACY",
              show_envvar=True, help="Fail when accuracy of graded requests is below this ('off' skips).")
@click.option("--min-n", type=click.IntRange(0), default=50, envvar="MIDTRACE_MIN_N", show_envvar=True,
              help="Fewest graded requests to judge; fewer fails as no data.")
@click.pass_context
def gate(ctx: click.Context, db: Path | None, url: str | None, token: str | None,
         since: str | None, until: str | None, filter_pairs: tuple[str, ...],
         max_buried_rate: float | None, max_sensitivity_delta: float | None,
         min_accuracy: float | None, min_n: int) -> None:
    """Judge the traffic against thresholds: exit 0 pass, 1 fail or no data, 2 usage, 3 source."""
    from midtrace.gate import Thresholds, evaluate

    filters = _filters(since, until, filter_pairs)
    thresholds = Thresholds(max_buried_rate=max_buried_rate,
                            max_sensitivity_delta=max_sensitivity_delta,
                            min_accuracy=min_accuracy, min_n=min_n)
    client = _open_source(ctx, db, url, token)
    try:
        result = _read(lambda: evaluate(client, filters, thresholds))
    finally:
        client.close()
    for check in result.checks:
        click.echo(check.line())
    click.echo("gate: pass" if result.passed else "gate: FAIL")
    sys.exit(0 if result.passed else 1)


@cli.command()
@db_option()
@click.option("--older-than", envvar="MIDTRACE_OLDER_THAN", show_envvar=True, default=None,
              help="Delete traces whose newest span ended longer ago than this: 30d, 12h, 2w.")
@trace_id_option
@click.option("--compact/--no-compact", envvar="MIDTRACE_COMPACT", show_envvar=True, default=True,
              help="Rewrite the file afterwards so deleted text leaves no bytes on disk.")
def prune(db: Path, older_than: str | None, trace_ids: tuple[str, ...], compact: bool) -> None:
    """Delete whole traces (spans, derived rows, outcomes, orphaned texts) by age or id."""
    from midtrace.collector.storage.retention import check_trace_id, parse_age
    from midtrace.collector.storage.retention import compact as compact_file
    from midtrace.collector.storage.retention import prune as prune_traces

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
    from midtrace.collector.storage.export import export_lines

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
