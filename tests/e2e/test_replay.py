"""`midtrace replay` on the bundled sample traces' refund incident, against the local stand-in
endpoint with a position rule, then the dashboard in a real browser.

The refund incident (sample_traces/manifest.json) put its decisive chunk, the refund policy,
at slot 7 of 10 in score order; the model answered 30 days from a warranty paragraph. The
stand-in reads only the first 40% and the last 10% of the documents: the edge layout (slot 4)
and the decisive chunk first or last answer 14 days, score order and the original do not.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from midtrace.client import open_client
from midtrace.demo import load_samples
from midtrace.prices import DEFAULT_PRICES, load_prices
from midtrace.sweep.replay import NO_TEXT, incident_from_trace
from tests import browser as b
from tests.fake_llm import DOC, FakeLLM
from tests.procs import start, start_collector

MIDTRACE = [sys.executable, "-m", "midtrace"]
REFUND = "fab9bc8804e3fb0e490558bbe686c2ae"
QUESTION = "What is the refund window for annual plans?"
EXPERIMENT = "refund-replay"
READY = re.compile(r"midtrace dashboard at (http://\S+)")


def reads(slot: int, k: int) -> bool:
    """The position rule: the model reads the first 40% of the documents and the last 10%."""
    return slot <= 0.4 * k or slot > 0.9 * k


def answer(request: dict) -> str:
    docs = [(int(i), text) for i, text in DOC.findall(request["messages"][-1]["content"])]
    for slot, text in docs:
        if reads(slot, len(docs)) and "within 14 days" in text:
            return f"Annual plans can be refunded within 14 days of the charge [{slot}]."
    return "You can request a refund within 30 days."


@dataclass
class Replayed:
    db: Path
    done: subprocess.CompletedProcess[str]
    result: dict
    llm: FakeLLM


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replayed]:
    tmp = tmp_path_factory.mktemp("replay")
    db = tmp / "samples.duckdb"
    load_samples(db)
    refs = tmp / "refs.jsonl"
    refs.write_text(json.dumps({"question": QUESTION.lower(), "answers": ["14 days"]}) + "\n")
    llm = FakeLLM(responder=answer, usage_ratio=0.25)
    try:
        done = subprocess.run(
            [*MIDTRACE, "replay", "--store", str(db), "--trace-id", REFUND, "--endpoint", llm.url,
             "--model", "gpt-4.1-mini", "--strategies", "edge,score_order", "--repeats", "3",
             "--references", str(refs), "--experiment", EXPERIMENT, "--json"],
            capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        yield Replayed(db, done, json.loads(done.stdout), llm)
    finally:
        llm.close()


def test_the_edge_layout_answers_the_refund_incident_and_score_order_does_not(
        replayed: Replayed) -> None:
    r = replayed.result
    assert r["trace_id"] == REFUND and r["experiment"] == EXPERIMENT
    # the sample trace carried no prompt text: the prompt was rebuilt from its chunks
    assert r["prompt"] == "reconstructed"
    assert r["original"] == {"strategy": "score_order", "correct": False,
                             "answer": "You can request a refund within 30 days."}
    by = {x["layout"]: x for x in r["layouts"]}
    assert list(by) == ["original", "edge", "score_order", "decisive_first", "decisive_last"]
    assert {n: x["decisive_slots"] for n, x in by.items()} == {
        "original": [7], "edge": [4], "score_order": [7], "decisive_first": [1],
        "decisive_last": [10]}
    assert {n: (x["correct"], x["calls"]) for n, x in by.items()} == {
        "original": (0, 3), "edge": (3, 3), "score_order": (0, 3), "decisive_first": (3, 3),
        "decisive_last": (3, 3)}
    assert r["calls"] == 15 == len(replayed.llm.prompts)
    # cost from the stand-in's usage and the shipped price table's entry for the model
    assert r["prompt_tokens"] == sum(int(len(p) * 0.25) for p in replayed.llm.prompts)
    assert r["completion_tokens"] == sum(max(len(answer(body)) // 4, 1)
                                         for body in replayed.llm.bodies)
    price = load_prices(DEFAULT_PRICES)["gpt-4.1-mini"]
    assert r["cost_usd"] == pytest.approx(price.cost(r["prompt_tokens"], r["completion_tokens"]))
    assert "15 calls (5 layouts x 3)" in replayed.done.stderr and "estimated cost $" in \
        replayed.done.stderr
    # the prompt asked is the request's chunks with the question, under the default template
    first = replayed.llm.prompts[0]
    assert QUESTION in first and first.count("Document [") == 10


def test_the_replays_are_an_experiment_linked_to_the_original(replayed: Replayed) -> None:
    client = open_client(db=replayed.db)
    try:
        trace = client.trace(REFUND)
        assert trace is not None
        rows = {row["layout"]: row for row in trace["replays"]}
        assert set(rows) == {"original", "edge", "score_order", "decisive_first",
                             "decisive_last"}
        assert all(row["experiment"] == EXPERIMENT and row["calls"] == 3 for row in rows.values())
        assert rows["edge"]["correct"] == 3 and rows["score_order"]["correct"] == 0
        # the Experiments page's view sees the layouts as strategies of one experiment
        summary = client.view("sweep_summary")
        mine = summary[summary["experiment"] == EXPERIMENT].set_index("strategy")
        assert mine.loc["edge", "accuracy"] == 1.0 and mine.loc["score_order", "accuracy"] == 0.0
        # a replay is a request of its own, whose case id is the original trace id
        one = client.trace(_a_replay(client))
        assert one is not None and one["request"]["case_id"] == REFUND
        assert one["request"]["condition"] == "replay" and one["request"]["service"] == \
            "midtrace-replay"
    finally:
        client.close()


def _a_replay(client) -> str:  # type: ignore[no-untyped-def]
    from midtrace.collector.query.reads import Filters

    page, _ = client.requests_page(Filters.from_params({"experiment": EXPERIMENT,
                                                        "strategy": "edge"}), limit=10)
    assert len(page) == 3
    return str(page["trace_id"].iloc[0])


def test_a_request_stored_without_text_cannot_be_replayed(tmp_path: Path) -> None:
    db = tmp_path / "no-text.duckdb"
    load_samples(db, keep_text=False)
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"question": QUESTION, "answers": ["14 days"]}) + "\n")
    done = subprocess.run(
        [*MIDTRACE, "replay", "--store", str(db), "--trace-id", REFUND, "--endpoint",
         "http://127.0.0.1:9/v1", "--model", "m", "--references", str(refs)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "cannot be replayed" in done.stderr and "--no-text" in done.stderr
    trace = {"trace_id": REFUND, "request": {"question": None},
             "chunks": [{"chunk_id": "c1", "text": None, "is_decisive": True}]}
    assert incident_from_trace(trace, {}) == NO_TEXT


@pytest.mark.browser
def test_the_inspector_links_the_incident_to_its_replay(replayed: Replayed,
                                                        tmp_path: Path) -> None:
    dashboard = start(["dashboard", "--store", str(replayed.db), "--port", "0"],
                      tmp_path / "dashboard.log", ready=READY, timeout=90)
    try:
        with sync_playwright() as pw:
            try:
                browser = b.launch(pw)
            except b.BrowserMissing as e:
                pytest.fail(str(e))
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(30_000)
                _inspector_shows_the_replay(page, dashboard.url)
            finally:
                browser.close()
    finally:
        assert dashboard.stop() == 0, dashboard.log()


def _inspector_shows_the_replay(page: Page, base: str) -> None:
    page.goto(b.page_url(base, "inspector", f"trace_id={REFUND}"))
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    expect(page.get_by_role("heading", name="Replays")).to_be_visible()
    table = page.locator(".st-key-table_replays")
    cells = table.locator('[data-testid="stDataFrame"] td[role="gridcell"]')
    expect(cells.filter(has_text=EXPERIMENT).first).to_be_attached()
    expect(cells.filter(has_text="edge").first).to_be_attached()
    # the link column points at the experiment on the Experiments page
    expect(cells.filter(has_text="experiments?").first).to_be_attached()
    link = next(t for t in cells.all_text_contents() if "experiments?" in t)
    assert f"experiment={EXPERIMENT}" in link
    page.goto(base + "/" + link.strip().removeprefix("./"))
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    expect(page.get_by_role("heading", name="Experiments")).to_be_visible()
    # the replay experiment is the one selected, its layouts compared like strategies
    expect(page.get_by_role("combobox", name="Experiment")).to_have_value(EXPERIMENT)
    main = page.locator('[data-testid="stMain"]')
    for layout in ("original", "edge", "decisive_first", "decisive_last"):
        expect(main.get_by_text(layout, exact=True).first).to_be_visible()
    expect(main.get_by_text("100.0%", exact=True).first).to_be_visible()


def test_the_stored_prompt_of_an_openinference_trace_holds_its_chunks_at_their_offsets(
        replayed: Replayed) -> None:
    """The bundled LangChain traces carried their prompts: the query API gives them back as
    the collector joined them, so every stored chunk offset points at the chunk's text."""
    from midtrace.collector.query.reads import Filters

    client = open_client(db=replayed.db)
    try:
        page, _ = client.requests_page(Filters.from_params({"service": "policy-bot"}), limit=5)
        checked = 0
        for trace_id in page["trace_id"]:
            trace = client.trace(str(trace_id))
            prompts = client.prompts(str(trace_id))
            assert trace is not None and prompts
            texts = {c["chunk_id"]: c["text"] for c in trace["chunks"]}
            for p in trace["placements"]:
                assert prompts[0][p["char_start"]:p["char_end"]] == texts[p["chunk_id"]]
                checked += 1
        assert checked > 0
        # a trace in midtrace's own convention records positions, not the prompt
        assert client.prompts(REFUND) == []
    finally:
        client.close()


