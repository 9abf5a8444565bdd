"""Helpers for the zero-code tests: run the LangChain app under OpenInference tracing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from langchain_core.documents import Document
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from midtrace.sample_traces.langchain_rag_app import prompt_messages
from midtrace.collector.intake.otlp import SpanRecord, encode_sdk_spans, spans_of


def provider_with(exporter: SpanExporter, service: str = "policy-bot") -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@contextmanager
def instrumented(provider: TracerProvider) -> Iterator[None]:
    """LangChain traced by OpenInference into ``provider``; uninstrumented afterwards."""
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


@contextmanager
def traced_langchain() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = provider_with(exporter)
    with instrumented(provider):
        yield exporter
    provider.shutdown()


def records(sdk_spans: Sequence[ReadableSpan]) -> list[SpanRecord]:
    """The spans of one trace as the collector sees them: encoded by the SDK's OTLP
    encoder, then read back."""
    out = []
    for span, error in spans_of(encode_sdk_spans(sdk_spans)):
        assert span is not None, error
        out.append(span)
    assert len({s.trace_id for s in out}) <= 1, "spans of more than one trace"
    return out


def prompt_string(documents: Sequence[Document], question: str) -> str:
    """The final prompt as midtrace reads it: each message's text, a blank line between."""
    return "\n\n".join(str(m.content) for m in prompt_messages(documents, question))


def where(prompt: str, documents: Sequence[Document]) -> list[tuple[int, int]]:
    """Where each document's text really is in ``prompt``."""
    out = []
    for d in documents:
        start = prompt.index(d.page_content)
        out.append((start, start + len(d.page_content)))
    return out
