"""`midtrace grade`: grade stored requests against reference answers, or with an LLM judge
(docs/grading.md)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from midtrace.commands.options import (
    EXIT_SOURCE, EXIT_USAGE, StoreCommand, api_key_env_option, fail, filter_options,
    key_and_price, load_references_or_exit, prices_option, one_source, open_store, parse_filters, store_option, token_option,
    url_option)

PAGE = 500
EXIT_BUDGET = 5  # the judge stopped: --budget-usd is spent


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
@store_option(required=False, clickhouse=True, help="A store to grade instead of --url, "
              "opened for writing: a DuckDB file path or duckdb:///path (no collector may hold "
              "it), or a ClickHouse store, clickhouse://user@host:8123/db, clickhouses://... "
              "or chdb:///folder.")
@filter_options
@click.option("--references", "references_path", default=None,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Grade against reference answers: JSON lines of {question, answers, "
                   "required_constraints, in_corpus}, or a sweep cases file.")
@click.option("--list-unmatched", is_flag=True,
              help="Also list the reference lines no request matched.")
@click.option("--judge-endpoint", envvar="MIDTRACE_JUDGE_ENDPOINT", show_envvar=True,
              help="Grade with an LLM judge: an OpenAI-compatible API base URL (e.g. "
                   "http://localhost:8000/v1).")
@click.option("--judge-model", envvar="MIDTRACE_JUDGE_MODEL", show_envvar=True,
              help="The judge model's name, sent to the endpoint; outcomes get reviewer "
                   "judge:<model>.")
@api_key_env_option
@click.option("--sample", envvar="MIDTRACE_JUDGE_SAMPLE", show_envvar=True, default=1.0,
              type=click.FloatRange(0, 1, min_open=True),
              help="Share of requests to judge, chosen by trace id (stable across runs).")
@click.option("--max-calls-per-minute", envvar="MIDTRACE_JUDGE_MAX_CALLS_PER_MINUTE",
              show_envvar=True, default=None, type=click.FloatRange(0, min_open=True),
              help="Most judge calls a minute (spaced evenly); default: no limit.")
@click.option("--budget-usd", default=None, type=click.FloatRange(0, min_open=True),
              help="Stop before the judge's cost, from the endpoint's usage and the price "
                   "table, passes this many US dollars.")
@prices_option
@click.option("--follow", is_flag=True,
              help="With --url: keep judging new requests as they arrive, until interrupted.")
@click.option("--poll-seconds", envvar="MIDTRACE_JUDGE_POLL_SECONDS", show_envvar=True,
              default=10.0, type=click.FloatRange(0.1),
              help="With --follow: seconds between looks for new requests.")
@click.option("--state-dir", envvar="MIDTRACE_JUDGE_STATE_DIR", show_envvar=True,
              default=Path(".midtrace/judge"), type=click.Path(file_okay=False, path_type=Path),
              help="Where the judge's cache and resume journal lives.")
@click.option("--timeout", envvar="MIDTRACE_JUDGE_TIMEOUT", show_envvar=True, default=120.0,
              type=click.FloatRange(0.1), help="Seconds to wait for one judge answer before "
                                                "retrying.")
@click.option("--retries", envvar="MIDTRACE_JUDGE_RETRIES", show_envvar=True, default=5,
              type=click.IntRange(0, 100),
              help="Retries of a judge call on 429, 5xx, a timeout or a lost connection.")
@click.pass_context
def grade(ctx: click.Context, token: str | None, url: str | None, db: Path | None,
          since: str | None, until: str | None, filter_pairs: tuple[str, ...],
          references_path: Path | None, list_unmatched: bool, judge_endpoint: str | None,
          judge_model: str | None, api_key_env: str | None, sample: float,
          max_calls_per_minute: float | None, budget_usd: float | None,
          prices_file: Path | None, follow: bool, poll_seconds: float, state_dir: Path,
          timeout: float, retries: int) -> None:
    """Grade requests against reference answers (--references: correct by best-subspan match,
    decisive chunks by where an answer appears; grader=references), or with an LLM judge
    (--judge-endpoint and --judge-model: one call a request; grader=judge)."""
    filters = parse_filters(since, until, filter_pairs)
    judging = judge_endpoint is not None or judge_model is not None
    if (references_path is None) == (not judging):
        raise click.UsageError("give --references FILE, or --judge-endpoint URL with "
                               "--judge-model M (one of the two)")
    if judging and not (judge_endpoint and judge_model):
        raise click.UsageError("the judge needs both --judge-endpoint and --judge-model")
    url, db = one_source(ctx, url, db)
    if judging:
        assert judge_endpoint is not None and judge_model is not None
        if follow and not url:
            raise click.UsageError("--follow polls a running collector: give --url")
        _judge(url, db, token, filters, judge_endpoint, judge_model, api_key_env, sample,
               max_calls_per_minute, budget_usd, prices_file, follow, poll_seconds, state_dir,
               timeout, retries)
        return
    assert references_path is not None
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
    from midtrace.references import grade_pages

    with _StoreGrades(db, filters) as io:
        report = grade_pages(_pages(io.read), refs, reviewer, io.write, PAGE)
    return report, io.unchanged


class _StoreGrades:
    """A store a grader reads request texts from and writes outcomes to, the path an outcome
    file takes through `midtrace ingest`; counts the machine grades that changed nothing."""

    def __init__(self, db: Path, filters: Any) -> None:
        self.store = open_store(db)
        self.filters = filters
        self.unchanged = 0

    def read(self, offset: int) -> Any:
        from midtrace.collector.query.reads import read_cursor, run_request_texts

        cur = read_cursor(self.store.conn)
        try:
            return run_request_texts(cur, self.filters, PAGE, offset)
        finally:
            cur.close()

    def write(self, batch: list[dict[str, Any]]) -> None:
        from midtrace.collector.receive.bodies import outcome_from_json
        from midtrace.collector.storage.store import WriteJob

        stats = self.store.write([WriteJob(outcomes=[outcome_from_json(o) for o in batch])])
        self.unchanged += stats.unchanged

    def __enter__(self) -> _StoreGrades:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()



# --- the LLM judge ---------------------------------------------------------------------------


def _judge(url: str | None, db: Path | None, token: str | None, filters: Any, endpoint: str,
           model: str, api_key_env: str | None, sample: float,
           max_calls_per_minute: float | None, budget_usd: float | None,
           prices_file: Path | None, follow: bool, poll_seconds: float, state_dir: Path,
           timeout: float, retries: int) -> None:
    from midtrace.judge.run import Cache, JudgeSettings, JudgeStop
    from midtrace.llm import ChatClient, RetryPolicy

    key, table, price = key_and_price(api_key_env, prices_file, model)
    if price is None and budget_usd is not None:
        fail(f"--budget-usd needs the judge's price: {model} is not in the price table {table}; "
             f"add it, or pass --prices FILE", EXIT_USAGE)
    settings = JudgeSettings(model=model, sample=sample, max_calls_per_minute=max_calls_per_minute,
                             budget_usd=budget_usd, price=price)
    client = ChatClient(endpoint, model, api_key=key, timeout=timeout,
                        retry=RetryPolicy(retries=retries), max_tokens=settings.max_tokens,
                        hint="check --judge-endpoint (the API base URL, e.g. "
                             "http://localhost:8000/v1), --judge-model and the API key "
                             "(--api-key-env VAR, else OPENAI_API_KEY)")
    try:
        cache = Cache(state_dir)
    except JudgeStop as e:
        client.close()
        fail(str(e))
    stop = _Interrupt() if follow else None
    started = time.perf_counter()
    try:
        if url:
            judge, unchanged = _judge_through_collector(url, token, filters, client, settings,
                                                        cache, follow, poll_seconds, stop)
        else:
            assert db is not None
            judge, unchanged = _judge_store(db, filters, client, settings, cache)
    except JudgeStop as e:
        fail(str(e))
    finally:
        cache.close()
        client.close()
        if stop is not None:
            stop.restore()
    _judge_summary(judge.report, model, judge.prompt.version, table, price, unchanged,
                   time.perf_counter() - started)
    if judge.report.stopped:
        click.echo(f"stopped: {judge.report.stopped}; {judge.report.requests} requests read, "
                   "the rest not judged. Run again with a larger --budget-usd to go on: "
                   "judged requests are cached and not paid again.", err=True)
        raise SystemExit(EXIT_BUDGET)


class _Interrupt:
    """--follow runs until SIGINT or SIGTERM, then finishes the request in hand and stops."""

    def __init__(self) -> None:
        self.stopped = False
        self._old = {sig: signal.signal(sig, self._handle)
                     for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.stopped = True

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopped and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def restore(self) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def _following(read: Callable[[int], Any], stop: _Interrupt | None,
               poll_seconds: float) -> Iterator[list[dict[str, Any]]]:
    """Pages of request rows; with ``stop`` (--follow), keep looking for requests that arrive
    after the last one read, every ``poll_seconds``, until interrupted."""
    offset = 0
    while True:
        rows = read(offset).to_pylist()
        if rows:
            yield rows
        offset += len(rows)
        if len(rows) < PAGE:
            if stop is None:
                return
            stop.sleep(poll_seconds)
            if stop.stopped:
                return
        if stop is not None and stop.stopped:
            return


def _judge_through_collector(url: str, token: str | None, filters: Any, client: Any,
                             settings: Any, cache: Any, follow: bool, poll_seconds: float,
                             stop: _Interrupt | None) -> tuple[Any, int | None]:
    from midtrace.client import ClientError, HttpClient, QueryError
    from midtrace.judge.run import Judge

    http = HttpClient(url, token=token, fresh=True)

    def write(batch: list[dict[str, Any]]) -> None:
        answer = http.post_outcomes(batch)
        if answer.get("rejected"):
            raise ClientError(f"the collector refused {answer['rejected']} outcome(s): "
                              f"{answer.get('errors')}")

    judge = Judge(client, settings, cache, write)
    try:
        judge.grade_pages(_following(lambda offset: http.request_texts(filters, PAGE, offset),
                                     stop if follow else None, poll_seconds))
        return judge, None
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)
    finally:
        http.close()


def _judge_store(db: Path, filters: Any, client: Any, settings: Any,
                 cache: Any) -> tuple[Any, int | None]:
    from midtrace.judge.run import Judge

    with _StoreGrades(db, filters) as io:
        judge = Judge(client, settings, cache, io.write)
        judge.grade_pages(_pages(io.read))
    return judge, io.unchanged


def _judge_summary(r: Any, model: str, version: str, table: Path, price: Any,
                   unchanged: int | None, seconds: float) -> None:
    click.echo(f"read {r.requests} requests: {r.not_sampled} not in the sample, "
               f"{r.no_answer} without an answer")
    click.echo(f"judged {r.judged} with judge:{model} ({version}): {r.correct} correct, "
               f"{r.judged - r.correct} wrong; {r.cached} from the cache (not paid again); "
               f"{r.errors} judge errors (recorded, no grade)")
    rate = f", {r.calls / r.call_seconds:.1f} calls/s" if r.call_seconds > 0 else ""
    tokens = f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens" + (
        " (some estimated: the endpoint reported no usage)" if r.estimated_tokens else "")
    if price is None:
        cost = f"cost unknown: {model} is not in the price table {table}"
    else:
        cost = f"cost ${r.cost_usd:.4f}" + (" (example prices: check them)" if price.example
                                            else "")
    click.echo(f"{r.calls} calls{rate}; {tokens}; {cost}")
    click.echo(f"sent {r.sent} outcomes (judge:{model})"
               + (f", {unchanged} of them unchanged and not stored again"
                  if unchanged is not None else "") + f" in {seconds:.1f} s")
    for line in r.errors_seen[:5]:
        click.echo(f"judge error: {line}", err=True)
