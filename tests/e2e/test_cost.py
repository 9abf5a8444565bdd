"""Cost end to end: output tokens stored from every convention, a reported cost kept, an
estimate priced by the price table the collector was given, and the cost views' numbers on a
small dataset worked out here by hand. A real collector, fed by the real OTel SDK exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from midtrace.collector.query.reads import Filters, read_cursor, run_view
from midtrace.collector.storage.store import Store, open_read_only
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from tests.procs import Proc, start_collector
from tests.sender import Sender

PRICES = {  # USD per million tokens
    "model-a": {"input_per_mtok": 2.0, "output_per_mtok": 10.0},
    "model-b": {"input_per_mtok": 1.0, "output_per_mtok": 5.0, "example": True},
}
WEEK1 = datetime(2026, 11, 3, 12, tzinfo=UTC)  # ISO week of Monday 2026-11-02
WEEK2 = datetime(2026, 11, 11, 12, tzinfo=UTC)  # ISO week of Monday 2026-11-09
DOCS = {"refund#1": "Annual plans can be refunded within 14 days of the charge.",
        "warranty#2": "Hardware carries a warranty of 30 days from delivery."}


@dataclass(frozen=True)
class Sent:
    """One own-convention request of the known dataset."""

    when: datetime
    template: str
    strategy: str
    model: str
    prompt_tokens: int
    output_tokens: int | None
    correct: bool | None  # None: ungraded
    cost_usd: float | None = None
    experiment: str | None = None


DATASET = (
    Sent(WEEK1, "t1", "edge", "model-a", 1000, 50, True),
    Sent(WEEK1, "t1", "edge", "model-a", 800, 40, False, cost_usd=0.01),
    Sent(WEEK1, "t1", "edge", "model-a", 2000, 100, True),
    Sent(WEEK1, "t2", "score_order", "model-z", 500, 10, True),  # not in the price table
    Sent(WEEK1, "t2", "score_order", "model-b", 1000, 100, False),
    Sent(WEEK1, "t2", "score_order", "model-a", 300, None, True),  # output tokens unknown
    Sent(WEEK1, "t1", "edge", "model-a", 400, 20, None),  # ungraded: costs, not per correct
    Sent(WEEK2, "t1", "edge", "model-a", 100, 10, False),
    Sent(WEEK1, "t1", "edge", "model-a", 5000, 500, True, experiment="sweep-1"),
)


def by_hand(sent: Sent) -> tuple[float | None, str | None]:
    """What the request cost, and how it is known, worked out from the price table above."""
    if sent.cost_usd is not None:
        return sent.cost_usd, "reported"
    price = PRICES.get(sent.model)
    if price is None or sent.output_tokens is None:
        return None, None
    return (sent.prompt_tokens * price["input_per_mtok"]
            + sent.output_tokens * price["output_per_mtok"]) / 1e6, "estimated"


def record(sent: Sent, i: int) -> RagRecord:
    return RagRecord(
        question=f"question {i}", answer=f"answer {i}", model=sent.model,
        template_id=sent.template, strategy=sent.strategy, experiment_id=sent.experiment,
        prompt_tokens=sent.prompt_tokens, output_tokens=sent.output_tokens,
        cost_usd=sent.cost_usd,
        chunks=(Chunk("refund#1", label="direct_answer"),),
        placements=(Placement("refund#1", 0, 10, 40),),
        outcome=Outcome(correct=sent.correct) if sent.correct is not None else None)


def ns(when: datetime) -> int:
    return int(when.timestamp() * 1e9)


def tracer_to(url: str, service: str) -> tuple[TracerProvider, Any]:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces")))
    return provider, provider.get_tracer("cost-test")


def prompt() -> str:
    return "Answer from the documents.\n" + "\n".join(
        f"[{i}] {text}" for i, text in enumerate(DOCS.values(), start=1)) + "\nQuestion: refund?"


def own_with_genai_usage(tracer: Any) -> str:
    """midtrace attributes without midtrace.answer.tokens, GenAI usage on the same LLM span."""
    with tracer.start_as_current_span("rag", start_time=ns(WEEK1)) as root:
        with tracer.start_as_current_span("llm", start_time=ns(WEEK1)) as llm:
            record_request(llm, RagRecord(question="own + usage", model="model-a",
                                          template_id="conv", prompt_tokens=700,
                                          chunks=(Chunk("refund#1"),)))
            llm.set_attribute("gen_ai.usage.output_tokens", 33)
        return format(root.get_span_context().trace_id, "032x")


def openinference(tracer: Any) -> str:
    with tracer.start_as_current_span("rag", start_time=ns(WEEK1)) as root:
        with tracer.start_as_current_span("retrieve", start_time=ns(WEEK1)) as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            for i, (cid, text) in enumerate(DOCS.items()):
                span.set_attribute(f"retrieval.documents.{i}.document.id", cid)
                span.set_attribute(f"retrieval.documents.{i}.document.content", text)
        with tracer.start_as_current_span("llm", start_time=ns(WEEK1)) as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("llm.model_name", "model-a")
            span.set_attribute("llm.input_messages.0.message.role", "user")
            span.set_attribute("llm.input_messages.0.message.content", prompt())
            span.set_attribute("llm.output_messages.0.message.content", "14 days [1]")
            span.set_attribute("llm.token_count.prompt", 900)
            span.set_attribute("llm.token_count.completion", 41)
        return format(root.get_span_context().trace_id, "032x")


def genai(tracer: Any, legacy: bool) -> str:
    with tracer.start_as_current_span("rag", start_time=ns(WEEK1)) as root:
        with tracer.start_as_current_span("retrieve", start_time=ns(WEEK1)) as span:
            span.set_attribute("gen_ai.operation.name", "retrieval")
            span.set_attribute("gen_ai.retrieval.documents", json.dumps(
                [{"id": cid, "score": 0.9, "content": text} for cid, text in DOCS.items()]))
        with tracer.start_as_current_span("chat", start_time=ns(WEEK1)) as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", "model-a")
            if legacy:  # OpenLLMetry's older names
                span.set_attribute("gen_ai.prompt.0.role", "user")
                span.set_attribute("gen_ai.prompt.0.content", prompt())
                span.set_attribute("gen_ai.completion.0.content", "14 days [1]")
                span.set_attribute("gen_ai.usage.prompt_tokens", 910)
                span.set_attribute("gen_ai.usage.completion_tokens", 45)
            else:
                span.set_attribute("gen_ai.input.messages", json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": prompt()}]}]))
                span.set_attribute("gen_ai.output.messages", json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "14 days [1]"}]}]))
                span.set_attribute("gen_ai.usage.input_tokens", 920)
                span.set_attribute("gen_ai.usage.output_tokens", 44)
        return format(root.get_span_context().trace_id, "032x")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A store written by a collector given --prices: the dataset and one trace per convention."""
    tmp = tmp_path_factory.mktemp("cost")
    prices = tmp / "prices.json"
    prices.write_text(json.dumps(PRICES))
    db = tmp / "traces.duckdb"
    proc: Proc = start_collector(db, tmp / "collector.log", "--prices", str(prices))
    try:
        sender = Sender(proc.url, service="cost-app")
        traces = {f"sent{i}": sender.send(record(s, i), start_ns=ns(s.when))
                  for i, s in enumerate(DATASET)}
        sender.close()
        provider, tracer = tracer_to(proc.url, "zero-code")
        traces["own_usage"] = own_with_genai_usage(tracer)
        traces["openinference"] = openinference(tracer)
        traces["genai"] = genai(tracer, legacy=False)
        traces["genai_legacy"] = genai(tracer, legacy=True)
        provider.shutdown()
        answer = httpx.get(proc.url + "/api/v1/settings", params={"fresh": "1"}, timeout=15)
        assert answer.status_code == 200
    finally:
        proc.stop()
    yield db, traces


