"""A small DSPy RAG module: the one the DSPy zero-code test and sample trace.

``dspy.Retrieve`` (DSPy's retrieval module, which OpenInference traces as a RETRIEVER span)
over a keyword retrieval model on the policy corpus (sample_traces/policy_corpus.py); DSPy 3
ships no keyword retriever of its own, and any callable set as ``rm`` is one. The module keeps
the first ``IN_PROMPT`` passages, numbers them ``Document [n]`` into a ``context`` field and
asks ``dspy.Predict`` for the answer through DSPy's ChatAdapter and ``dspy.LM`` (LiteLLM) on
an OpenAI-compatible endpoint (in the tests, a local stand-in). Nothing in it knows about
midtrace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# LiteLLM would fetch its model price list at import; DSPy would cache answers on disk
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.dsp.utils import dotdict  # noqa: E402

from midtrace.sample_traces.policy_corpus import TEXT, keyword_scores  # noqa: E402

MODEL = "gpt-4.1-mini"
RETRIEVE_K = 6
IN_PROMPT = 4


def keyword_rm(query: str, k: int = RETRIEVE_K, **kwargs: Any) -> list[dotdict]:
    """A DSPy retrieval model: the ``k`` policies sharing most words with the query."""
    return [dotdict(long_text=TEXT[pid]) for pid, _ in keyword_scores(query)[:k]]


class PolicyRAG(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.retrieve = dspy.Retrieve(k=RETRIEVE_K)
        self.respond = dspy.Predict("context: str, question: str -> answer: str")

    def forward(self, question: str) -> dspy.Prediction:
        passages = self.retrieve(question).passages[:IN_PROMPT]
        context = "\n".join(f"Document [{i}] {p}" for i, p in enumerate(passages, start=1))
        return self.respond(context=context, question=question)


@contextmanager
def configured(llm_url: str) -> Iterator[PolicyRAG]:
    """The module, with DSPy set to the endpoint's model and the keyword retrieval model."""
    lm = dspy.LM(f"openai/{MODEL}", api_base=llm_url, api_key="sample-key", cache=False,
                 num_retries=0)
    with dspy.context(lm=lm, rm=keyword_rm):
        yield PolicyRAG()


def in_prompt(question: str) -> list[str]:
    """The ids the module puts in the prompt, in order."""
    return [pid for pid, _ in keyword_scores(question)[:IN_PROMPT]]
