"""`midtrace cases`: sweep cases from stored requests (midtrace/sweep/from_traces.py)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from midtrace.commands.options import (
    EXIT_SOURCE, EXIT_USAGE, READ_ANY_STORE_HELP, StoreCommand, fail, filter_options,
    load_references_or_exit, open_source, parse_filters, store_option, token_option, url_option)


@click.command(cls=StoreCommand)
@token_option
@url_option
@store_option(required=False, help=READ_ANY_STORE_HELP, clickhouse=True)
@filter_options
@click.option("--class", "taxonomy_class", default=None, metavar="CLASS",
              help="Only requests of this failure class (buried, unused, dropped, missing, "
                   "unlabeled, answered, ungraded).")
@click.option("--trace-id", "trace_ids", multiple=True, metavar="ID",
              help="These requests (32 hex digits; repeatable) instead of the filters.")
@click.option("--references", "references_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The accepted answers, as `midtrace grade` reads them: JSON lines of "
                   "{question, answers, required_constraints}, or a sweep cases file.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the cases here instead of standard output.")
@click.pass_context
def cases(ctx: click.Context, token: str | None, url: str | None, db: Path | None,
          since: str | None, until: str | None, filter_pairs: tuple[str, ...],
          taxonomy_class: str | None, trace_ids: tuple[str, ...], references_path: Path,
          output: Path | None) -> None:
    """Write sweep cases (the format `midtrace sweep --cases` reads) from stored requests: each
    request's question, retrieved chunks and decisive chunks, with the accepted answers of
    --references. Requests that cannot become a case are counted, with the reason, on
    standard error."""
    from midtrace.client import ClientError, QueryError
    from midtrace.sweep.from_traces import case_from_trace, trace_ids as matching

    filters = parse_filters(since, until, filter_pairs)
    by_question = load_references_or_exit(references_path, "no case was written").by_question()
    client = open_source(ctx, db, url, token)
    written, skipped = 0, Counter[str]()
    out = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        for trace_id in trace_ids or matching(client, filters, taxonomy_class):
            trace = client.trace(trace_id.strip().lower())
            made: dict[str, Any] | str = (case_from_trace(trace, by_question) if trace
                                          else "no request has this trace id")
            if isinstance(made, str):
                skipped[made] += 1
                continue
            out.write(json.dumps(made, ensure_ascii=False) + "\n")
            written += 1
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)
    finally:
        client.close()
        if output:
            out.close()
    click.echo(f"wrote {written} case(s)" + (f" to {output}" if output else ""), err=True)
    for reason, n in skipped.most_common():
        click.echo(f"skipped {n}: {reason}", err=True)
    if not written:
        fail("no request could become a case" + (
            "; " + next(iter(skipped)) if len(skipped) == 1 else ""), EXIT_USAGE)