def request_row(db: Path, trace_id: str, columns: str) -> tuple[Any, ...]:
    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute(f"SELECT {columns} FROM requests JOIN request_costs USING (request_id) "
                           "WHERE trace_id = ?", [trace_id]).fetchone()
    assert row is not None, f"no request for {trace_id}"
    return row


@pytest.mark.parametrize(("name", "convention", "tokens"), [
    ("sent0", "midtrace", 50),  # midtrace.answer.tokens
    ("own_usage", "midtrace", 33),  # own convention, gen_ai.usage.output_tokens beside it
    ("openinference", "openinference", 41),  # llm.token_count.completion
    ("genai", "genai", 44),  # gen_ai.usage.output_tokens
    ("genai_legacy", "genai", 45),  # gen_ai.usage.completion_tokens
])
def test_output_tokens_are_stored_from_each_convention(store: tuple[Path, dict[str, str]],
                                                       name: str, convention: str,
                                                       tokens: int) -> None:
    db, traces = store
    assert request_row(db, traces[name], "convention, requests.output_tokens") == (convention, tokens)


def test_the_apps_cost_is_kept_and_others_are_estimated_from_the_price_table(
        store: tuple[Path, dict[str, str]]) -> None:
    db, traces = store
    for i, sent in enumerate(DATASET):
        cost, source = by_hand(sent)
        row = request_row(db, traces[f"sent{i}"],
                          "request_costs.cost_usd, cost_source, example_price")
        assert row[1] == source, sent
        assert row[0] == pytest.approx(cost) if cost is not None else row[0] is None, sent
        assert row[2] == (source == "estimated" and bool(PRICES[sent.model].get("example"))), sent
    # an OpenInference call priced from its own token counts
    (cost, source) = request_row(db, traces["openinference"], "request_costs.cost_usd, cost_source")
    assert (cost, source) == (pytest.approx((900 * 2.0 + 41 * 10.0) / 1e6), "estimated")


