"""Known traces for the dashboard's tests, sent through the real collector.

Four ISO weeks of a support bot (two models, two packing strategies) whose answers go wrong
more often when the decisive chunk sits in the middle of the prompt; one incident trace with
hostile chunk text; one ungraded trace for the grading test; a small placement sweep by slot
and a rank sweep that packs its chunks as the strategies do.
Every number the tests check follows from the tables below, nothing is random.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from midtrace.schemas import packing
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from tests.sender import Sender

FIRST_WEEK = datetime(2026, 10, 12, 9, 0, tzinfo=UTC)  # a Monday, weeks before "today"
WEEKS = 4
K = 5
CHUNK_TOKENS = 400
PREAMBLE = 300
XSS_TEXT = "<img src=x onerror=alert(1)>"
MARKDOWN_TEXT = "**bold** [link](http://x)"
REQUIRED = ("opened items", "14 days")
INCIDENT_QUESTION = "How many days does a customer have to return an opened item?"
UNGRADED_QUESTION = "Can I cancel an annual plan after the first month?"
# Cost: model-a's weekly answers report output tokens and are priced by PRICES (the tests
# that check cost give the collector this table); model-b's report their own cost.
OUTPUT_TOKENS = 60
REPORTED_COST = 0.003
PRICES = {"model-a": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}


def _ns(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000_000)


def layout(n: int, decisive_slot: int | None, prefix: str,
           labels: dict[int, str] | None = None) -> tuple[tuple[Chunk, ...], tuple[Placement, ...], int]:
    """n chunks in prompt order; the chunk at ``decisive_slot`` (1-based) is the answer."""
    chunks, placements = [], []
    for slot in range(1, n + 1):
        cid = f"{prefix}-c{slot}"
        label = (labels or {}).get(slot) or ("direct_answer" if slot == decisive_slot
                                             else "supporting_background")
        chunks.append(Chunk(id=cid, source_id=f"doc-{slot}", retrieval_rank=slot,
                            retrieval_score=round(0.9 - 0.05 * slot, 3), rerank_rank=slot,
                            rerank_score=round(0.95 - 0.06 * slot, 3), label=label,
                            authority="canonical", text=f"Chunk {slot} of {prefix}."))
        start = PREAMBLE + (slot - 1) * CHUNK_TOKENS
        placements.append(Placement(cid, slot - 1, start, start + CHUNK_TOKENS - 20))
    return tuple(chunks), tuple(placements), PREAMBLE + n * CHUNK_TOKENS + 200


@dataclass
class Fixture:
    """What was sent: the trace ids the tests look up."""

    incident: str = ""
    ungraded: str = ""
    traces: list[str] = field(default_factory=list)


def weekly_records() -> list[tuple[datetime, RagRecord]]:
    """Per week, per model: 5 graded requests, one per decisive slot; slots 2-4 are middle.

    model-a answers wrong whenever the decisive chunk is in slots 3; model-b in slots 2-4 in
    the last two weeks (a regression the review should see).
    """
    out = []
    for week in range(WEEKS):
        for m, model in enumerate(("model-a", "model-b")):
            for slot in range(1, K + 1):
                wrong = slot == 3 or (model == "model-b" and week >= 2 and slot in (2, 4))
                prefix = f"w{week}-{model}-s{slot}"
                chunks, placements, tokens = layout(K, slot, prefix)
                when = FIRST_WEEK + timedelta(weeks=week, hours=slot + 6 * m)
                out.append((when, RagRecord(
                    question=f"Week {week} question {slot} for {model}",
                    answer="Refunds within 14 days." if not wrong else "Refunds within 30 days.",
                    model=model, template_id="support-v2", strategy=("score_order", "edge")[m],
                    prompt_tokens=tokens, output_tokens=OUTPUT_TOKENS,
                    cost_usd=REPORTED_COST if model == "model-b" else None,
                    chunks=chunks, placements=placements,
                    cited_ids=(f"{prefix}-c{slot}",) if not wrong else (f"{prefix}-c1",),
                    outcome=Outcome(correct=not wrong, decisive_chunk_ids=(f"{prefix}-c{slot}",),
                                    required_constraints=REQUIRED,
                                    recalled_constraints=REQUIRED if not wrong else REQUIRED[:1]))))
    return out


def incident_record() -> RagRecord:
    """The incident: the 14-day policy buried mid-prompt, a deprecated 30-day note cited."""
    chunks = (
        Chunk(id="faq-returns#1", source_id="faq/returns", retrieval_rank=2, retrieval_score=0.81,
              rerank_rank=1, rerank_score=0.92, label="conflicting", authority="deprecated",
              cited=True, text="Returns are accepted within 30 days (2019 policy)."),
        Chunk(id="xss-chunk", source_id="forum/thread-9", retrieval_rank=4, retrieval_score=0.52,
              rerank_rank=4, rerank_score=0.4, label="irrelevant", authority="community",
              text=XSS_TEXT),
        Chunk(id="policy-2026#3", source_id="policy/returns-2026", retrieval_rank=1,
              retrieval_score=0.88, rerank_rank=2, rerank_score=0.9, label="direct_answer",
              authority="canonical", decisive=True,
              text="Opened items may be returned within 14 days of delivery."),
        Chunk(id="md-chunk", source_id="wiki/markdown", retrieval_rank=5, retrieval_score=0.44,
              rerank_rank=5, rerank_score=0.31, label="supporting_background",
              authority="canonical", text=MARKDOWN_TEXT),
        Chunk(id="policy-2026#4", source_id="policy/returns-2026", retrieval_rank=3,
              retrieval_score=0.7, rerank_rank=3, rerank_score=0.6, label="exception_constraint",
              authority="canonical", text="Except electronics: 7 days, unopened only."),
        Chunk(id="blog-old#2", stage="dropped", drop_reason="budget", source_id="blog/2018",
              retrieval_rank=6, retrieval_score=0.41, label="supporting_background",
              authority="deprecated", text="Our generous returns window."),
    )
    order = ["faq-returns#1", "xss-chunk", "policy-2026#3", "md-chunk", "policy-2026#4"]
    placements = tuple(Placement(cid, i, 200 + i * 500, 200 + i * 500 + 450)
                       for i, cid in enumerate(order))
    return RagRecord(
        question=INCIDENT_QUESTION, answer="You have 30 days to return it [faq-returns#1].",
        model="model-a", template_id="support-v2", strategy="score_order", prompt_tokens=2900,
        cited_ids=("faq-returns#1",), chunks=chunks, placements=placements, confidence=0.95,
        outcome=Outcome(correct=False, decisive_chunk_ids=("policy-2026#3",)))


def ungraded_record() -> RagRecord:
    chunks, placements, tokens = layout(K, None, "ungraded",
                                        labels={s: "supporting_background" for s in range(1, 6)})
    return RagRecord(question=UNGRADED_QUESTION, answer="Yes, any time.", model="model-a",
                     template_id="support-v2", strategy="score_order", prompt_tokens=tokens,
                     chunks=chunks, placements=placements, cited_ids=("ungraded-c1",))


def sweep_records() -> list[tuple[datetime, RagRecord]]:
    """exp-1: 3 cases × (first, middle, last, absent) × 2 strategies."""
    out = []
    when = FIRST_WEEK + timedelta(weeks=WEEKS - 1, days=2)
    slots = {"first": 1, "middle": 3, "last": 5, "absent": None}
    for strategy in ("score_order", "edge"):
        for case in range(3):
            for condition, slot in slots.items():
                prefix = f"exp-{strategy}-{case}-{condition}"
                chunks, placements, tokens = layout(K, slot, prefix)
                if slot is None:
                    chunks, placements = chunks, placements
                wrong = condition == "absent" or (condition == "middle" and strategy == "score_order")
                decisive = (f"{prefix}-c{slot}",) if slot else (f"{prefix}-gold",)
                out.append((when, RagRecord(
                    question=f"Sweep case {case}", answer="14 days" if not wrong else "30 days",
                    model="model-a", template_id="support-v2", strategy=strategy,
                    experiment_id="exp-1", condition=condition, case_id=f"case-{case}",
                    prompt_tokens=tokens, chunks=chunks, placements=placements,
                    outcome=Outcome(correct=not wrong, decisive_chunk_ids=decisive))))
    return out


RANK_CASES = 6
RANK_SWEEP_DAY = FIRST_WEEK + timedelta(weeks=WEEKS - 1, days=1)  # a day without other traffic


def rank_sweep_records() -> list[tuple[datetime, RagRecord]]:
    """exp-ranks: 6 cases × rank_1..rank_5 × (score_order, edge), the decisive chunk at that
    retrieval rank, the prompt packed by the strategy (edge puts ranks 1,3,5,4,2 in slots
    1-5). An answer is wrong when the decisive chunk was ranked 2 or 3 and sits in slot 2 or
    3: score_order loses ranks 2 and 3 (18/30), edge only rank 3 (24/30). Paired by case,
    edge alone is right in 6 pairs and score_order alone in none: McNemar z = 6 / sqrt 6,
    p = 0.014, so edge is better than the production baseline score_order."""
    out = []
    for strategy in ("score_order", "edge"):
        for case in range(RANK_CASES):
            for rank in range(1, K + 1):
                prefix = f"rk-{strategy}-{case}-{rank}"
                ranked = [f"{prefix}-r{r}" for r in range(1, K + 1)]
                order = packing.get(strategy)(ranked)
                chunks, placements = [], []
                for slot, cid in enumerate(order, start=1):
                    r = ranked.index(cid) + 1
                    chunks.append(Chunk(id=cid, source_id=f"doc-{r}", retrieval_rank=r,
                                        retrieval_score=round(0.9 - 0.05 * r, 3),
                                        label="direct_answer" if r == rank else "irrelevant",
                                        text=f"Rank {r} chunk of {prefix}."))
                    start = PREAMBLE + (slot - 1) * CHUNK_TOKENS
                    placements.append(Placement(cid, slot - 1, start, start + CHUNK_TOKENS - 20))
                slot = order.index(ranked[rank - 1]) + 1
                wrong = rank in (2, 3) and slot in (2, 3)
                out.append((RANK_SWEEP_DAY + timedelta(minutes=case), RagRecord(
                    question=f"Rank sweep case {case}", answer="30 days" if wrong else "14 days",
                    model="model-a", template_id="support-v2", strategy=strategy,
                    experiment_id="exp-ranks", condition=f"rank_{rank}", case_id=f"rk-{case}",
                    prompt_tokens=PREAMBLE + K * CHUNK_TOKENS + 200, chunks=tuple(chunks),
                    placements=tuple(placements),
                    outcome=Outcome(correct=not wrong, decisive_chunk_ids=(ranked[rank - 1],)))))
    return out


class BatchSender(Sender):
    """The same real SDK and OTLP exporter, exporting in batches (one commit per batch)."""

    def __post_init__(self) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": self.service}))
        self.exporter = OTLPSpanExporter(endpoint=self.url + "/v1/traces", timeout=10)
        self.provider.add_span_processor(BatchSpanProcessor(
            self.exporter, max_export_batch_size=512, schedule_delay_millis=100))
        self.tracer = self.provider.get_tracer("midtrace.tests")

    def close(self) -> None:
        self.provider.force_flush()
        super().close()


def send_all(url: str) -> Fixture:
    """Send every fixture trace to the collector at ``url``; returns their trace ids."""
    sender = BatchSender(url)
    fx = Fixture()
    try:
        for when, record in weekly_records() + sweep_records() + rank_sweep_records():
            fx.traces.append(sender.send(record, start_ns=_ns(when)))
        last = FIRST_WEEK + timedelta(weeks=WEEKS - 1, days=3)
        fx.incident = sender.send(incident_record(), start_ns=_ns(last))
        fx.ungraded = sender.send(ungraded_record(), start_ns=_ns(last + timedelta(hours=1)))
    finally:
        sender.close()
    return fx
