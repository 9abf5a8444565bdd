"""`midtrace grade --judge-endpoint ... --judge-model ...` (docs/grading.md, "An LLM judge"):
a real collector or store, a real `midtrace` process, and a real local OpenAI-compatible
server standing in for the judge model (tests/fake_llm.py), answering by a fixed rule."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from midtrace.client import Filters, open_client
from midtrace.judge.prompt import BadVerdict, JudgePrompt, label_chunks, parse_verdict
from midtrace.judge.run import Cache, cache_key, sampled
from midtrace.schemas.model import Chunk, Placement, RagRecord
from tests.fake_llm import FakeLLM
from tests.metrics_fixtures import post_outcomes
from tests.procs import Proc, start_collector
from tests.sender import Sender

MIDTRACE = [sys.executable, "-m", "midtrace"]
MODEL = "judge-m"
N = 10
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}
FACT = re.compile(r"ANSWER: ([^.]+)")


def judge_rule(request: dict[str, Any]) -> str:
    """The stand-in judge: decisive are the documents marked KEYFACT; the answer is correct
    when it holds the marked fact; a receipt in the evidence is a qualifier."""
    prompt = request["messages"][-1]["content"]
    docs_part = prompt.split("\nDocuments:\n", 1)[1].rsplit("\nAnswer:\n", 1)
    answer = docs_part[1]
    docs = re.findall(r"^\[(\d+)\] (.*)$", docs_part[0], re.M)
    decisive = [int(i) for i, text in docs if "KEYFACT" in text]
    facts = [FACT.search(text)[1] for i, text in docs if "KEYFACT" in text]  # type: ignore[index]
    correct = any(f in answer for f in facts)
    evidence = ["with a receipt"] if any("receipt" in t for _, t in docs if "KEYFACT" in t) else []
    kept = [q for q in evidence if "receipt" in answer]
    return json.dumps({"decisive": decisive, "correct": correct, "supported": correct,
                       "qualifiers_in_evidence": evidence, "qualifiers_kept": kept,
                       "reason": "the answer states the marked fact" if correct
                       else "the answer misses the marked fact"})


def record(i: int) -> RagRecord:
    ids = [f"c{i}-{j}" for j in range(4)]
    texts = {cid: f"Noise paragraph {cid} about opening hours." for cid in ids}
    key = ids[i % 4]
    texts[key] = f"KEYFACT ANSWER: code {i}. Bring a receipt."
    chunks = tuple(Chunk(id=cid, text=texts[cid], retrieval_rank=j + 1) for j, cid in enumerate(ids))
    # the prompt holds the chunks in reverse retrieval order: the key chunk at slot 4 - i % 4
    placements = tuple(Placement(cid, j, j * 100, (j + 1) * 100)
                       for j, cid in enumerate(reversed(ids)))
    answer = f"The code is code {i}, with a receipt." if i % 2 == 0 else "I do not know."
    return RagRecord(question=f"What is the code of item {i}?", answer=answer, model="m",
                     prompt_tokens=400, chunks=chunks, placements=placements)


CORRECT = sum(1 for i in range(N) if i % 2 == 0)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, list[str], Path]]:
    """A running collector holding the N requests, and a copy of them in a stopped store."""
    folder = tmp_path_factory.mktemp("judge")
    proc = start_collector(folder / "traces.duckdb", folder / "collector.log")
    sender = Sender(proc.url)
    trace_ids = sender.send_many([record(i) for i in range(N)])
    sender.provider.shutdown()
    stored = folder / "stored.duckdb"
    second = start_collector(stored, folder / "second.log")
    s2 = Sender(second.url)
    s2.send_many([record(i) for i in range(N)])
    s2.provider.shutdown()
    second.stop()
    yield proc, trace_ids, stored
    proc.stop()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM(responder=judge_rule, usage_ratio=0.25)
    yield server
    server.close()


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({MODEL: PRICE}))
    return path


def store_copy(stored: Path, tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "copy.duckdb"
    shutil.copy(stored, db)
    return db


def grade(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIDTRACE_")}
    return subprocess.run([*MIDTRACE, "grade", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def judge_args(llm: FakeLLM, state: Path, prices: Path, *more: str) -> list[str]:
    return ["--judge-endpoint", llm.url, "--judge-model", MODEL, "--state-dir", str(state),
            "--prices", str(prices), *more]


def trace(db_or_url: str | Path, trace_id: str) -> dict[str, Any]:
    kwargs = {"url": db_or_url} if isinstance(db_or_url, str) else {"db": db_or_url}
    with open_client(**kwargs, fresh=True) as client:  # type: ignore[arg-type]
        found = client.trace(trace_id)
    assert found is not None
    return found


def summary_number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return float(match[1])


# --- no I/O ----------------------------------------------------------------------------------


def test_the_verdict_is_validated_strictly() -> None:
    good = {"decisive": [2], "correct": True, "supported": False, "qualifiers_in_evidence": ["x"],
            "qualifiers_kept": [], "reason": " fine "}
    v = parse_verdict("```json\n" + json.dumps(good) + "\n```", labels=3)
    assert (v.decisive, v.correct, v.supported, v.reason) == ((2,), True, False, "fine")
    for bad, message in [("nope", "not JSON"), ("[]", "not a JSON object"),
                         (json.dumps({**good, "decisive": [4]}), "outside 1..3"),
                         (json.dumps({**good, "correct": "yes"}), "correct must be true or false"),
                         (json.dumps({k: v for k, v in good.items() if k != "reason"}), "missing key"),
                         (json.dumps({**good, "extra": 1}), "unknown key"),
                         (json.dumps({**good, "reason": " "}), "reason must be")]:
        with pytest.raises(BadVerdict, match=message):
            parse_verdict(bad, labels=3)


def test_sampling_is_stable_by_trace_id_and_nested() -> None:
    ids = [f"{i:032x}" for i in range(1, 2001)]
    tenth = {t for t in ids if sampled(t, 0.1)}
    assert tenth == {t for t in ids if sampled(t.upper(), 0.1)}
    assert 140 <= len(tenth) <= 260
    assert tenth <= {t for t in ids if sampled(t, 0.5)}
    assert all(sampled(t, 1.0) for t in ids)


def test_documents_are_labelled_in_prompt_order_and_the_cache_key_sees_everything() -> None:
    chunks = [{"chunk_id": "a", "text": "A", "prompt_index": 1},
              {"chunk_id": "b", "text": "B", "prompt_index": 0},
              {"chunk_id": "c", "text": "C", "prompt_index": None}]
    labelled = label_chunks(chunks)
    assert labelled.documents == ((1, "B"), (2, "A")) and labelled.chunk_ids == {1: "b", 2: "a"}
    prompt = JudgePrompt.load()
    assert prompt.version == "judge-v1"
    text = prompt.render("Q {answer}?", labelled.documents, "A")
    assert "Q {answer}?" in text and "[1] B\n[2] A" in text
    keys = {cache_key("m", prompt, text), cache_key("m2", prompt, text),
            cache_key("m", JudgePrompt("judge-v2", prompt.text), text),
            cache_key("m", prompt, text + " ")}
    assert len(keys) == 4


# --- end to end ------------------------------------------------------------------------------


def test_a_cached_verdict_holding_unicode_line_separators_is_read_back(tmp_path: Path) -> None:
    """The cache writes U+2028 and U+0085 as they are (JSON allows them inside a string);
    read back with ``str.splitlines`` the line was cut in two and the call paid again."""
    cache = Cache(tmp_path)
    verdict = {"label": "supported", "reason": "the policy says\u202814 days\u0085and so"}
    cache.put("k1", {"verdict": verdict})
    cache.put("k2", {"verdict": {"label": "unsupported"}})
    cache.close()
    again = Cache(tmp_path)
    assert again.get("k1") == verdict and again.get("k2") == {"label": "unsupported"}
    again.close()


def test_judge_through_a_collector_then_a_rerun_reads_the_cache(
        collected: tuple[Proc, list[str], Path], llm: FakeLLM, prices: Path,
        tmp_path: Path) -> None:
    proc, trace_ids, _ = collected
    state = tmp_path / "state"
    done = grade("--url", proc.url, *judge_args(llm, state, prices))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"judged {N} with judge:{MODEL} (judge-v1): {CORRECT} correct, {N - CORRECT} wrong; " \
           "0 from the cache" in out
    assert llm.attempts == N
    # structured output asked for, with the judge's schema
    assert all(b["response_format"]["type"] == "json_schema" for b in llm.bodies)
    # the cost, from the endpoint's usage and the price table
    prompt_tokens = sum(int(len(b["messages"][-1]["content"]) * 0.25) for b in llm.bodies)
    completion_tokens = sum(max(len(judge_rule(b)) // 4, 1) for b in llm.bodies)
    cost = (prompt_tokens * PRICE["input_per_mtok"] + completion_tokens * PRICE["output_per_mtok"]) / 1e6
    assert f"{prompt_tokens} prompt + {completion_tokens} completion tokens; cost ${cost:.4f}" in out
    first = trace(proc.url, trace_ids[0])
    outcome = first["outcome"]
    assert (outcome["grader"], outcome["reviewer"], outcome["correct"]) == ("judge", f"judge:{MODEL}", True)
    assert outcome["decisive_chunk_ids"] == ["c0-0"]  # label [4]: the prompt's fourth chunk
    assert outcome["required_constraints"] == ["with a receipt"]
    assert outcome["recalled_constraints"] == ["with a receipt"]
    assert outcome["note"] == "judge-v1: supported: the answer states the marked fact"
    assert trace(proc.url, trace_ids[1])["outcome"]["correct"] is False
    with open_client(url=proc.url, fresh=True) as client:
        row = client.view("overview", Filters(grader="judge")).iloc[0]
        assert (int(row.graded), int(row.correct)) == (N, CORRECT)
        slots = client.view("accuracy_by_slot", Filters(grader="judge"))
        assert int(slots.n.sum()) == N
    # again: every verdict from the cache, nothing paid, nothing stored twice
    rows = sum(len(trace(proc.url, t)["outcomes"]) for t in trace_ids)
    again = grade("--url", proc.url, *judge_args(llm, state, prices))
    assert again.returncode == 0, again.stderr
    assert f"{N} from the cache" in again.stdout and "0 calls" in again.stdout
    assert llm.attempts == N
    assert sum(len(trace(proc.url, t)["outcomes"]) for t in trace_ids) == rows


def test_a_person_wins_over_the_judge_and_grader_judge_counts_the_judge(
        collected: tuple[Proc, list[str], Path], llm: FakeLLM, prices: Path,
        tmp_path: Path) -> None:
    _, _, stored = collected
    db = store_copy(stored, tmp_path)
    target = sorted_ids(db)[0]
    done = grade("--store", str(db), *judge_args(llm, tmp_path / "state", prices))
    assert done.returncode == 0, done.stderr
    judged = trace(db, target)["outcome"]["correct"]
    # a person's opposite grade, dated before the judge's, still wins
    proc = start_collector(db, tmp_path / "c.log")
    try:
        post_outcomes(proc.url, {"trace_id": target, "correct": not judged, "reviewer": "kim",
                                 "time": "2001-01-01T00:00:00Z"})
        got = trace(proc.url, target)["outcome"]
        assert (got["correct"], got["grader"], got["reviewer"]) == (not judged, "person", "kim")
        with open_client(url=proc.url, fresh=True) as client:
            judge_row = client.view("overview", Filters(grader="judge")).iloc[0]
            person_row = client.view("overview", Filters(grader="person")).iloc[0]
            all_row = client.view("overview").iloc[0]
        assert (int(judge_row.graded), int(judge_row.correct)) == (N, CORRECT)
        assert (int(person_row.graded), int(person_row.correct)) == (1, int(not judged))
        assert int(all_row.correct) == CORRECT + (1 if not judged else -1)
    finally:
        proc.stop()


def test_429_then_success(collected: tuple[Proc, list[str], Path], prices: Path,
                          tmp_path: Path) -> None:
    llm = FakeLLM(responder=judge_rule, usage_ratio=0.25, statuses=[429, 503, 429])
    try:
        db = store_copy(collected[2], tmp_path)
        done = grade("--store", str(db), *judge_args(llm, tmp_path / "s", prices))
        assert done.returncode == 0, done.stderr
        assert f"judged {N} " in done.stdout and "0 judge errors" in done.stdout
        assert llm.attempts == N + 3
    finally:
        llm.close()


def test_a_malformed_or_refused_answer_is_retried_then_recorded_as_a_judge_error(
        collected: tuple[Proc, list[str], Path], prices: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the first request: three malformed answers (1 + 2 retries): a judge error; the second:
    # one malformed then a good one; the third: a refusal then a good one
    llm = FakeLLM(responder=judge_rule, usage_ratio=0.25,
                  contents=["not json at all", '{"decisive": [1]', '{"correct": true}',
                            "Sure! here it is"])
    try:
        db = store_copy(collected[2], tmp_path)
        first = sorted_ids(db)[0]
        done = grade("--store", str(db), *judge_args(llm, tmp_path / "s", prices))
        assert done.returncode == 0, done.stderr
        assert f"judged {N - 1} " in done.stdout and "1 judge errors" in done.stdout
        assert llm.attempts == N + 3
        got = trace(db, first)
        assert got["outcome"] is None or got["outcome"]["correct"] is None  # no grade
        (error,) = got["outcomes"]
        assert error["grader"] == "judge" and error["correct"] is None
        assert error["note"].startswith("judge-v1: judge error: malformed answer: missing key(s)")
        assert "(after 3 calls)" in error["note"]
        with open_client(db=db) as client:
            assert int(client.view("overview", Filters(grader="judge")).iloc[0].graded) == N - 1
    finally:
        llm.close()
    # the inspector lists the judge error among the request's grades, as text
    from streamlit.testing.v1 import AppTest

    from midtrace import supervise as launch

    for key in (launch.ENV_URL, launch.ENV_TOKEN, launch.ENV_REQUIRE_TOKEN):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(launch.ENV_DB, str(db))
    at = AppTest.from_file(str(launch.app_path()), default_timeout=120)
    at.run()
    at.switch_page("app_pages/inspector.py")
    at.run()
    at.text_input(key="trace_id").input(first).run()
    assert not at.exception
    assert any(t.value == "Not graded yet." for t in at.text)
    grades = next(d.value for d in at.dataframe if "grader" in d.value.columns)
    assert list(grades["grader"]) == ["judge"]
    assert grades["note"].iloc[0].startswith("judge-v1: judge error: malformed answer")
    refusing = FakeLLM(responder=judge_rule, refusals=["I cannot help with that."] * 3)
    try:
        db = store_copy(collected[2], tmp_path / "r")
        done = grade("--store", str(db), *judge_args(refusing, tmp_path / "s2", prices))
        assert done.returncode == 0, done.stderr
        assert "1 judge errors" in done.stdout
        error = trace(db, sorted_ids(db)[0])["outcomes"][0]
        assert "the judge refused: I cannot help with that." in error["note"]
    finally:
        refusing.close()


def sorted_ids(db: Path) -> list[str]:
    """Trace ids in the order the judge reads them (arrival)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT trace_id FROM requests ORDER BY request_id").fetchall()]