def expected_rows(filtered: list[Sent]) -> dict[tuple[date, str, str], dict[str, Any]]:
    out: dict[tuple[date, str, str], dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "priced": 0, "cost": 0.0, "correct": 0, "output_tokens": 0,
                 "graded_cost": 0.0, "priced_correct": 0})
    for s in filtered:
        monday = date.fromisocalendar(*s.when.isocalendar()[:2], 1)
        row = out[(monday, s.template, s.strategy)]
        cost, _ = by_hand(s)
        row["requests"] += 1
        row["output_tokens"] += s.output_tokens or 0
        row["correct"] += bool(s.correct)
        if cost is not None:
            row["priced"] += 1
            row["cost"] += cost
            if s.correct is not None:  # graded: counts in what a correct answer cost
                row["graded_cost"] += cost
                row["priced_correct"] += s.correct
    return out


@pytest.mark.parametrize("traffic", ["production", "all"])
def test_cost_by_week_template_and_strategy_matches_the_data(
        store: tuple[Path, dict[str, str]], traffic: str) -> None:
    db, _ = store
    counted = [s for s in DATASET if traffic == "all" or s.experiment is None]
    expected = expected_rows(counted)
    conn = open_read_only(db)
    try:
        got = run_view(read_cursor(conn), "cost_by_week", Filters(traffic=traffic),
                       group_by=["template", "strategy"]).to_pylist()
    finally:
        conn.close()
    rows = {(r["week"], r["template"], r["strategy"]): r for r in got
            if r["template"] in ("t1", "t2")}
    # the grid is gap-free: t2 has a zero row in week 2
    assert set(rows) == set(expected) | {(date(2026, 11, 9), "t2", "score_order")}
    for key, want in expected.items():
        row = rows[key]
        assert (row["requests"], row["priced"], row["unpriced"], row["correct"],
                row["output_tokens"]) == (want["requests"], want["priced"],
                                          want["requests"] - want["priced"], want["correct"],
                                          want["output_tokens"]), key
        assert row["cost_usd"] == pytest.approx(want["cost"]), key
        if want["priced_correct"]:
            assert row["cost_per_correct"] == pytest.approx(
                want["graded_cost"] / want["priced_correct"]), key
        else:
            assert row["cost_per_correct"] is None, key
    empty = rows[(date(2026, 11, 9), "t2", "score_order")]
    assert (empty["requests"], empty["cost_usd"], empty["cost_per_correct"]) == (0, None, None)


