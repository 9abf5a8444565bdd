"""`midtrace gate --baseline-experiment`: a sweep of the same case set judged against a
baseline sweep, failing only when it is worse beyond its 95% interval."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from midtrace.cli import cli
from midtrace.client import FileClient
from midtrace.collector.query.reads import Filters
from midtrace.gate_baseline import Trial, accuracy_change, read_trials, sensitivity, sensitivity_change
from tests.fake_llm import FakeLLM
from tests.test_sweep_run import single_case, write_cases


def planted(n_cases: int, wrong: dict[str, set[str]] | None = None) -> list[Trial]:
    """One trial per case and condition rank_1..rank_3, right unless listed in ``wrong``."""
    wrong = wrong or {}
    return [Trial(f"c{i}", f"rank_{r}", 1, f"rank_{r}" not in wrong.get(f"c{i}", set()))
            for i in range(n_cases) for r in (1, 2, 3)]


def test_a_planted_regression_is_worse_beyond_the_interval() -> None:
    base = planted(30)
    cand = planted(30, {f"c{i}": {"rank_2"} for i in range(20)})  # the middle lost for 20 cases
    acc = accuracy_change(base, cand)
    assert acc.difference == pytest.approx(-20 / 90)
    assert acc.high is not None and acc.high < 0 and acc.worse
    sens = sensitivity_change(base, cand)
    assert sensitivity(base) == 0.0 and sensitivity(cand) == pytest.approx(20 / 30)
    assert sens.low is not None and sens.low > 0 and sens.worse


def test_noise_is_not_a_regression() -> None:
    base = planted(30, {"c0": {"rank_2"}, "c1": {"rank_3"}})
    cand = planted(30, {"c2": {"rank_2"}, "c3": {"rank_2"}})  # two changed trials either way
    acc, sens = accuracy_change(base, cand), sensitivity_change(base, cand)
    assert acc.low is not None and acc.low < 0 < acc.high and not acc.worse  # type: ignore[operator]
    assert sens.low is not None and sens.low <= 0 and not sens.worse


def test_nothing_to_compare_has_no_interval() -> None:
    assert accuracy_change([], planted(3)).low is None
    one_condition = [Trial("c0", "rank_1", 1, True)]
    assert sensitivity_change(one_condition, one_condition).low is None


def gate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["gate", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_gate_sweeps_a_case_set_and_fails_on_a_planted_regression(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(4)])
    db = str(tmp_path / "gate.duckdb")
    reads_all = FakeLLM(rule=lambda slot, k: True)
    reads_edges = FakeLLM()  # reads slots 1, 2 and the last: evidence at slots 3-4 is lost
    sweep_args = ["--cases", str(cases), "--model", "m", "--store", db]
    try:
        done = CliRunner().invoke(cli, ["sweep", *sweep_args, "--endpoint", reads_all.url,
                                        "--strategies", "score_order", "--experiment", "base"])
        assert done.exit_code == 0, done.output
        code, out = gate("--baseline-experiment", "base", "--strategy", "score_order",
                         "--experiment", "regressed", "--endpoint", reads_edges.url, *sweep_args)
        assert code == 1, out
        assert re.search(r"FAIL\s+accuracy_vs_baseline\s+0\.6\s+\(baseline 1\)", out), out
        assert re.search(r"FAIL\s+sensitivity_vs_baseline\s+1\s+\(baseline 0\)", out), out
        assert "paired over 20 trials: 8 right only in the baseline, 0 only in the candidate" in out
        assert out.rstrip().endswith("gate: FAIL")

        code, out = gate("--baseline-experiment", "base", "--strategy", "score_order",
                         "--experiment", "same", "--endpoint", reads_all.url, *sweep_args)
        assert code == 0, out
        assert re.search(r"PASS\s+accuracy_vs_baseline", out) and "gate: pass" in out

        # an experiment already swept is judged without sweeping again
        calls = reads_edges.attempts
        code, out = gate("--baseline-experiment", "base", "--strategy", "score_order",
                         "--experiment", "regressed", "--store", db)
        assert code == 1 and reads_edges.attempts == calls, out
    finally:
        reads_all.close()
        reads_edges.close()
    with FileClient(db) as client:  # the sensitivity judged is the one sweep_summary shows
        summary = client.view("sweep_summary", Filters(experiment="regressed"))
        assert sensitivity(read_trials(client, "regressed", "score_order")) == \
            pytest.approx(float(summary["sensitivity_delta"].iloc[0]))


def test_baseline_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "none.duckdb")
    code, out = gate("--baseline-experiment", "base", "--store", db)
    assert code == 2 and "needs --strategy" in out
    code, out = gate("--baseline-experiment", "base", "--strategy", "edge", "--store", db)
    assert code == 2 and "needs --experiment" in out
    code, out = gate("--strategy", "edge", "--store", db)
    assert code == 2 and "give --baseline-experiment too" in out
