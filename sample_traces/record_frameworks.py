"""Record sample_traces/llamaindex_rag.jsonl, haystack_rag.jsonl, dspy_rag.jsonl and
agents_rag.jsonl: the LlamaIndex, Haystack, DSPy and OpenAI Agents SDK sample apps traced by
their stock OpenInference instrumentations only.

Every question of sample_traces/policy_corpus.py goes through each app (the Agents SDK app
then answers two of them in one chat, older tool results trimmed: one more request),
instrumented by openinference-instrumentation-llama-index, -haystack, -dspy or
-openai-agents, with
the OTel SDK (a BatchSpanProcessor flushed after each request, so each line of a file is
one request's trace) and midtrace's OTLP/JSON file exporter. The model is the local
stand-in LLM endpoint of the tests (tests/fake_llm.py), so run this from the repository
root. The apps know nothing of midtrace: positions, drops and citations in these samples
are all inferred by the collector.

Everything is fixed (documents, questions, the stand-in's answers); trace ids and times
differ from run to run.

    .venv/bin/python -m midtrace.sample_traces.record_frameworks [OUT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from midtrace.collector.intake.file_exporter import OtlpJsonFileExporter
from midtrace.sample_traces.policy_corpus import QUESTIONS
from midtrace.sample_traces.record_langchain import ANCHOR, shift_times

HERE = Path(__file__).resolve().parent
SERVICE = "policy-bot"
FILES = {"llamaindex": "llamaindex_rag.jsonl", "haystack": "haystack_rag.jsonl",
         "dspy": "dspy_rag.jsonl", "agents": "agents_rag.jsonl"}
# after the LangChain sample's hour, in the other samples' last week
ANCHORS = {"llamaindex": ANCHOR + timedelta(hours=1), "haystack": ANCHOR + timedelta(hours=2),
           "dspy": ANCHOR + timedelta(hours=3), "agents": ANCHOR + timedelta(hours=4)}


Runs = list[Callable[[], object]]  # one per request (one trace each)


def _asking(ask: Callable[[str], object]) -> Runs:
    return [partial(ask, question.text) for question in QUESTIONS]


def _llamaindex(llm_url: str) -> tuple[Any, Runs]:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    from midtrace.sample_traces.llamaindex_rag_app import build_engine
    engine = build_engine(llm_url)
    return LlamaIndexInstrumentor(), _asking(engine.query)


def _haystack(llm_url: str) -> tuple[Any, Runs]:
    from openinference.instrumentation.haystack import HaystackInstrumentor

    from midtrace.sample_traces.haystack_rag_app import ask, build_pipeline
    pipeline = build_pipeline(llm_url)
    return HaystackInstrumentor(), _asking(lambda question: ask(pipeline, question))


def _dspy(llm_url: str) -> tuple[Any, Runs]:
    from openinference.instrumentation.dspy import DSPyInstrumentor

    from midtrace.sample_traces.dspy_rag_app import configured

    def run(question: str) -> object:
        with configured(llm_url) as rag:
            return rag(question=question)
    return DSPyInstrumentor(), _asking(run)


# The Agents SDK sample ends with a chat of two turns, its older tool results trimmed
AGENTS_CHAT = (QUESTIONS[0].text, QUESTIONS[2].text)


def _agents(llm_url: str) -> tuple[Any, Runs]:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    from midtrace.sample_traces.agents_rag_app import ask, build_agent, chat
    agent = build_agent(llm_url)
    return OpenAIAgentsInstrumentor(), [*_asking(lambda question: ask(agent, question)),
                                        partial(chat, agent, AGENTS_CHAT)]


APPS = {"llamaindex": _llamaindex, "haystack": _haystack, "dspy": _dspy, "agents": _agents}


def record(framework: str, path: Path, llm_url: str) -> int:
    """Run every question through one app into ``path``; returns the number of requests."""
    path.unlink(missing_ok=True)
    instrumentor, runs = APPS[framework](llm_url)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(OtlpJsonFileExporter(path)))
    instrumentor.instrument(tracer_provider=provider)
    try:
        for run in runs:
            run()
            provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    shift_times(path, ANCHORS[framework])
    return len(runs)


def record_all(out: Path = HERE) -> dict[str, int]:
    from tests.fake_llm import FakeLLM  # the stand-in endpoint: run from the repository root

    llm = FakeLLM(usage_ratio=0.27)
    try:
        return {name: record(name, out / file, llm.url) for name, file in FILES.items()}
    finally:
        llm.close()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for name, n in record_all(out).items():
        print(f"wrote {n} {name} requests to {out / FILES[name]}")


if __name__ == "__main__":
    main()
