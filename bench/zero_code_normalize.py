"""Time the zero-code normalizers on one trace of the LangChain app with 20 documents.

    uv run python bench/zero_code_normalize.py [CHARS_PER_DOCUMENT ...]

Each document is about CHARS_PER_DOCUMENT characters (default 500 and 2000); 16 of the 20
go into the prompt, reordered by LongContextReorder, and the answer cites one.
"""

from __future__ import annotations

import random
import sys
import timeit
from pathlib import Path

from langchain_core.documents import Document
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from midtrace.collector.normalize.pipeline import normalize_trace  # noqa: E402
from midtrace.collector.normalize.openinference import normalize_openinference  # noqa: E402
from midtrace.sample_traces.langchain_rag_app import KeywordRetriever, build_chain  # noqa: E402
from midtrace.collector.intake.otlp import SpanRecord, encode_sdk_spans, spans_of  # noqa: E402

WORDS = ("refund return policy days delivery item warranty shipping order customer store "
         "package exchange receipt original condition within business").split()


def trace(chars: int, n_docs: int = 20) -> list[SpanRecord]:
    rng = random.Random(chars)
    docs = [Document(page_content=f"Paragraph {i}: " + " ".join(
        rng.choice(WORDS) for _ in range(chars // 7)), metadata={"title": f"Doc {i}"})
        for i in range(n_docs)]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        build_chain("As Document [3] says, 14 days [3].", top_k=16, reorder=True,
                    prompt_tokens=chars * 16 // 4,
                    retriever=KeywordRetriever(documents=docs, k=n_docs)).invoke("refund days")
    finally:
        instrumentor.uninstrument()
    return [s for s, _ in spans_of(encode_sdk_spans(exporter.get_finished_spans())) if s]


def main() -> None:
    for chars in [int(a) for a in sys.argv[1:]] or [500, 2000]:
        spans = trace(chars)
        request = normalize_openinference(spans)
        assert request is not None and len(request.record.placements) == 16
        prompt_chars = request.record.prompt_chars
        for name, fn in (("normalize_openinference", normalize_openinference),
                         ("normalize_trace", normalize_trace)):
            runs, total = timeit.Timer(lambda: fn(spans)).autorange()
            best = min(timeit.repeat(lambda: fn(spans), number=runs, repeat=5)) / runs
            print(f"{len(spans)} spans, 20 documents of ~{chars} chars, prompt {prompt_chars} "
                  f"chars: {name} {best * 1e3:.2f} ms per trace")


if __name__ == "__main__":
    main()
