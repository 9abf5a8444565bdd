"""`midtrace replay`: ask one stored request again under other layouts (midtrace/sweep/replay.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from midtrace.collector.settings import ClickHouseURL
from midtrace.commands.options import (
    EXIT_SOURCE, EXIT_USAGE, StoreCommand, api_key_env_option, fail,
    key_and_price, load_references_or_exit, prices_option, one_source, open_source, store_option, token_option, url_option)


@click.command(cls=StoreCommand)
@token_option
@url_option
@store_option(required=False, clickhouse=True, help=(
    "A store to read the request from and record the replays into, instead of --url: a "
    "DuckDB file path or duckdb:///path (no collector may hold it), or a ClickHouse store, "
    "clickhouse://user@host:8123/database, clickhouses://... or chdb:///folder (password in "
    "MIDTRACE_CLICKHOUSE_PASSWORD)."))
@click.option("--trace-id", "trace_id", required=True, metavar="ID",
              help="The request to replay (32 hex digits).")
@click.option("--endpoint", envvar="MIDTRACE_SWEEP_ENDPOINT", show_envvar=True, required=True,
              help="OpenAI-compatible API base URL; calls POST {endpoint}/chat/completions.")
@click.option("--model", envvar="MIDTRACE_SWEEP_MODEL", show_envvar=True, required=True,
              help="Model name sent to the endpoint and recorded on every replay.")
@click.option("--strategies", default=",".join(("edge", "long_context_reorder")),
              help="Packing strategies to lay the chunks out with, comma-separated; the "
                   "original order and the decisive chunk at slot 1 and at the last slot are "
                   "always asked too.")
@click.option("--repeats", default=5, type=click.IntRange(1, 1000),
              help="Calls per layout.")
@click.option("--references", "references_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The accepted answers, as `midtrace grade` reads them; the line whose "
                   "question matches the request's grades every replay.")
@api_key_env_option
@click.option("--experiment", default=None,
              help="Experiment the replays are recorded under. Default: "
                   "replay-<first 12 of the trace id>-<model>-<YYYYMMDD>.")
@prices_option
@click.option("--concurrency", default=4, type=click.IntRange(1, 256),
              help="Calls in flight at once.")
@click.option("--max-tokens", "max_tokens", default=100, type=click.IntRange(1),
              help="Most tokens the model may answer with.")
@click.option("--dry-run", is_flag=True,
              help="Print the layouts, the number of calls and their estimated cost; call "
                   "nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_context
def replay(ctx: click.Context, token: str | None, url: str | None,
           db: Path | ClickHouseURL | None,
           trace_id: str, endpoint: str, model: str, strategies: str, repeats: int,
           references_path: Path, api_key_env: str | None, experiment: str | None,
           prices_file: Path | None, concurrency: int, max_tokens: int, dry_run: bool,
           as_json: bool) -> None:
    """Replay one incident: send the request's own prompt again (rebuilt from its chunks, and
    marked reconstructed, when the trace carried no prompt text) with its chunks in the
    original order, in each strategy's order and with the decisive chunk first and last,
    --repeats times each; print how often each layout was answered right next to the
    original, and record the replays as an experiment linked to the original trace."""
    from midtrace.client import ClientError
    from midtrace.sweep import replay as rp
    from midtrace.sweep.client import API_KEY_ENVS, ChatClient
    from midtrace.sweep.conditions import ConditionError, parse_strategies
    from midtrace.sweep.recording import OtlpSink, Recorder, RecordError, StoreSink

    trace_id = trace_id.strip().lower()
    try:
        names = parse_strategies(strategies)
    except ConditionError as e:
        raise click.UsageError(str(e)) from None
    key, table, price = key_and_price(api_key_env, prices_file, model, API_KEY_ENVS)
    refs = load_references_or_exit(references_path, "nothing was replayed")
    url, db = one_source(ctx, url, db)
    client = open_source(ctx, db, url, token)
    try:
        trace = client.trace(trace_id)
        prompt_texts = client.prompts(trace_id) if trace else []
    except ClientError as e:
        fail(str(e), EXIT_SOURCE)
    finally:
        # a --store file must be free before the replays are written into it (a chdb
        # folder's one connection stays open for the writer: ClickHouseClient.close)
        client.close()
    if trace is None:
        fail(f"no request has trace id {trace_id}", EXIT_USAGE)
    made = rp.incident_from_trace(trace, refs.by_question(), prompt_texts)
    if isinstance(made, str):
        fail(f"request {trace_id} cannot be replayed: {made}", EXIT_USAGE)
    incident = made
    name = experiment or rp.default_experiment(trace_id, model)
    plan = rp.plan(incident, names, repeats, name)
    calls = len(plan.trials)
    estimate = (price.cost(plan.estimated_prompt_tokens(), calls * max_tokens)
                if price else None)
    click.echo(f"{calls} calls ({len(plan.layouts)} layouts x {repeats}) to {model}; "
               f"estimated cost {_money(estimate, price, model, table)} (at most {max_tokens} "
               "answer tokens a call)", err=True)
    if dry_run:
        return
    try:
        sink = OtlpSink(url, token) if url else StoreSink(db, prices_file)  # type: ignore[arg-type]
    except RecordError as e:
        fail(str(e), EXIT_SOURCE)
    recorder = Recorder(sink, service="midtrace-replay")
    chat = ChatClient(endpoint, model, api_key=key, max_tokens=max_tokens,
                      concurrency=concurrency)
    try:
        result = rp.run(plan, chat, recorder, model, concurrency)
    except rp.ReplayError as e:
        fail(str(e), 1)
    finally:
        chat.close()
        recorder.close()
    cost = price.cost(result.prompt_tokens, result.completion_tokens) if price else None
    if as_json:
        click.echo(json.dumps(_json(result, cost, table, price), ensure_ascii=False))
    else:
        _print(result, cost, price, table)
    for failure in result.failures:
        click.echo(f"failed: {failure}", err=True)


def _money(value: float | None, price: Any, model: str, table: Path) -> str:
    if value is None:
        return f"unknown ({model} is not in the price table {table})"
    return f"${value:.4f}" + (" (example prices: check them)" if price.example else "")


def _json(result: Any, cost: float | None, table: Path, price: Any) -> dict[str, Any]:
    i = result.incident
    return {
        "trace_id": i.trace_id, "experiment": result.experiment, "model": result.model,
        "prompt": "reconstructed" if i.reconstructed else "stored",
        "original": {"strategy": i.strategy, "answer": i.answer, "correct": i.correct},
        "layouts": [{"layout": r.layout, "decisive_slots": list(r.slots), "k": len(i.chunks),
                     "calls": r.calls, "correct": r.correct, "failed": r.failed,
                     "accuracy": r.correct / r.calls if r.calls else None}
                    for r in result.layouts.values()],
        "calls": result.calls, "seconds": round(result.seconds, 3),
        "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
        "cost_usd": cost, "prices": str(table),
        "example_prices": bool(price.example) if price else None,
    }


def _print(result: Any, cost: float | None, price: Any, table: Path) -> None:
    i = result.incident
    k = len(i.chunks)
    click.echo(f"replay of {i.trace_id}: {i.question}")
    click.echo("prompt: " + ("reconstructed from its chunks with the default template (the "
                            "trace carried no prompt text)" if i.reconstructed
                            else "the stored prompt, chunk texts swapped slot by slot"))
    click.echo(f"graded by the accepted answers: {', '.join(i.answers)}"
               + (f"; required: {', '.join(i.constraints)}" if i.constraints else ""))
    was = {True: "right", False: "wrong", None: "ungraded"}[i.correct]
    original_slots = result.layouts["original"].slots
    rows = [("as stored", _slots(original_slots, k), f"{was} ({i.strategy or 'strategy unknown'})")]
    for r in result.layouts.values():
        share = f"{r.correct}/{r.calls} right" + (
            f" ({100 * r.correct / r.calls:.0f}%)" if r.calls else "")
        rows.append((r.layout, _slots(r.slots, k),
                     share + (f", {r.failed} failed" if r.failed else "")))
    width = max(len(r[0]) for r in rows)
    click.echo(f"{'layout':<{width}}  {'decisive slot':<13}  answer")
    for name, slots, share in rows:
        click.echo(f"{name:<{width}}  {slots:<13}  {share}")
    rate = f" ({result.calls / result.seconds:.1f} calls/s)" if result.seconds > 0 else ""
    tokens = (f"{result.prompt_tokens} prompt + {result.completion_tokens} answer tokens"
              + (f" ({result.usage_missing} calls without usage: estimated)"
                 if result.usage_missing else ""))
    click.echo(f"{result.calls} calls in {result.seconds:.1f}s{rate}; {tokens}; cost "
               f"{_money(cost, price, result.model, table)}")
    click.echo(f"recorded as experiment {result.experiment} (case id {i.trace_id}, condition "
               "replay, strategy = layout): see the Experiments page, or the original's "
               "inspector")


def _slots(slots: tuple[int, ...], k: int) -> str:
    return ", ".join(map(str, slots)) + f" of {k}" if slots else "-"