def test_a_timeout_is_retried(collected: tuple[Proc, list[str], Path], prices: Path,
                              tmp_path: Path) -> None:
    llm = FakeLLM(responder=judge_rule, usage_ratio=0.25, delays=[3.0])
    try:
        db = store_copy(collected[2], tmp_path)
        done = grade("--store", str(db), *judge_args(llm, tmp_path / "s", prices, "--timeout",
                                                      "0.5", "--retries", "2"))
        assert done.returncode == 0, done.stderr
        assert f"judged {N} " in done.stdout and "0 judge errors" in done.stdout
        assert llm.attempts == N + 1
    finally:
        llm.close()
    stuck = FakeLLM(responder=judge_rule, delays=[3.0, 3.0])
    try:
        db = store_copy(collected[2], tmp_path / "stuck")
        done = grade("--store", str(db), *judge_args(stuck, tmp_path / "s2", prices, "--timeout",
                                                      "0.5", "--retries", "1"))
        assert done.returncode == 0, done.stderr
        assert "1 judge errors" in done.stdout
        error = trace(db, sorted_ids(db)[0])["outcomes"][0]
        assert "timed out" in error["note"] and error["correct"] is None
    finally:
        stuck.close()


def test_the_budget_stops_the_run_clearly(collected: tuple[Proc, list[str], Path], llm: FakeLLM,
                                          tmp_path: Path) -> None:
    expensive = tmp_path / "prices.json"
    expensive.write_text(json.dumps({MODEL: {"input_per_mtok": 10000, "output_per_mtok": 10000}}))
    db = store_copy(collected[2], tmp_path)
    # one call costs about (0.25 * prompt chars + answer chars / 4) * 1e-2 dollars: ~$4-6
    done = grade("--store", str(db), *judge_args(llm, tmp_path / "s", expensive,
                                                  "--budget-usd", "12"))
    assert done.returncode == 5, (done.stdout, done.stderr)
    assert "stopped: the budget of $12.0000 is spent" in done.stderr
    assert "Run again with a larger --budget-usd" in done.stderr
    spent = summary_number(r"cost \$([0-9.]+)", done.stdout)
    calls = llm.attempts
    assert 2 <= calls < N and spent >= 12
    with open_client(db=db) as client:
        assert int(client.view("overview", Filters(grader="judge")).iloc[0].graded) == calls
    # no price for the model: a budget cannot be kept, so it is refused up front
    unpriced = tmp_path / "none.json"
    unpriced.write_text("{}")
    refused = grade("--store", str(db), *judge_args(llm, tmp_path / "s", unpriced,
                                                     "--budget-usd", "1"))
    assert refused.returncode == 2 and f"{MODEL} is not in the price table" in refused.stderr


