"""A small OpenAI Agents SDK app that retrieves through a tool: the one the Agents SDK
zero-code test and sample trace.

An ``Agent`` with one function tool, ``search_policies``, which returns the best
``SEARCH_K`` policies of the corpus (sample_traces/policy_corpus.py) for a query as a JSON
string: ``{"query": ..., "results": [{"id", "source", "score", "text"}, ...]}``. The model
(``OpenAIChatCompletionsModel`` on an OpenAI-compatible endpoint; in the tests, a local
stand-in) calls the tool, then answers from its result, citing documents by id. A chat of
several turns runs with the SDK's ``ToolOutputTrimmer``, which cuts older turns' tool results
to a short preview. Nothing in it knows about midtrace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, trace
from agents.extensions import ToolOutputTrimmer
from openai import AsyncOpenAI

from midtrace.sample_traces.policy_corpus import POLICIES, words

MODEL = "gpt-4.1-mini"
SEARCH_K = 4
TOOL = "search_policies"
INSTRUCTIONS = ("You are a support assistant. Look the question up with search_policies, "
                "answer only from the documents it returns, and cite each document you use "
                "by its id in square brackets.")
# a chat's older turns keep this much of each tool result (ToolOutputTrimmer)
PREVIEW_CHARS = 160

Policy = tuple[str, str, str]  # (id, source, text)


def search(query: str, policies: Sequence[Policy] = POLICIES,
           k: int = SEARCH_K) -> list[dict[str, Any]]:
    """The ``k`` policies sharing most words with the query, best first (ties: corpus
    order), each with the share of the query's words it holds as its score."""
    q = words(query)
    scored = [(round(len(q & words(text)) / max(len(q), 1), 4), -i, pid, source, text)
              for i, (pid, source, text) in enumerate(policies)]
    best = sorted((s for s in scored if s[0] > 0), reverse=True)[:k]
    return [{"id": pid, "source": source, "score": score, "text": text}
            for score, _, pid, source, text in best]


def build_agent(llm_url: str, policies: Sequence[Policy] = POLICIES,
                bare: bool = False) -> Agent:
    """The agent; with ``bare``, its tool returns the bare list of results."""
    @function_tool(name_override=TOOL)
    def search_policies(query: str) -> str:
        """Search the store's policy documents.

        Args:
            query: what to look for.
        """
        results = search(query, policies)
        return json.dumps(results if bare else {"query": query, "results": results})

    client = AsyncOpenAI(base_url=llm_url, api_key="sample-key", max_retries=0)
    return Agent(name="Policy assistant", instructions=INSTRUCTIONS, tools=[search_policies],
                 model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))


def ask(agent: Agent, question: str) -> str:
    """Run one question; the agent's answer."""
    return str(Runner.run_sync(agent, question).final_output)


def chat(agent: Agent, questions: Sequence[str]) -> list[str]:
    """Several questions in one conversation (one trace); older turns' tool results are cut
    to a preview of ``PREVIEW_CHARS`` characters. The answers, in order."""
    config = RunConfig(call_model_input_filter=ToolOutputTrimmer(
        recent_turns=1, max_output_chars=PREVIEW_CHARS, preview_chars=PREVIEW_CHARS))
    answers: list[str] = []
    history: list[Any] = []
    with trace("Policy chat"):
        for question in questions:
            result = Runner.run_sync(agent, [*history, {"role": "user", "content": question}],
                                     run_config=config)
            answers.append(str(result.final_output))
            history = result.to_input_list()
    return answers
