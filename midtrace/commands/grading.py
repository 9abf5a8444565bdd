"""`midtrace grade`: grade stored requests against reference answers (docs/grading.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from midtrace.commands.options import (
    EXIT_SOURCE, StoreCommand, fail, filter_options, load_references_or_exit, one_source,
    open_store, parse_filters, store_option, token_option, url_option)

PAGE = 500


def _pages(read: Callable[[int], Any]) -> Iterator[list[dict[str, Any]]]:
    """Pages of request rows from ``read(offset)`` (a pyarrow Table) until one comes back short."""
    offset = 0
    while True:
        rows = read(offset).to_pylist()
        if rows:
            yield rows
        if len(rows) < PAGE:
            return
        offset += PAGE


@click.command(cls=StoreCommand)
@token_option
@url_option
@store_option(required=False, help="A store to grade instead of --url, opened for writing (no "
              "collector may hold it): a DuckDB file path or duckdb:///path.")
@filter_options
@click.option("--references", "references_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON lines of {question, answers, required_constraints, in_corpus}, or a "
                   "sweep cases file.")
@click.option("--list-unmatched", is_flag=True,
              help="Also list the reference lines no request matched.")
@click.pass_context
def grade(ctx: click.Context, token: str | None, url: str | None, db: Path | None,
          since: str | None, until: str | None, filter_pairs: tuple[str, ...],
          references_path: Path, list_unmatched: bool) -> None:
    """Grade requests against reference answers: correct by best-subspan match, decisive chunks
    by where an answer appears, constraint recall; outcomes written with grader=references."""
    filters = parse_filters(since, until, filter_pairs)
    url, db = one_source(ctx, url, db)
    refs = load_references_or_exit(references_path, "nothing was graded")
    reviewer = f"references:{references_path.name}"
    if url:
        report, unchanged = _grade_through_collector(url, token, filters, refs, reviewer)
    else:
        assert db is not None
        report, unchanged = _grade_store(db, filters, refs, reviewer)
    n_lines = len(refs.references)
    click.echo(f"matched {report.matched} of {report.requests} requests to "
               f"{len(report.lines_matched)} of {n_lines} reference lines "
               "(questions equal after case folding and whitespace collapsing)")
    click.echo(f"graded {report.graded}: {report.correct} correct, {report.graded - report.correct} "
               f"wrong; an answer found in a chunk for {report.decisive_found}, in none for "
               f"{report.missing + report.unknown} ({report.missing} in the corpus: missing, "
               f"{report.unknown} not: decisive unknown)"
               + (f"; {report.no_answer} matched without an answer, not graded"
                  if report.no_answer else ""))
    click.echo(f"sent {report.sent} outcomes ({reviewer})"
               + (f", {unchanged} of them unchanged and not stored again" if unchanged is not None
                  else ""))
    if list_unmatched:
        for ref in refs.references:
            if ref.line not in report.lines_matched:
                click.echo(f"unmatched: line {ref.line}: {ref.question}")


def _grade_through_collector(url: str, token: str | None, filters: Any, refs: Any,
                             reviewer: str) -> tuple[Any, int | None]:
    from midtrace.client import ClientError, HttpClient, QueryError
    from midtrace.references import grade_pages

    client = HttpClient(url, token=token, fresh=True)

    def write(batch: list[dict[str, Any]]) -> None:
        answer = client.post_outcomes(batch)
        if answer.get("rejected"):
            raise ClientError(f"the collector refused {answer['rejected']} outcome(s): "
                              f"{answer.get('errors')}")

    try:
        pages = _pages(lambda offset: client.request_texts(filters, PAGE, offset))
        return grade_pages(pages, refs, reviewer, write, PAGE), None
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)
    finally:
        client.close()


def _grade_store(db: Path, filters: Any, refs: Any, reviewer: str) -> tuple[Any, int | None]:
    from midtrace.collector.query.reads import read_cursor, run_request_texts
    from midtrace.collector.receive.bodies import outcome_from_json
    from midtrace.collector.storage.store import WriteJob
    from midtrace.references import grade_pages

    store = open_store(db)
    unchanged = 0

    def read(offset: int) -> Any:
        cur = read_cursor(store.conn)
        try:
            return run_request_texts(cur, filters, PAGE, offset)
        finally:
            cur.close()

    def write(batch: list[dict[str, Any]]) -> None:
        nonlocal unchanged
        # the outcomes take the path an outcome file takes through `midtrace ingest`
        stats = store.write([WriteJob(outcomes=[outcome_from_json(o) for o in batch])])
        unchanged += stats.unchanged

    try:
        report = grade_pages(_pages(read), refs, reviewer, write, PAGE)
    finally:
        store.close()
    return report, unchanged

