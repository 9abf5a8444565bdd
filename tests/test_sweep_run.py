"""The sweep end to end: a fake endpoint answering by a position rule, the real collector or
the DuckDB file, and the accuracy that rule implies, computed by hand."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.ipc
import pytest
from click.testing import CliRunner

from midtrace.cli import cli
from tests.fake_llm import FakeLLM
from tests.procs import MIDTRACE, Proc

FILLER = ("This paragraph is retrieved text of about the same length as every other one, so "
          "that each document takes a similar share of the prompt. ") * 3


def single_case(i: int, n_distractors: int = 4) -> dict[str, Any]:
    return {"id": f"case-{i}", "question": f"What colour is widget {i}?",
            "answers": [f"colour{i}"],
            "decisive": [{"id": f"w{i}-spec", "source": f"spec-{i}",
                          "text": f"KEYFACT widget {i}. ANSWER: colour{i}. {FILLER}"}],
            "distractors": [{"id": f"w{i}-near{j}", "text": f"Widget {i} near miss {j}. {FILLER}"}
                            for j in range(n_distractors)]}


def multi_case() -> dict[str, Any]:
    return {"id": "two-piece", "question": "What is the refund window and what is required?",
            "answers": ["14 days"], "constraints": ["original receipt"],
            "decisive": [{"id": "policy-window", "text": f"KEYFACT ANSWER: 14 days. {FILLER}"},
                         {"id": "policy-receipt", "text": f"KEYFACT ANSWER: original receipt. {FILLER}",
                          "label": "exception_constraint"}],
            "distractors": [{"id": f"faq-{j}", "text": f"FAQ entry {j}. {FILLER}",
                             "label": "supporting_background" if j == 0 else "irrelevant"}
                            for j in range(6)]}


def write_cases(path: Path, cases: list[dict[str, Any]], extra: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(c) for c in cases]
    for number, text in sorted((extra or {}).items()):
        lines.insert(number - 1, text)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


def sweep(*args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, ["sweep", *args], env=env, catch_exceptions=False)
    return result


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def test_sweep_records_traces_through_the_collector(tmp_path: Path, llm: FakeLLM,
                                                    collector: Proc, db_path: Path) -> None:
    llm.usage_ratio = 0.3
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(3)])
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "fake-7b",
                   "--experiment", "exp1", "--url", collector.url, "--token", "t0k",
                   "--format", "json", "--concurrency", "3")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    collector.stop()

    # The rule reads slots 1, 2 and k=5 only: score_order is right at ranks 1, 2, 5.
    expected = {1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0, 5: 1.0}
    (s,) = summary["strategies"]
    assert {int(k): v["accuracy"] for k, v in s["by_slot"].items()} == expected
    assert {k: v["n"] for k, v in s["by_slot"].items()} == {str(k): 3 for k in expected}
    assert s["sensitivity_delta"] == 1.0
    assert s["by_slot"]["3"]["ci95"] == [0.0, pytest.approx(0.5615, abs=1e-4)]
    assert summary["recorded"] == 15 and summary["failed"] == 0

    requests = rows(db_path, """
        select r.trace_id, r.case_id, r.condition, r.strategy, r.experiment_id, r.model,
               r.service, r.prompt_tokens, r.prompt_chars, r.tokens_estimated, o.correct,
               o.decisive_chunk_ids, r.cited_ids, r.request_id, r.template_id
        from requests r join request_outcomes o using (trace_id) order by case_id, condition""")
    assert len(requests) == 15
    assert len({(r[1], r[2]) for r in requests}) == 15
    prompts = list(llm.prompts)
    for (trace_id, case_id, condition, strategy, experiment, model, service, tokens, chars,
         estimated, correct, decisive_ids, cited_ids, request_id, template_id) in requests:
        rank = int(condition.removeprefix("rank_"))
        i = case_id.removeprefix("case-")
        assert (strategy, experiment, model, service, template_id) == \
            ("score_order", "exp1", "fake-7b", "midtrace-sweep", "lost-in-the-middle-qa")
        assert correct == bool(expected[rank]), (case_id, condition)
        assert decisive_ids == [f"w{i}-spec"]
        assert cited_ids == ([f"w{i}-spec"] if correct else [])
        assert tokens == int(chars * 0.3) and estimated
        chunks = rows(db_path, """
            select c.chunk_id, c.retrieval_rank, c.label, c.decisive, c.cited, c.stage,
                   p.prompt_index, p.char_start, p.char_end, p.token_start, t.text
            from chunks c join placements p using (request_id, chunk_id)
            join chunk_texts t using (text_hash) where request_id = ? order by p.prompt_index""",
                      [request_id])
        assert [c[1] for c in chunks] == [1, 2, 3, 4, 5]  # score_order: rank = slot
        gold = [c for c in chunks if c[3]]
        assert [(c[0], c[1], c[2], c[4]) for c in gold] == [(f"w{i}-spec", rank, "direct_answer", correct)]
        assert {c[2] for c in chunks if not c[3]} == {"irrelevant"}
        assert {c[5] for c in chunks} == {"in_prompt"}
        prompt = next(p for p in prompts if all(p[c[7]:c[8]] == c[10] for c in chunks))
        assert len(prompt) == chars
        assert all(c[9] == int(c[7] * tokens / chars) for c in chunks)  # scaled by the usage


EXPECTED_BY_STRATEGY = {
    # prompt order of ranks 1..5 under each strategy, and the ranks whose slot is 1, 2 or 5
    "score_order": {1, 2, 5},           # 1,2,3,4,5
    "edge": {1, 3, 2},                  # 1,3,5,4,2
    "long_context_reorder": {1, 3, 2},  # same as edge for odd n
    "reverse": {5, 4, 1},               # 5,4,3,2,1
}


def test_strategies_rescue_middle_ranked_evidence(tmp_path: Path, llm: FakeLLM,
                                                  db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(2)])
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m",
                   "--strategies", ",".join(EXPECTED_BY_STRATEGY), "--db", str(db_path),
                   "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    by_strategy = {s["strategy"]: s for s in summary["strategies"]}
    for strategy, good_ranks in EXPECTED_BY_STRATEGY.items():
        acc = {c: v["accuracy"] for c, v in by_strategy[strategy]["by_condition"].items()}
        assert acc == {f"rank_{r}": float(r in good_ranks) for r in range(1, 6)}, strategy
        assert {int(k): v["accuracy"] for k, v in by_strategy[strategy]["by_slot"].items()} == \
            {1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0, 5: 1.0}
    assert by_strategy["edge"]["by_condition"]["rank_3"]["slots"] == [2]
    recorded = rows(db_path, """select strategy, condition, bool_and(o.correct), count(*)
                                from requests join request_outcomes o using (trace_id)
                                group by all""")
    assert len(recorded) == 20 and all(n == 2 for *_, n in recorded)
    # no usage from this endpoint: prompt tokens estimated as characters / 4
    assert rows(db_path, "select count(*) from requests where prompt_tokens = ceil(prompt_chars / 4)"
                ) == [(40,)]
    assert {(s, c) for s, c, ok, _ in recorded if ok} == \
        {(s, f"rank_{r}") for s, ranks in EXPECTED_BY_STRATEGY.items() for r in ranks}


def test_multi_piece_spacing_absent_and_constraints(tmp_path: Path, llm: FakeLLM,
                                                    db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [multi_case()])
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m", "--absent",
                   "--strategies", "score_order,edge", "--db", str(db_path), "--format", "json")
    assert result.exit_code == 0, result.output
    got = {(s, c): (ok, score, recalled, ranks) for s, c, ok, score, recalled, ranks in rows(db_path, """
        select r.strategy, r.condition, o.correct, o.score, o.recalled_constraints,
               list(c.retrieval_rank order by c.retrieval_rank) filter (where c.decisive)
        from requests r join request_outcomes o using (trace_id)
        left join chunks c using (request_id) group by all""")}
    # k = 8. score_order: adjacent at ranks 4,5 (unseen), both_edges 1,8 (both seen),
    # separated 3,6 (unseen). edge lays ranks 1,3,5,7,8,6,4,2: slots 1, 2, 8 hold ranks
    # 1, 3, 2: both_edges and separated show the window (rank 1 or 3) but not the receipt
    # (rank 8 or 6), so the answer matches (score 1) and still misses the constraint.
    assert got == {
        ("score_order", "adjacent"): (False, 0.0, [], [4, 5]),
        ("score_order", "both_edges"): (True, 1.0, ["original receipt"], [1, 8]),
        ("score_order", "separated"): (False, 0.0, [], [3, 6]),
        ("score_order", "absent"): (False, 0.0, [], None),
        ("edge", "adjacent"): (False, 0.0, [], [4, 5]),
        ("edge", "both_edges"): (False, 1.0, [], [1, 8]),
        ("edge", "separated"): (False, 1.0, [], [3, 6]),
        ("edge", "absent"): (False, 0.0, [], None),
    }
    labels = dict(rows(db_path, "select distinct chunk_id, label from chunks"))
    assert labels["policy-receipt"] == "exception_constraint"
    assert labels["faq-0"] == "supporting_background" and labels["faq-1"] == "irrelevant"
    summary = json.loads(result.stdout)
    score_order = summary["strategies"][0]
    assert score_order["constraint_recall"]["correct"] == 1
    assert score_order["by_condition"]["absent"]["n"] == 1


def test_summary_prints_tokens_and_cost_priced_by_the_table_given(
        tmp_path: Path, llm: FakeLLM, db_path: Path) -> None:
    llm.usage_ratio = 0.3  # usage: prompt tokens = characters * 0.3, 7 completion tokens a call
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-7b": {"input_per_mtok": 2.0, "output_per_mtok": 10.0,
                                              "example": True}}))
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(2)])
    args = ["--cases", str(cases), "--endpoint", llm.url, "--model", "fake-7b", "--db",
            str(db_path), "--concurrency", "1", "--prices", str(prices)]
    result = sweep(*args)
    assert result.exit_code == 0, result.output
    prompt_tokens = sum(int(len(p) * 0.3) for p in llm.prompts)
    output_tokens = 7 * len(llm.prompts)
    cost = (prompt_tokens * 2.0 + output_tokens * 10.0) / 1e6
    correct = 2 * 3  # the rule reads slots 1, 2 and 5: right at ranks 1, 2, 5 of each case
    line = next(x for x in result.stdout.splitlines() if "answer tokens" in x)
    assert line.strip() == (f"{prompt_tokens} prompt + {output_tokens} answer tokens; cost "
                            f"${cost:.4f}, ${cost / correct:.4f} per correct answer "
                            "(example prices: check them)")
    assert rows(db_path, "select distinct output_tokens from requests") == [(7,)]
    # a model the table does not price: the tokens, and the cost said to be unknown
    result = sweep(*args[:-2], "--model", "other-model", "--experiment", "other")
    unknown = next(x for x in result.stdout.splitlines() if "answer tokens" in x)
    assert "cost unknown" in unknown and "$" not in unknown


def test_retries_on_429_and_5xx(tmp_path: Path, llm: FakeLLM, db_path: Path) -> None:
    llm.statuses = [429, 500, 503, 429]
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(0)])
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m", "--db",
                   str(db_path), "--concurrency", "1", "--backoff", "0.01")
    assert result.exit_code == 0, result.output
    assert llm.attempts == 5 + 4
    assert rows(db_path, "select count(*) from requests") == [(5,)]
    journal = tmp_path / ".midtrace" / "sweeps"
    (path,) = journal.iterdir()
    attempts = [json.loads(line)["attempts"] for line in path.read_text().splitlines()[1:]]
    assert sorted(attempts) == [1, 1, 1, 1, 5]


def test_bad_lines_are_reported_and_the_rest_run(tmp_path: Path, llm: FakeLLM,
                                                 db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(0), single_case(1)],
                        extra={2: "{oops", 4: json.dumps({"id": "x", "question": "q"})})
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m", "--db",
                   str(db_path), "--ranks", "edges+middle")
    assert result.exit_code == 1
    assert f"{cases}: line 2: not JSON" in result.stderr
    assert f"{cases}: line 4: answers must be a non-empty list" in result.stderr
    assert rows(db_path, "select case_id, list(condition order by condition) from requests "
                         "group by case_id order by case_id") == \
        [("case-0", ["rank_1", "rank_3", "rank_5"]), ("case-1", ["rank_1", "rank_3", "rank_5"])]


def test_resume_after_a_kill_records_every_condition_once(tmp_path: Path, llm: FakeLLM,
                                                          db_path: Path) -> None:
    llm.delay = 0.05
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(4)])
    journal = tmp_path / "state" / "resume-test.jsonl"
    args = ["sweep", "--cases", str(cases), "--endpoint", llm.url, "--model", "m",
            "--experiment", "resume-test", "--strategies", "score_order,edge", "--db",
            str(db_path), "--concurrency", "2", "--state-dir", str(tmp_path / "state")]
    process = subprocess.Popen(MIDTRACE + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) > 10:
            break
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    first = len(journal.read_text().splitlines()) - 1
    assert 10 <= first < 40

    again = subprocess.run(MIDTRACE + args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "40 calls planned" in again.stderr
    assert f"{first} already recorded, {40 - first} to run" in again.stderr
    recorded = rows(db_path, "select case_id, condition, strategy, count(*) from requests group by all")
    assert len(recorded) == 40 and all(n == 1 for *_, n in recorded)
    lines = [json.loads(x) for x in journal.read_text().splitlines()[1:] if x.strip()]
    keys = [(x["case"], x["condition"], x["strategy"], x["repeat"]) for x in lines]
    assert len(keys) == len(set(keys)) == 40
    assert llm.attempts <= 40 + 2 * 2  # at most the calls in flight and the batch being written

    third = subprocess.run(MIDTRACE + args, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0 and "40 already recorded, 0 to run" in third.stderr
    assert "rank_3" in third.stdout  # the summary covers the whole experiment


def test_a_call_recorded_but_not_journaled_stays_one_request(tmp_path: Path, llm: FakeLLM,
                                                            db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(0)])
    args = ["--cases", str(cases), "--endpoint", llm.url, "--model", "m", "--db", str(db_path),
            "--experiment", "e", "--ranks", "1,2"]
    assert sweep(*args).exit_code == 0
    journal = tmp_path / ".midtrace" / "sweeps" / "e.jsonl"
    header, first, second = journal.read_text().splitlines()
    journal.write_text(header + "\n" + first + "\n")  # as if killed before the second line
    again = sweep(*args)
    assert again.exit_code == 0 and "1 already recorded, 1 to run" in again.stderr
    assert llm.attempts == 3
    assert rows(db_path, "select condition, count(*) from requests group by all order by 1") == \
        [("rank_1", 1), ("rank_2", 1)]
    trace_id = json.loads(second)["trace_id"]
    assert rows(db_path, "select count(*) from spans where trace_id = ?", [trace_id]) == [(2,)]
    assert rows(db_path, "select count(*) from request_outcomes") == [(2,)]


def test_token_goes_to_the_collector_as_a_bearer_header(tmp_path: Path, llm: FakeLLM) -> None:
    seen: list[tuple[str, str | None, str | None]] = []
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, pa.schema([])).close()
    no_rows = sink.getvalue().to_pybytes()

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append((self.path, self.headers.get("Authorization"),
                         self.headers.get("Content-Type")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # the summary's reads of the views, answered with no rows
            seen.append((self.path.split("?")[0], self.headers.get("Authorization"), None))
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.apache.arrow.stream")
            self.send_header("Content-Length", str(len(no_rows)))
            self.end_headers()
            self.wfile.write(no_rows)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        cases = write_cases(tmp_path / "cases.jsonl", [single_case(0)])
        result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m", "--ranks", "1",
                       "--url", f"http://127.0.0.1:{server.server_port}", "--token", "s3cret")
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    assert seen[0] == ("/v1/traces", "Bearer s3cret", "application/x-protobuf")
    assert sorted(seen[1:]) == [(f"/api/v1/views/{view}", "Bearer s3cret", None) for view in
                                ("citation_alignment", "cost_summary", "sweep_conditions",
                                 "sweep_slots", "sweep_summary")]


def test_db_held_by_a_collector_is_refused_plainly(tmp_path: Path, llm: FakeLLM,
                                                   collector: Proc, db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(0)])
    result = sweep("--cases", str(cases), "--endpoint", llm.url, "--model", "m",
                   "--db", str(db_path))
    assert result.exit_code == 1
    assert "held by another process" in result.stderr and "--url" in result.stderr
    assert llm.attempts == 0


def test_wrong_endpoint_stops_the_sweep(tmp_path: Path, llm: FakeLLM, db_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [single_case(i) for i in range(3)])
    result = sweep("--cases", str(cases), "--endpoint", llm.url.removesuffix("/v1"),
                   "--model", "m", "--db", str(db_path), "--concurrency", "1")
    assert result.exit_code == 1
    assert "answered 404" in result.stderr and "http://localhost:8000/v1" in result.stderr
    assert llm.attempts <= 2


def test_the_sweep_imports_without_duckdb_streamlit_or_the_server() -> None:
    code = ("import sys; import midtrace.cli, midtrace.schemas.packing; "
            "from midtrace.sweep import runner, recording, summary; "
            "light = {'midtrace.collector', 'midtrace.collector.settings', "
            "'midtrace.collector.query', 'midtrace.collector.query.reads', "
            "'midtrace.collector.query.readers'}; "
            "heavy = sorted(m for m in sys.modules if (m.split('.')[0] in "
            "('duckdb', 'streamlit', 'pyarrow', 'pandas', 'uvicorn', 'starlette') "
            "or m.startswith(('midtrace.collector', 'midtrace.dashboard'))) and m not in light); "
            "print(heavy); assert not heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
