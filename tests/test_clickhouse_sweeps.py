"""`sweep --store`, `replay --store` and `gate --cases` write a ClickHouse store as they write
a DuckDB file: the same commands, run on each against the same stand-in endpoint, print the
same summary, replay and verdict, and leave the same requests behind, but for timing.

Each command runs in a process of its own (chdb holds one folder per process), one after
another on the store, as a user runs them; the endpoint is tests/fake_llm.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage import clickhouse
from midtrace.sweep.results import trace_id_of
from tests.clickhouse_samples import same
from tests.fake_llm import FakeLLM
from tests.test_sweep_run import single_case, write_cases

MODEL = "fake-7b"
# What differs between two runs of the same command whatever the store: the clock, the
# endpoint's speed, and the ids each engine numbers rows with (a sequence on DuckDB, a hash
# or the time on ClickHouse).
TIMING = {"time", "first_time", "last_time", "latency_ms", "seconds", "received_at", "graded_at",
          "generated_at", "week", "outcome_id", "request_id"}

DUMP = """
import json, sys
from midtrace.client import open_client
from midtrace.collector.query.reads import Filters
client = open_client(db=sys.argv[1])
ids = sorted(client.requests(Filters(traffic="all"), limit=1000)["trace_id"])
print(json.dumps({t: client.trace(t) for t in ids}, default=str))
client.close()
"""


def midtrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "midtrace", *args], capture_output=True,
                          text=True, timeout=300)


def untimed(value: Any) -> Any:
    """``value`` without the TIMING fields, at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def differences(e: Any, g: Any, path: str = "") -> list[str]:
    """Where DuckDB's ``e`` and ClickHouse's ``g`` differ (tests/clickhouse_samples.same)."""
    if isinstance(e, dict) and isinstance(g, dict) and e.keys() == g.keys():
        return [d for k in e for d in differences(e[k], g[k], f"{path}.{k}")]
    if isinstance(e, list) and isinstance(g, list) and len(e) == len(g):
        return [d for i, (a, b) in enumerate(zip(e, g)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if same(e, g) else [f"{path}: DuckDB {e!r}, ClickHouse {g!r}"]


@dataclass
class Run:
    """What the commands printed on one store, and the requests it holds after them."""

    sweep: subprocess.CompletedProcess[str]
    replay: subprocess.CompletedProcess[str]
    gate: subprocess.CompletedProcess[str]
    report: subprocess.CompletedProcess[str]
    traces: dict[str, Any]


def run_all(store: str, work: Path, cases: Path, refs: Path, prices: Path, reads_all: FakeLLM,
            reads_edges: FakeLLM) -> Run:
    state = ["--state-dir", str(work / "journals")]
    priced = ["--model", MODEL, "--prices", str(prices)]
    sweep = midtrace("sweep", "--cases", str(cases), "--endpoint", reads_all.url, *priced,
                     "--experiment", "base", "--store", store, "--format", "json", *state)
    assert sweep.returncode == 0, sweep.stderr
    replay = midtrace("replay", "--store", store, "--trace-id",
                      trace_id_of("base", ("case-0", "rank_3", "score_order", 0)),
                      "--endpoint", reads_edges.url, *priced, "--references", str(refs),
                      "--strategies", "edge", "--repeats", "2", "--experiment", "again",
                      "--json")
    assert replay.returncode == 0, replay.stderr
    gate = midtrace("gate", "--store", store, "--baseline-experiment", "base", "--strategy",
                    "score_order", "--experiment", "regressed", "--cases", str(cases),
                    "--endpoint", reads_edges.url, *priced, *state)
    assert gate.returncode == 1, gate.stderr  # the regression planted below is found
    report = midtrace("report", "--store", store, "--format", "json", "--filter",
                      "traffic=all", "--group-by", "experiment")
    assert report.returncode == 0, report.stderr
    dump = subprocess.run([sys.executable, "-c", DUMP, store], capture_output=True, text=True,
                          timeout=300)
    assert dump.returncode == 0, dump.stderr
    return Run(sweep, replay, gate, report, json.loads(dump.stdout))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """The same commands on a DuckDB file and on a chdb folder: a sweep of four cases by a
    model that reads every slot, a replay of one of its requests, then `gate --cases`
    sweeping the same cases with a model that reads only slots 1, 2 and the last."""
    work = tmp_path_factory.mktemp("sweeps")
    cases = write_cases(work / "cases.jsonl", [single_case(i) for i in range(4)])
    refs = work / "refs.jsonl"
    refs.write_text(json.dumps({"question": "What colour is widget 0?",
                                "answers": ["colour0"]}) + "\n")
    prices = work / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input_per_mtok": 2.0, "output_per_mtok": 10.0}}))
    reads_all = FakeLLM(rule=lambda slot, k: True, usage_ratio=0.3)
    reads_edges = FakeLLM(usage_ratio=0.3)
    try:
        stores = {"duckdb": str(work / "duck" / "store.duckdb"), "chdb": f"chdb://{work}/ch"}
        (work / "duck").mkdir()
        yield {name: run_all(store, work / name, cases, refs, prices, reads_all, reads_edges)
               for name, store in stores.items()}
    finally:
        reads_all.close()
        reads_edges.close()


def test_sweep_summarises_a_clickhouse_store_as_a_duckdb_file(runs: dict[str, Run]) -> None:
    duck, ch = (json.loads(runs[n].sweep.stdout) for n in ("duckdb", "chdb"))
    assert duck["recorded"] == 20 and duck["failed"] == 0
    (strategy,) = duck["strategies"]
    assert strategy["cost"]["cost_usd"] > 0 and strategy["cost"]["priced"] == 20
    assert same(untimed(ch), untimed(duck))


def test_replay_replays_from_and_into_a_clickhouse_store_as_a_duckdb_file(
        runs: dict[str, Run]) -> None:
    duck, ch = (json.loads(runs[n].replay.stdout) for n in ("duckdb", "chdb"))
    assert duck["calls"] == 2 * len(duck["layouts"]) == 2 * 4
    assert duck["cost_usd"] > 0
    assert same(untimed(ch), untimed(duck))


def test_gate_sweeps_into_a_clickhouse_store_and_judges_it_as_a_duckdb_file(
        runs: dict[str, Run]) -> None:
    duck, ch = (runs[n].gate for n in ("duckdb", "chdb"))
    assert "FAIL" in duck.stdout and duck.stdout.rstrip().endswith("gate: FAIL")
    assert ch.stdout == duck.stdout


def test_the_commands_leave_the_same_requests_in_both_stores(runs: dict[str, Run]) -> None:
    duck, ch = runs["duckdb"], runs["chdb"]
    assert len(duck.traces) == 20 + 2 * 4 + 20  # base, the replay's layouts, regressed
    assert ch.traces.keys() == duck.traces.keys()
    for trace_id, expected in duck.traces.items():
        assert not differences(untimed(expected), untimed(ch.traces[trace_id])), trace_id
    replayed = duck.traces[trace_id_of("base", ("case-0", "rank_3", "score_order", 0))]
    assert len(replayed["replays"]) == 4  # a row per layout
    reports = [untimed(json.loads(r.report.stdout)) for r in (duck, ch)]
    assert not differences(reports[0], reports[1])


def test_a_sweep_leaves_the_process_chdb_connection_open(chdb_database: ClickHouseURL,
                                                          tmp_path: Path) -> None:
    """The sink writes and the summary reads on the one connection chdb gives the process
    (clickhouse.connect): neither closes it under the other, nor under what reads next."""
    from midtrace.sweep.runner import run_sweep
    from midtrace.sweep.settings import SweepSettings

    llm = FakeLLM()
    try:
        settings = SweepSettings(cases=write_cases(tmp_path / "cases.jsonl", [single_case(0)]),
                                 endpoint=llm.url, model="m", experiment="e", db=chdb_database,
                                 state_dir=tmp_path / "journals")
        first = run_sweep(settings)
        again = run_sweep(settings)  # resumed: nothing to call, the summary read again
    finally:
        llm.close()
    assert first.recorded == 5 and again.recorded == 0
    assert first.to_json()["strategies"] == again.to_json()["strategies"]
    count = clickhouse.connect(chdb_database).query("SELECT count() AS n FROM requests")
    assert count.to_pylist() == [{"n": 5}]
