"""`midtrace sweep`: a position sweep of your cases against an OpenAI-compatible endpoint."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from midtrace.collector.settings import ClickHouseURL
from midtrace.commands.options import (
    EXIT_USAGE, StoreCommand, api_key_env_option, default_of, fail, from_env, prices_option,
    store_option, token_option, url_option)
from midtrace.sweep.settings import RetryPolicy, SweepSettings


SWEEP_STORE_HELP = ("A store to write the traces to instead of --url: a DuckDB file path or "
                    "duckdb:///path (no collector may hold it), or a ClickHouse store, "
                    "clickhouse://user@host:8123/db, clickhouses://... or chdb:///folder "
                    "(password in MIDTRACE_CLICKHOUSE_PASSWORD).")


def sweep_default(name: str) -> Any:
    return default_of(SweepSettings, name)


def retry_default(name: str) -> Any:
    return default_of(RetryPolicy, name)



def sweep_run_options(required: bool = True):  # type: ignore[no-untyped-def]
    """The options of a sweep run (endpoint, model, conditions, calls), shared by `sweep` and
    `gate --cases`. ``required``: whether --endpoint and --model must be given."""
    def apply(fn):  # type: ignore[no-untyped-def]
        for option in reversed([
            click.option("--endpoint", envvar="MIDTRACE_SWEEP_ENDPOINT", show_envvar=True,
                         required=required,
                         help="OpenAI-compatible API base URL; calls POST "
                              "{endpoint}/chat/completions (e.g. http://localhost:8000/v1). API "
                              "key from --api-key-env, else MIDTRACE_SWEEP_API_KEY, else "
                              "OPENAI_API_KEY."),
            click.option("--model", envvar="MIDTRACE_SWEEP_MODEL", show_envvar=True,
                         required=required,
                         help="Model name sent to the endpoint and recorded on every trace."),
            click.option("--experiment", envvar="MIDTRACE_SWEEP_EXPERIMENT", show_envvar=True,
                         help="Experiment name; rerunning one resumes it. Default: "
                              "<cases file stem>-<model>-<YYYYMMDD>."),
            click.option("--ranks", envvar="MIDTRACE_SWEEP_RANKS", show_envvar=True,
                         default=str(sweep_default("ranks")),
                         help="Retrieval ranks for the decisive chunk: all, edges+middle "
                              "(1, ceil(k/2), k) or a list such as 1,5,10."),
            click.option("--absent", is_flag=True, envvar="MIDTRACE_SWEEP_ABSENT", show_envvar=True,
                         help="Add the closed-book condition: the distractors without the "
                              "decisive chunk."),
            click.option("--repeats", envvar="MIDTRACE_SWEEP_REPEATS", show_envvar=True,
                         default=sweep_default("repeats"), type=click.IntRange(1, 1000),
                         help="Calls per condition (raise --temperature too)."),
            click.option("--concurrency", envvar="MIDTRACE_SWEEP_CONCURRENCY", show_envvar=True,
                         default=sweep_default("concurrency"), type=click.IntRange(1, 256),
                         help="Calls in flight at once."),
            click.option("--template", envvar="MIDTRACE_SWEEP_TEMPLATE", show_envvar=True,
                         type=click.Path(exists=True, dir_okay=False, path_type=Path),
                         help="Prompt template file with {documents}, {question} and optional "
                              "{k}; default: the Lost in the Middle QA prompt."),
            click.option("--state-dir", envvar="MIDTRACE_SWEEP_STATE_DIR", show_envvar=True,
                         type=click.Path(file_okay=False, path_type=Path),
                         help="Where resume journals live. Default: .midtrace/sweeps next to the "
                              "cases file."),
            click.option("--temperature", envvar="MIDTRACE_SWEEP_TEMPERATURE", show_envvar=True,
                         default=sweep_default("temperature"), type=click.FloatRange(0, 2),
                         help="Sampling temperature sent to the endpoint."),
            click.option("--max-tokens", envvar="MIDTRACE_SWEEP_MAX_TOKENS", show_envvar=True,
                         default=sweep_default("max_tokens"), type=click.IntRange(1),
                         help="Most tokens the model may answer with."),
            click.option("--timeout", envvar="MIDTRACE_SWEEP_TIMEOUT", show_envvar=True,
                         default=sweep_default("timeout"), type=click.FloatRange(0.1),
                         help="Seconds to wait for one answer before retrying."),
            click.option("--retries", envvar="MIDTRACE_SWEEP_RETRIES", show_envvar=True,
                         default=retry_default("retries"), type=click.IntRange(0, 100),
                         help="Retries of a call on 429, 5xx or a timeout."),
            click.option("--backoff", envvar="MIDTRACE_SWEEP_BACKOFF", show_envvar=True,
                         default=retry_default("backoff"), type=click.FloatRange(0),
                         help="First retry wait in seconds, doubling each retry (Retry-After "
                              "wins when the endpoint sends it)."),
            api_key_env_option,
            prices_option,
        ]):
            fn = option(fn)
        return fn
    return apply


@dataclass(frozen=True)
class SweepRun:
    """What a sweep run was asked to do, as the options give it."""

    cases: Path
    endpoint: str
    model: str
    experiment: str | None
    ranks: str
    strategies: str
    absent: bool
    repeats: int
    concurrency: int
    template: Path | None
    state_dir: Path | None
    temperature: float
    max_tokens: int
    timeout: float
    retries: int
    backoff: float
    api_key_env: str | None = None
    prices_file: Path | None = None


def run_sweep(asked: SweepRun, url: str | None, token: str | None,
              db: Path | ClickHouseURL | None) -> Any:
    """Run the sweep, with progress on stderr; returns (the run, its summary). Usage errors
    exit 2 and a sweep that cannot run exits 1."""
    import os

    from midtrace.llm import ApiKeyError
    from midtrace.sweep.client import api_key_from_env
    from midtrace.sweep.conditions import ConditionError, parse_ranks, parse_strategies
    from midtrace.sweep.prompt import Template, TemplateError
    from midtrace.sweep.runner import Sweep, SweepError

    try:
        key = api_key_from_env(os.environ, asked.api_key_env)
    except ApiKeyError as e:
        fail(str(e), EXIT_USAGE)
    try:
        settings = SweepSettings(
            cases=asked.cases, endpoint=asked.endpoint, model=asked.model,
            experiment=asked.experiment, ranks=parse_ranks(asked.ranks),
            strategies=parse_strategies(asked.strategies), absent=asked.absent,
            repeats=asked.repeats, concurrency=asked.concurrency,
            template=Template.load(asked.template) if asked.template else None, url=url,
            token=token, db=db, state_dir=asked.state_dir,
            api_key=key, timeout=asked.timeout,
            retry=RetryPolicy(retries=asked.retries, backoff=asked.backoff),
            temperature=asked.temperature, max_tokens=asked.max_tokens,
            prices=asked.prices_file)
    except (ConditionError, TemplateError) as e:
        fail(str(e), EXIT_USAGE)
    try:
        run = Sweep.prepare(settings)
    except SweepError as e:
        fail(str(e))
    for line in run.bad_lines:
        click.echo(f"{asked.cases}: {line}", err=True)
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
        fail(str(e))
    for failure in run.failures[:20]:
        click.echo("failed: case {}, {}, {}, repeat {}: ".format(*failure.key) + failure.message,
                   err=True)
    if run.failures:
        click.echo(f"{len(run.failures)} call(s) failed; rerun the same command to retry them",
                   err=True)
    return run, result


def one_target(url: str | None, db: Path | ClickHouseURL | None) -> Path | ClickHouseURL | None:
    """The store a sweep writes to, given --url and --store: exactly one (usage error else)."""
    if url is not None and db is not None and from_env("db"):
        db = None  # MIDTRACE_STORE set for other commands; --url given for this one
    if (url is None) == (db is None):
        fail("give exactly one of --url (a running collector) or --store (a DuckDB file or a "
             "ClickHouse store)", EXIT_USAGE)
    return db


@click.command(cls=StoreCommand)
@click.option("--cases", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cases file, JSON lines (docs/sweep.md).")
@sweep_run_options()
@click.option("--strategies", envvar="MIDTRACE_SWEEP_STRATEGIES", show_envvar=True,
              default=",".join(sweep_default("strategies")),
              help="Packing strategies, comma-separated: score_order, edge, "
                   "long_context_reorder, reverse, doc_order_within_source.")
@url_option
@token_option
@store_option(required=False, clickhouse=True, help=SWEEP_STORE_HELP)
@click.option("--format", "output_format", envvar="MIDTRACE_SWEEP_FORMAT", show_envvar=True,
              default="text", type=click.Choice(["text", "json"]), help="Summary format on stdout.")
def sweep(cases: Path, url: str | None, token: str | None, db: Path | ClickHouseURL | None,
          output_format: str, **asked: Any) -> None:
    """Measure a model's accuracy by evidence position on your own cases."""
    import json

    from midtrace.sweep import summary as summaries

    db = one_target(url, db)
    run, result = run_sweep(SweepRun(cases=cases, **asked), url, token, db)
    if output_format == "json":
        click.echo(json.dumps(summaries.to_json(result), indent=2))
    else:
        click.echo(summaries.to_text(result))
    if run.bad_lines or run.failures:
        sys.exit(1)