def test_resume_after_kill_9_pays_no_call_twice(collected: tuple[Proc, list[str], Path],
                                                prices: Path, tmp_path: Path) -> None:
    llm = FakeLLM(responder=judge_rule, usage_ratio=0.25, delay=0.3)
    state = tmp_path / "state"
    try:
        db = store_copy(collected[2], tmp_path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MIDTRACE_")}
        run = subprocess.Popen([*MIDTRACE, "grade", "--store", str(db),
                                *judge_args(llm, state, prices)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        cache = state / "judge-cache.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if cache.exists() and len(cache.read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        assert run.returncode == -signal.SIGKILL
        journaled = len([line for line in cache.read_text().splitlines() if line.strip()])
        paid_before = llm.attempts
        assert 4 <= journaled < N and paid_before <= journaled + 1
        done = grade("--store", str(db), *judge_args(llm, state, prices))
        assert done.returncode == 0, done.stderr
        assert f"judged {N} " in done.stdout
        assert f"{journaled} from the cache" in done.stdout
        # each request paid once; only a call in flight at the kill is paid again
        assert llm.attempts - paid_before == N - journaled
        assert llm.attempts <= N + 1
        with open_client(db=db) as client:
            row = client.view("overview", Filters(grader="judge")).iloc[0]
            assert (int(row.graded), int(row.correct)) == (N, CORRECT)
    finally:
        llm.close()


def test_an_endpoint_without_structured_output_is_asked_in_the_prompt_only(
        collected: tuple[Proc, list[str], Path], prices: Path, tmp_path: Path) -> None:
    llm = FakeLLM(responder=judge_rule, refuse_response_format=True)
    try:
        db = store_copy(collected[2], tmp_path)
        done = grade("--store", str(db), *judge_args(llm, tmp_path / "s", prices,
                                                      "--sample", "0.5"))
        assert done.returncode == 0, done.stderr
        judged = int(summary_number(r"judged (\d+) ", done.stdout))
        sample = sum(1 for t in sorted_ids(db) if sampled(t, 0.5))
        assert judged == sample and f"{N - sample} not in the sample" in done.stdout
        # one refused structured call, then plain calls only
        assert [("response_format" in b) for b in llm.bodies] == [True] + [False] * judged
        # no usage reported: tokens estimated, said so
        assert "some estimated" in done.stdout
    finally:
        llm.close()


def test_follow_judges_requests_that_arrive_later(
        collected: tuple[Proc, list[str], Path], prices: Path, tmp_path: Path) -> None:
    proc = start_collector(tmp_path / "f.duckdb", tmp_path / "f.log")
    llm = FakeLLM(responder=judge_rule, usage_ratio=0.25)
    sender = Sender(proc.url)
    try:
        first = sender.send_many([record(i) for i in range(2)])
        env = {k: v for k, v in os.environ.items() if not k.startswith("MIDTRACE_")}
        run = subprocess.Popen([*MIDTRACE, "grade", "--url", proc.url, "--follow",
                                "--poll-seconds", "0.2", *judge_args(llm, tmp_path / "s", prices)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        later = sender.send_many([record(i) for i in range(2, 5)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and llm.attempts < 5:
            time.sleep(0.1)
        time.sleep(0.5)  # the last outcome batch goes out when the page is done
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=30)
        assert run.returncode == 0, err
        assert "judged 5 " in out and llm.attempts == 5
        for t in first + later:
            assert trace(proc.url, t)["outcome"]["grader"] == "judge"
    finally:
        sender.provider.shutdown()
        llm.close()
        proc.stop()


def test_usage_errors(collected: tuple[Proc, list[str], Path], llm: FakeLLM, prices: Path,
                      tmp_path: Path) -> None:
    db = str(collected[2])
    both = grade("--store", db, "--references", str(prices), "--judge-endpoint", llm.url,
                 "--judge-model", MODEL)
    assert both.returncode == 2 and "one of the two" in both.stderr
    half = grade("--store", db, "--judge-endpoint", llm.url)
    assert half.returncode == 2 and "needs both" in half.stderr
    follow = grade("--store", db, "--follow", *judge_args(llm, tmp_path, prices))
    assert follow.returncode == 2 and "give --url" in follow.stderr
    key = grade("--store", db, "--api-key-env", "MIDTRACE_TEST_UNSET_KEY",
                *judge_args(llm, tmp_path, prices))
    assert key.returncode == 2 and "MIDTRACE_TEST_UNSET_KEY is unset" in key.stderr
    assert llm.attempts == 0


# --- judge calibration -----------------------------------------------------------------------

# (person, judge) verdicts planted on the N requests: 4 both correct, 2 only the person says
# correct, 1 only the judge, 2 both wrong; the last request has a person's grade only
PLANTED = [(True, True)] * 4 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 2 + [(True, None)]


def test_agreement_and_kappa_on_a_planted_set(collected: tuple[Proc, list[str], Path],
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from midtrace.collector.receive.bodies import outcome_from_json
    from midtrace.collector.storage.store import Store, WriteJob

    db = store_copy(collected[2], tmp_path)
    ids = sorted_ids(db)
    items = []
    for t, (person, judge) in zip(ids, PLANTED, strict=True):
        items.append({"trace_id": t, "correct": person, "reviewer": "kim"})
        if judge is not None:
            items.append({"trace_id": t, "grader": "judge", "correct": judge,
                          "reviewer": f"judge:{MODEL}", "time": "2030-01-01T00:00:00Z"})
    store = Store.open(db)
    try:
        store.write([WriteJob(outcomes=[outcome_from_json(i) for i in items])])
    finally:
        store.close()
    # by hand: n = 9, p_o = 6/9, p_e = (6*5 + 3*4) / 81, kappa = (p_o - p_e) / (1 - p_e)
    n, p_o, p_e = 9, 6 / 9, (6 * 5 + 3 * 4) / 81
    kappa = (p_o - p_e) / (1 - p_e)
    half = 1.959964 * (p_o * (1 - p_o) / n) ** 0.5 / (1 - p_e)
    with open_client(db=db) as client:
        for grader in (None, "judge", "person"):  # the same under every grader= filter
            row = client.view("judge_agreement", Filters(grader=grader)).iloc[0]
            assert (int(row.n), int(row.both_correct), int(row.person_only_correct),
                    int(row.judge_only_correct), int(row.both_wrong), int(row.agree)) == (9, 4, 2, 1, 2, 6)
            assert row.agreement == pytest.approx(p_o)
            assert row.kappa == pytest.approx(kappa)
            assert (row.kappa_ci_low, row.kappa_ci_high) == (
                pytest.approx(max(-1, kappa - half)), pytest.approx(min(1, kappa + half)))
            assert row.agreement_ci_low < p_o < row.agreement_ci_high
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIDTRACE_")}
    report = subprocess.run([*MIDTRACE, "report", "--store", str(db), "--format", "json"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert report.returncode == 0, report.stderr
    (section,) = json.loads(report.stdout)["judge_agreement"]
    assert section["n"] == 9 and section["kappa"] == pytest.approx(kappa)
    md = subprocess.run([*MIDTRACE, "report", "--store", str(db), "--format", "md"],
                        capture_output=True, text=True, timeout=120, env=env)
    assert ("Judge calibration: on the 9 requests both a person and the LLM judge graded, they "
            "agree on 66.7% (95% CI") in md.stdout
    assert f"Cohen's kappa {kappa:.2f} (" in md.stdout
    # the Overview says it too
    from streamlit.testing.v1 import AppTest

    from midtrace import supervise as launch

    for key in (launch.ENV_URL, launch.ENV_TOKEN, launch.ENV_REQUIRE_TOKEN):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(launch.ENV_DB, str(db))
    at = AppTest.from_file(str(launch.app_path()), default_timeout=120)
    at.run()
    assert not at.exception
    assert any("Judge calibration: on the 9 requests" in i.value for i in at.info)
