"""Record sample_traces/langchain_rag.jsonl: the LangChain app traced by OpenInference only.

Twenty questions go through the app in sample_traces/langchain_rag_app.py, instrumented by
openinference-instrumentation-langchain and exported by the OTel SDK (a BatchSpanProcessor
flushed after each request, so each line of the file is one request's trace) with
midtrace's OTLP/JSON file exporter. The app knows nothing of midtrace: positions, drops and
citations in this sample are all inferred by the collector.

Everything is fixed (documents, questions, answers, the fake model); trace ids and times
differ from run to run.

    .venv/bin/python -m midtrace.sample_traces.record_langchain [OUT.jsonl]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


from midtrace.sample_traces.langchain_rag_app import (
    KeywordRetriever,
    build_chain,
    prompt_messages,
    select,
)
from midtrace.collector.intake.file_exporter import OtlpJsonFileExporter

OUT = Path(__file__).resolve().parent / "langchain_rag.jsonl"
SERVICE = "policy-bot"


@dataclass(frozen=True)
class Case:
    question: str
    evidence: str            # title of the policy that answers it
    claim: str               # what the fake model answers, before its citation
    top_k: int | None = None
    reorder: bool = False
    cites: str | None = None  # title the answer cites, when not the evidence

    @property
    def cited_title(self) -> str:
        return self.cites or self.evidence


CASES: tuple[Case, ...] = (
    Case("How many days do I have to return an item?", "Returns",
         "You can return unused items within 14 days of delivery"),
    Case("How many days do I have to return an item?", "Returns",
         "You can return items within 30 days", top_k=4, cites="Returns (2019, deprecated)"),
    Case("When will my refund arrive?", "Refund timing",
         "Refunds arrive within 5 business days of us receiving the item", reorder=True),
    Case("Can I exchange shoes for a different size?", "Exchanges",
         "Exchanges are free within 14 days of delivery", top_k=3),
    Case("How long does standard shipping take?", "Shipping",
         "Standard shipping takes 3 to 5 business days", reorder=True),
    Case("How much does express shipping cost?", "Shipping costs",
         "Express shipping costs 12 euros", top_k=2),
    Case("My package arrived damaged, what do I do?", "Damaged items",
         "Report it within 48 hours with a photo", reorder=True),
    Case("Is accidental damage covered by the warranty on electronics?", "Warranty",
         "No, the two-year warranty covers manufacturing defects only"),
    Case("Do gift cards expire?", "Gift cards",
         "Gift cards are valid for three years", top_k=4, reorder=True),
    Case("Can I return an item marked final sale?", "Final sale",
         "Final sale items cannot be returned unless they arrive damaged"),
    Case("Who pays return shipping for international orders?", "International returns",
         "International customers pay return shipping", top_k=3),
    Case("Do you match competitor prices?", "Price matching",
         "We match prices within 7 days of purchase", reorder=True),
    Case("Is standard shipping free?", "Shipping costs",
         "Standard shipping is free over 50 euros", top_k=5, reorder=True),
    Case("How fast is express shipping if I order in the morning?", "Shipping",
         "Express shipping takes 1 business day before noon"),
    Case("Can I get cash for my gift card?", "Gift cards",
         "Gift cards cannot be exchanged for cash", top_k=1),
    Case("How long is the warranty on a laptop?", "Warranty",
         "Electronics carry a two-year warranty", top_k=4),
    Case("What is the refund policy for unused items?", "Returns",
         "Unused items can be returned for a full refund within 14 days", reorder=True),
    Case("Can I exchange a damaged final sale item?", "Final sale",
         "Damaged final sale items are the exception", top_k=2, reorder=True),
    Case("Where does my refund go?", "Refund timing",
         "Refunds go to the original payment method", top_k=3),
    Case("What if the wrong item arrives from abroad?", "International returns",
         "We pay return shipping when the item arrived wrong", reorder=True),
)


def answer_for(case: Case) -> tuple[str, int]:
    """The fake model's answer, citing where the cited policy sits in the prompt (else [1]),
    and the prompt tokens a provider would report (about 3.7 characters a token)."""
    docs = select(KeywordRetriever(k=6).invoke(case.question), case.top_k, case.reorder)
    titles = [d.metadata["title"] for d in docs]
    slot = titles.index(case.cited_title) + 1 if case.cited_title in titles else 1
    prompt = "\n\n".join(str(m.content) for m in prompt_messages(docs, case.question))
    return f"{case.claim} [{slot}].", round(len(prompt) / 3.7)


def record(path: Path = OUT) -> int:
    """Run every case through the traced app into ``path``; returns the number of requests."""
    answers = [answer_for(case) for case in CASES]  # before tracing: adds no spans
    exporter = OtlpJsonFileExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for case, (answer, tokens) in zip(CASES, answers):
            chain = build_chain(answer, top_k=case.top_k, reorder=case.reorder,
                                prompt_tokens=tokens)
            chain.invoke(case.question)
            provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    shift_times(path)
    return len(CASES)


# The recording runs now; its traces are moved into the other samples' last week (keeping
# their relative timing) so the demo's newest week is one with graded support traffic.
ANCHOR = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def shift_times(path: Path, anchor: datetime = ANCHOR) -> None:
    """Move every span (and span event) of the file so the earliest span starts at ``anchor``."""
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    spans = [span for doc in docs for rs in doc.get("resourceSpans", [])
             for ss in rs.get("scopeSpans", []) for span in ss.get("spans", [])]
    if not spans:
        return
    delta = int(anchor.timestamp() * 1e9) - min(int(s["startTimeUnixNano"]) for s in spans)
    for span in spans:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + delta)
        for event in span.get("events", []):
            event["timeUnixNano"] = str(int(event["timeUnixNano"]) + delta)
    path.write_text("".join(json.dumps(d, separators=(",", ":"), ensure_ascii=False) + "\n"
                            for d in docs), encoding="utf-8")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    n = record(out)
    print(f"wrote {n} requests to {out}")


if __name__ == "__main__":
    main()
