"""Commands that read a store or a running collector: report and gate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from midtrace.collector.settings import ClickHouseURL
from midtrace.commands.options import (
    EXIT_POST, EXIT_SOURCE, EXIT_USAGE, READ_ANY_STORE_HELP, StoreCommand, default_of, fail, filter_options,
    open_source, parse_filters, store_option, token_option, url_option)
from midtrace.commands.sweeping import sweep_run_options
from midtrace.gate import Thresholds


def _source_options(fn):  # type: ignore[no-untyped-def]
    fn = token_option(fn)
    fn = url_option(fn)
    fn = store_option(required=False, help=READ_ANY_STORE_HELP, clickhouse=True)(fn)
    return filter_options(fn)


_filters = parse_filters


def _group_by(value: str | None) -> tuple[str, ...]:
    from midtrace.collector.query.reads import QueryError, parse_group_by

    try:
        return parse_group_by(value)
    except QueryError as e:
        raise click.UsageError(str(e)) from None


def _read(fn):  # type: ignore[no-untyped-def]
    """Run a read, turning a source that cannot be read into exit 3."""
    from midtrace.client import ClientError, QueryError, SourceError
    from midtrace.collector.storage.store import StoreError

    try:
        return fn()
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    except (SourceError, StoreError) as e:
        fail(str(e), EXIT_SOURCE)
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)


class _HttpUrl(click.ParamType):
    name = "URL"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        from midtrace.webhook import PostError, check_url

        try:
            return check_url(str(value))
        except PostError as e:
            self.fail(str(e), param, ctx)


def _post_option(envvar: str, what: str):  # type: ignore[no-untyped-def]
    return click.option("--post", "post_url", type=_HttpUrl(), default=None, envvar=envvar,
                        show_envvar=True, metavar="URL",
                        help=f"Also send {what} to this Slack- or Teams-style incoming webhook "
                        '(POST {"text": ...}); a failed post exits 4. A secret: prefer the '
                        "environment variable to the command line.")


def _post(url: str, text: str) -> None:
    from midtrace.webhook import PostError, post_text

    try:
        status = post_text(url, text)
    except PostError as e:
        fail(f"post failed: {e}", EXIT_POST)
    click.echo(f"posted to the webhook (HTTP {status})", err=True)


@click.command(cls=StoreCommand)
@_source_options
@click.option("--group-by", "group_by", default=None, metavar="KEY,...",
              help="Split every figure by these keys: service, model, template, strategy, "
              "experiment, context_bucket, week.")
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="md",
              help="json (docs/report-schema.md), Markdown, or HTML with inline SVG charts.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.option("--dashboard-url", type=_HttpUrl(), default=None, envvar="MIDTRACE_DASHBOARD_URL",
              show_envvar=True, metavar="URL",
              help="The dashboard's address: each incident links to its trace in the inspector.")
@_post_option("MIDTRACE_REPORT_POST_URL", "the findings")
@click.pass_context
def report(ctx: click.Context, db: Path | ClickHouseURL | None, url: str | None, token: str | None,
           since: str | None, until: str | None, filter_pairs: tuple[str, ...],
           group_by: str | None, fmt: str, output: Path | None, dashboard_url: str | None,
           post_url: str | None) -> None:
    """The weekly review: findings, incidents, then the evidence (bands, slots, taxonomy,
    citations, sweeps)."""
    from midtrace.report import build_report, render
    from midtrace.report_markdown import chat_findings

    filters = _filters(since, until, filter_pairs)
    keys = _group_by(group_by)
    client = open_source(ctx, db, url, token)
    try:
        built = _read(lambda: build_report(client, filters, keys, dashboard_url))
    finally:
        client.close()
    text = render(built, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    if post_url:
        _post(post_url, chat_findings(built, dashboard_url))


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


@click.command(cls=StoreCommand)
@_source_options
@click.option("--max-buried-rate", type=_Threshold(), default=default_of(Thresholds, "max_buried_rate"), envvar="MIDTRACE_MAX_BURIED_RATE",
              show_envvar=True, help="Fail when buried / graded-wrong is above this ('off' skips).")
@click.option("--max-sensitivity-delta", type=_Threshold(), default=default_of(Thresholds, "max_sensitivity_delta"),
              envvar="MIDTRACE_MAX_SENSITIVITY_DELTA", show_envvar=True,
              help="Fail when a sweep's max-min accuracy across placements is above this "
              "('off' skips; no sweep data fails).")
@click.option("--min-accuracy", type=_Threshold(), default=default_of(Thresholds, "min_accuracy"), envvar="MIDTRACE_MIN_ACCURACY",
              show_envvar=True, help="Fail when accuracy of graded requests is below this ('off' skips).")
@click.option("--min-n", type=click.IntRange(0), default=default_of(Thresholds, "min_n"), envvar="MIDTRACE_MIN_N", show_envvar=True,
              help="Fewest graded requests to judge; fewer fails as no data.")
@_post_option("MIDTRACE_GATE_POST_URL", "the verdict")
@click.option("--baseline-experiment", envvar="MIDTRACE_GATE_BASELINE_EXPERIMENT", show_envvar=True,
              help="Judge an experiment against this one instead of the traffic against "
                   "thresholds: fail when accuracy or position sensitivity is worse beyond its "
                   "95%% interval. Needs --strategy and --experiment or --cases.")
@click.option("--strategy", envvar="MIDTRACE_GATE_STRATEGY", show_envvar=True,
              help="With --baseline-experiment: the packing strategy both experiments are "
                   "compared under (and the one --cases is swept with).")
@click.option("--cases", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --baseline-experiment: sweep this case set first (the sweep options "
                   "below, docs/sweep.md), recording it into the --store (a DuckDB file or a "
                   "ClickHouse store) or --url judged, and judge that sweep; --experiment "
                   "names it.")
@sweep_run_options(required=False)
@click.pass_context
def gate(ctx: click.Context, db: Path | ClickHouseURL | None, url: str | None, token: str | None,
         since: str | None, until: str | None, filter_pairs: tuple[str, ...],
         max_buried_rate: float | None, max_sensitivity_delta: float | None,
         min_accuracy: float | None, min_n: int, post_url: str | None,
         baseline_experiment: str | None, strategy: str | None, cases: Path | None,
         **sweep_asked: Any) -> None:
    """Judge the traffic against thresholds, or an experiment against a baseline experiment:
    exit 0 pass, 1 fail or no data, 2 usage, 3 source."""
    from midtrace.gate import against_baseline, evaluate

    filters = _filters(since, until, filter_pairs)
    if baseline_experiment is None:
        if strategy or cases:
            fail("--strategy and --cases judge an experiment against a baseline: give "
                 "--baseline-experiment too", EXIT_USAGE)
        thresholds = Thresholds(max_buried_rate=max_buried_rate,
                                max_sensitivity_delta=max_sensitivity_delta,
                                min_accuracy=min_accuracy, min_n=min_n)
        judge = lambda client: evaluate(client, filters, thresholds)  # noqa: E731
        judged = filters.to_params()
    else:
        experiment = _candidate(baseline_experiment, strategy, cases, url, token, db, sweep_asked)
        judge = lambda client: against_baseline(  # noqa: E731
            client, baseline_experiment, experiment, strategy)
        judged = {"experiment": experiment, "baseline": baseline_experiment, "strategy": strategy}
    client = open_source(ctx, db, url, token)
    try:
        result = _read(lambda: judge(client))
    finally:
        client.close()
    for check in result.checks:
        click.echo(check.line())
    click.echo("gate: pass" if result.passed else "gate: FAIL")
    if post_url:
        _post(post_url, result.message(judged))
    sys.exit(0 if result.passed else 1)


def _candidate(baseline: str, strategy: str | None, cases: Path | None, url: str | None,
               token: str | None, db: Path | ClickHouseURL | None, asked: dict[str, Any]) -> str:
    """The experiment to judge against ``baseline``: --experiment, or the sweep of --cases
    this run makes (usage errors exit 2)."""
    from midtrace.commands.sweeping import SweepRun, one_target, run_sweep

    if not strategy:
        fail("--baseline-experiment needs --strategy: the packing strategy to compare under",
             EXIT_USAGE)
    if "," in strategy:
        fail(f"--strategy takes one strategy, got {strategy!r}", EXIT_USAGE)
    if cases is None:
        if not asked.get("experiment"):
            fail("--baseline-experiment needs --experiment (an experiment already swept) or "
                 "--cases (a case set to sweep now)", EXIT_USAGE)
        return str(asked["experiment"])
    missing = [f"--{k}" for k in ("endpoint", "model") if not asked.get(k)]
    if missing:
        fail(f"--cases runs a sweep: give {' and '.join(missing)}", EXIT_USAGE)
    run, _ = run_sweep(SweepRun(cases=cases, strategies=strategy, **asked), url, token,
                       one_target(url, db))
    if run.experiment == baseline:
        fail(f"the sweep would be the baseline itself ({baseline}); name it with --experiment",
             EXIT_USAGE)
    return str(run.experiment)
