"""A small Haystack RAG pipeline: the one the Haystack zero-code test and sample trace.

``InMemoryBM25Retriever`` over the policy corpus (sample_traces/policy_corpus.py) ->
``LostInTheMiddleRanker`` (keeps the best ``top_k`` and puts the best at both ends) ->
``ChatPromptBuilder`` (a system message, then the documents as ``Document [n] ...`` and
the question) -> ``OpenAIChatGenerator`` on an OpenAI-compatible endpoint (in the tests,
a local stand-in). All Haystack's own components; nothing in it knows about midtrace.
"""

from __future__ import annotations

import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.builders import ChatPromptBuilder  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack.utils import Secret  # noqa: E402

from midtrace.sample_traces.policy_corpus import POLICIES  # noqa: E402

MODEL = "gpt-4.1-mini"
RETRIEVE_K = 6
RANKER_K = 4
SYSTEM = "You are a support assistant. Answer only from the documents and cite them as [n]."
USER = ("{% for d in documents %}Document [{{ loop.index }}] {{ d.content }}\n{% endfor %}\n"
        "Question: {{ question }}")


def store() -> InMemoryDocumentStore:
    docs = InMemoryDocumentStore()
    docs.write_documents([Document(id=pid, content=text, meta={"source": source})
                          for pid, source, text in POLICIES])
    return docs


def build_pipeline(llm_url: str, ranker_k: int = RANKER_K) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store(), top_k=RETRIEVE_K))
    pipeline.add_component("ranker", LostInTheMiddleRanker(top_k=ranker_k))
    pipeline.add_component("prompt", ChatPromptBuilder(
        template=[ChatMessage.from_system(SYSTEM), ChatMessage.from_user(USER)],
        required_variables=["documents", "question"]))
    pipeline.add_component("llm", OpenAIChatGenerator(
        api_key=Secret.from_token("sample-key"), model=MODEL, api_base_url=llm_url,
        max_retries=0))
    pipeline.connect("retriever.documents", "ranker.documents")
    pipeline.connect("ranker.documents", "prompt.documents")
    pipeline.connect("prompt.prompt", "llm.messages")
    return pipeline


def ask(pipeline: Pipeline, question: str) -> str:
    """Run one question; the model's answer."""
    out = pipeline.run({"retriever": {"query": question}, "prompt": {"question": question}},
                       include_outputs_from={"retriever", "ranker"})
    return str(out["llm"]["replies"][0].text)
