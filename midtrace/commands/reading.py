"""Commands that read a store or a running collector: report and gate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from midtrace.commands.options import (
    EXIT_POST, EXIT_SOURCE, READ_STORE_HELP, StoreCommand, default_of, fail, filter_options,
    open_source, parse_filters, store_option, token_option, url_option)
from midtrace.gate import Thresholds


def _source_options(fn):  # type: ignore[no-untyped-def]
    fn = token_option(fn)
    fn = url_option(fn)
    fn = store_option(required=False, help=READ_STORE_HELP)(fn)
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
def report(ctx: click.Context, db: Path | None, url: str | None, token: str | None,
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
@click.pass_context
def gate(ctx: click.Context, db: Path | None, url: str | None, token: str | None,
         since: str | None, until: str | None, filter_pairs: tuple[str, ...],
         max_buried_rate: float | None, max_sensitivity_delta: float | None,
         min_accuracy: float | None, min_n: int, post_url: str | None) -> None:
    """Judge the traffic against thresholds: exit 0 pass, 1 fail or no data, 2 usage, 3 source."""
    from midtrace.gate import evaluate

    filters = _filters(since, until, filter_pairs)
    thresholds = Thresholds(max_buried_rate=max_buried_rate,
                            max_sensitivity_delta=max_sensitivity_delta,
                            min_accuracy=min_accuracy, min_n=min_n)
    client = open_source(ctx, db, url, token)
    try:
        result = _read(lambda: evaluate(client, filters, thresholds))
    finally:
        client.close()
    for check in result.checks:
        click.echo(check.line())
    click.echo("gate: pass" if result.passed else "gate: FAIL")
    if post_url:
        _post(post_url, result.message(filters.to_params()))
    sys.exit(0 if result.passed else 1)