@pytest.mark.parametrize("template", ["t1", "t2"])
def test_cost_summary_counts_reported_estimated_and_example_prices(
        store: tuple[Path, dict[str, str]], template: str) -> None:
    db, _ = store
    conn = open_read_only(db)
    try:
        (row,) = run_view(read_cursor(conn), "cost_summary",
                          Filters(template=template)).to_pylist()
    finally:
        conn.close()
    sent = [s for s in DATASET if s.template == template and s.experiment is None]
    costs = [by_hand(s) for s in sent]
    assert row["requests"] == len(sent)
    assert row["reported"] == sum(src == "reported" for _, src in costs)
    assert row["estimated"] == sum(src == "estimated" for _, src in costs)
    assert row["example_priced"] == sum(src == "estimated" and bool(PRICES[s.model].get("example"))
                                        for s, (_, src) in zip(sent, costs))
    assert row["cost_usd"] == pytest.approx(sum(c for c, _ in costs if c is not None))
    # what one correct answer cost: graded requests with a cost, over their correct answers
    graded_cost = sum(c for s, (c, _) in zip(sent, costs) if c is not None and s.correct is not None)
    priced_correct = sum(1 for s, (c, _) in zip(sent, costs) if c is not None and s.correct)
    if priced_correct:
        assert row["cost_per_correct"] == pytest.approx(graded_cost / priced_correct)
    else:  # t2: its correct answers have no cost
        assert row["cost_per_correct"] is None and row["correct"] > 0


def test_a_new_price_table_reprices_old_requests_on_the_next_open(
        store: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    db, traces = store
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    cheaper = tmp_path / "prices.json"
    cheaper.write_text(json.dumps({"model-a": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}))
    Store.open(copy, prices=cheaper).close()
    # DATASET[0]: 1000 prompt and 50 output tokens, now at $1 per million each
    assert request_row(copy, traces["sent0"], "request_costs.cost_usd")[0] == pytest.approx(1050 / 1e6)
    # model-b left the table: its request is no longer priced
    assert request_row(copy, traces["sent4"], "request_costs.cost_usd, cost_source") == (None, None)


def test_rebuild_derives_output_tokens_again(store: tuple[Path, dict[str, str]],
                                             tmp_path: Path) -> None:
    db, traces = store
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    with duckdb.connect(str(copy)) as conn:
        conn.execute("UPDATE requests SET output_tokens = NULL")
    done = subprocess.run([sys.executable, "-m", "midtrace", "rebuild", "--store", str(copy)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert request_row(copy, traces["genai"], "requests.output_tokens") == (44,)
    assert request_row(copy, traces["sent2"], "requests.output_tokens") == (100,)


def test_the_query_api_serves_the_cost_views_with_filters(store: tuple[Path, dict[str, str]],
                                                         tmp_path: Path) -> None:
    db, _ = store
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    proc = start_collector(copy, tmp_path / "collector.log", "--prices", str(prices))
    try:
        listed = httpx.get(proc.url + "/api/v1/views", timeout=10).json()["views"]
        assert {"cost_by_week", "cost_summary"} <= {v["name"] for v in listed}
        answer = httpx.get(proc.url + "/api/v1/views/cost_by_week", timeout=10, params={
            "group_by": "template,strategy", "template": "t1", "traffic": "all"})
        assert answer.status_code == 200, answer.text
        got = {(r["week"], r["strategy"]): r for r in answer.json()["rows"]}
    finally:
        proc.stop()
    want = expected_rows([s for s in DATASET if s.template == "t1"])
    assert set(got) == {(str(week), strategy) for week, _, strategy in want}
    for (week, _, strategy), row in want.items():
        served = got[(str(week), strategy)]
        assert served["requests"] == row["requests"]
        assert served["cost_usd"] == pytest.approx(row["cost"])
