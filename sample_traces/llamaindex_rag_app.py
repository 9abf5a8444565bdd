"""A small LlamaIndex RAG app: the one the LlamaIndex zero-code test and sample trace.

A keyword retriever over the policy corpus (sample_traces/policy_corpus.py), then two of
LlamaIndex's own node postprocessors, ``SimilarityPostprocessor`` (drops the nodes scored
under a cutoff) and ``LongContextReorder`` (puts the best nodes at both ends), then
LlamaIndex's ``CitationQueryEngine``, which numbers the nodes ``Source 1:``, ``Source 2:``
... in a completion prompt. The LLM is completion-style (``is_chat_model`` false): its
prompt is one string, which OpenInference records as ``llm.prompts`` on the completion
span and as template variables on the predict span around it. It calls an
OpenAI-compatible completions endpoint (in the tests, a local stand-in). Nothing in it
knows about midtrace.
"""

from __future__ import annotations

from typing import Any

import openai
from llama_index.core import PromptTemplate
from llama_index.core.base.llms.types import CompletionResponseGen
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor import LongContextReorder, SimilarityPostprocessor
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from midtrace.sample_traces.policy_corpus import POLICIES, keyword_scores

MODEL = "gpt-3.5-turbo-instruct"
TOP_K = 6
SIMILARITY_CUTOFF = 0.25
QA_TEMPLATE = PromptTemplate(
    "Answer the query from the numbered sources below only, and cite the sources you use "
    "as [n].\n------\n{context_str}\n------\nQuery: {query_str}\nAnswer: ")

NODES = {pid: TextNode(id_=pid, text=text, metadata={"source": source})
         for pid, source, text in POLICIES}


class KeywordRetriever(BaseRetriever):
    """The ``k`` policies sharing most words with the query, scored 0 to 1."""

    def __init__(self, k: int = TOP_K) -> None:
        super().__init__()
        self.k = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=NODES[pid], score=score)
                for pid, score in keyword_scores(query_bundle.query_str)[: self.k]]


def _complete(base_url: str, model: str, prompt: str) -> CompletionResponse:
    client = openai.OpenAI(base_url=base_url, api_key="sample-key", max_retries=0)
    try:
        done = client.completions.create(model=model, prompt=prompt)
    finally:
        client.close()
    return CompletionResponse(text=done.choices[0].text, raw=done.model_dump())


class CompletionLLM(CustomLLM):
    """A completion model behind an OpenAI-compatible ``/completions`` endpoint."""

    base_url: str
    model: str = MODEL

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return _complete(self.base_url, self.model, prompt)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False,
                        **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted, **kwargs)


def build_engine(llm_url: str) -> CitationQueryEngine:
    return CitationQueryEngine.from_args(
        None,  # type: ignore[arg-type]  # no index: the retriever is given
        retriever=KeywordRetriever(),
        llm=CompletionLLM(base_url=llm_url),
        citation_qa_template=QA_TEMPLATE,
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=SIMILARITY_CUTOFF),
                             LongContextReorder()],
    )


def kept_in_prompt_order(question: str) -> list[str]:
    """The ids the app puts in the prompt, in order, computed without LlamaIndex: the nodes
    at or over the cutoff, reordered as LongContextReorder does (sorted by score
    ascending, then each in turn to the front or the back)."""
    kept = [(pid, s) for pid, s in keyword_scores(question)[:TOP_K] if s >= SIMILARITY_CUTOFF]
    out: list[str] = []
    for i, (pid, _) in enumerate(sorted(kept, key=lambda item: item[1])):
        if i % 2 == 0:
            out.insert(0, pid)
        else:
            out.append(pid)
    return out