@pytest.mark.browser
def test_the_inspector_replays_after_showing_the_count_and_the_estimate(tmp_path: Path) -> None:
    """With a collector behind it and MIDTRACE_SWEEP_ENDPOINT set, the inspector counts the
    calls and estimates their cost, and spends them only on confirmation."""
    db = tmp_path / "samples.duckdb"
    load_samples(db)
    llm = FakeLLM(responder=answer, usage_ratio=0.25)
    collector = start_collector(db, tmp_path / "collector.log")
    try:
        dashboard = start(["dashboard", "--url", collector.url, "--port", "0"],
                          tmp_path / "dashboard.log", ready=READY, timeout=90,
                          env={"MIDTRACE_SWEEP_ENDPOINT": llm.url,
                               "MIDTRACE_SWEEP_MODEL": "gpt-4.1-mini"})
        try:
            with sync_playwright() as pw:
                try:
                    browser = b.launch(pw)
                except b.BrowserMissing as e:
                    pytest.fail(str(e))
                try:
                    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                    page.set_default_timeout(30_000)
                    _replay_from_the_inspector(page, dashboard.url, llm)
                finally:
                    browser.close()
        finally:
            assert dashboard.stop() == 0, dashboard.log()
    finally:
        collector.stop()
        llm.close()
    client = open_client(db=db)
    try:
        trace = client.trace(REFUND)
        assert trace is not None
        rows = {row["layout"]: (row["correct"], row["calls"]) for row in trace["replays"]}
        assert rows == {"original": (0, 2), "edge": (2, 2), "long_context_reorder": (0, 2),
                        "decisive_first": (2, 2), "decisive_last": (2, 2)}
    finally:
        client.close()


def _replay_from_the_inspector(page: Page, base: str, llm: FakeLLM) -> None:
    page.goto(b.page_url(base, "inspector", f"trace_id={REFUND}"))
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    page.get_by_text("Replay it here").click()
    page.get_by_label("Calls per layout").fill("2")
    page.get_by_label("Accepted answers, one per line").fill("14 days")
    page.get_by_role("button", name="Count the calls and estimate the cost").click()
    b.wait_rendered(page, timeout=60)
    expect(page.get_by_text(re.compile(r"^10 calls \(5 layouts: original, edge, "
                                       r"long_context_reorder, decisive_first, decisive_last\) "
                                       r"to gpt-4.1-mini; estimated cost \$\d"))).to_be_visible()
    assert llm.attempts == 0, "no call before the confirmation"
    page.get_by_role("button", name="Spend 10 calls").click()
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    expect(page.get_by_text("Replays recorded: see the table above.")).to_be_visible()
    assert llm.attempts == 10
    cells = page.locator('.st-key-table_replays [data-testid="stDataFrame"] td[role="gridcell"]')
    expect(cells.filter(has_text="decisive_first").first).to_be_attached()
