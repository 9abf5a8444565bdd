"""sample_traces/llamaindex_rag.jsonl, haystack_rag.jsonl, dspy_rag.jsonl and
agents_rag.jsonl: recorded by their script from the real instrumented apps, read back with
positions, drops and citations."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from midtrace.sample_traces import (agents_rag_app, dspy_rag_app, haystack_rag_app,
                                    llamaindex_rag_app, record_frameworks)
from midtrace.sample_traces.policy_corpus import QUESTIONS, TEXT, keyword_scores
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import RagRequest
from tests.test_langchain_sample import requests_in

CITE = re.compile(r"\[(\d+)\]")


@pytest.fixture(scope="module")
def samples() -> dict[str, list[RagRequest]]:
    return {name: requests_in(record_frameworks.HERE / file)
            for name, file in record_frameworks.FILES.items()}


def placed(request: RagRequest) -> list[str]:
    return [p.chunk_id for p in request.record.placements]


def check_request(request: RagRequest, in_prompt: list[str], retrieved: set[str]) -> None:
    record = request.record
    assert (request.convention, request.service, request.warnings) == (
        "openinference", record_frameworks.SERVICE, ())
    assert placed(request) == in_prompt
    assert {c.id for c in record.chunks} == retrieved
    assert {c.id: c.stage for c in record.chunks} == {
        pid: "in_prompt" if pid in in_prompt else "dropped" for pid in retrieved}
    cited = [in_prompt[int(n) - 1] for n in CITE.findall(record.answer or "")]
    # an answer with no marker (the stand-in repeats a document it read) cites nothing
    assert record.cited_ids == (tuple(cited) if cited else None), record.answer
    assert record.prompt_tokens and record.prompt_chars
    # each placement covers its document's text in the prompt
    assert all(p.char_end - p.char_start == len(TEXT[p.chunk_id])  # type: ignore[operator]
               for p in record.placements)


def test_the_llamaindex_sample(samples: dict[str, list[RagRequest]]) -> None:
    requests = samples["llamaindex"]
    assert [r.record.question for r in requests] == [q.text for q in QUESTIONS]
    for request in requests:
        question = request.record.question or ""
        scores = keyword_scores(question)[:llamaindex_rag_app.TOP_K]
        check_request(request, llamaindex_rag_app.kept_in_prompt_order(question),
                      {pid for pid, _ in scores})
        assert request.record.model == llamaindex_rag_app.MODEL
        ranks = {c.id: c.retrieval_rank for c in request.record.chunks}
        assert ranks == {pid: i for i, (pid, _) in enumerate(scores, start=1)}
    # the similarity cutoff dropped chunks in most requests
    assert sum(any(c.stage == "dropped" for c in r.record.chunks) for r in requests) >= 3


def test_the_haystack_sample(samples: dict[str, list[RagRequest]]) -> None:
    requests = samples["haystack"]
    assert [r.record.question for r in requests] == [q.text for q in QUESTIONS]
    for request in requests:
        by_rank = sorted(request.record.chunks, key=lambda c: c.retrieval_rank or 0)
        assert [c.retrieval_rank for c in by_rank] == list(
            range(1, haystack_rag_app.RETRIEVE_K + 1))
        best = [c.id for c in by_rank[:haystack_rag_app.RANKER_K]]
        # LostInTheMiddleRanker: the best at both ends, the weakest in the middle
        check_request(request, best[0::2] + best[1::2][::-1], {c.id for c in by_rank})
        assert request.record.model == haystack_rag_app.MODEL


def test_the_dspy_sample(samples: dict[str, list[RagRequest]]) -> None:
    requests = samples["dspy"]
    assert [r.record.question for r in requests] == [q.text for q in QUESTIONS]
    for request in requests:
        question = request.record.question or ""
        retrieved = [pid for pid, _ in keyword_scores(question)[:dspy_rag_app.RETRIEVE_K]]
        # dspy.Retrieve records the passages' text only: chunk ids are content hashes
        by_policy = {content_hash(TEXT[pid]): pid for pid in retrieved}
        policy_request = replace(request, record=replace(
            request.record,
            chunks=tuple(replace(c, id=by_policy[c.id]) for c in request.record.chunks),
            placements=tuple(replace(p, chunk_id=by_policy[p.chunk_id])
                             for p in request.record.placements),
            cited_ids=None if request.record.cited_ids is None else tuple(
                by_policy[c] for c in request.record.cited_ids)))
        check_request(policy_request, dspy_rag_app.in_prompt(question), set(retrieved))
        assert request.record.model == dspy_rag_app.MODEL
        assert not (request.record.answer or "").startswith("[[ ##")
    assert sum(r.record.cited_ids is not None for r in requests) >= 4


def test_the_agents_sample(samples: dict[str, list[RagRequest]]) -> None:
    *asked, chat = samples["agents"]
    assert [r.record.question for r in asked] == [q.text for q in QUESTIONS]
    for request in asked:  # the documents of the search tool's JSON result, all in the prompt
        results = agents_rag_app.search(request.record.question or "")
        ids = [d["id"] for d in results]
        assert (request.convention, request.service, request.warnings) == (
            "openinference", record_frameworks.SERVICE, ())
        assert placed(request) == ids
        assert {c.stage for c in request.record.chunks} == {"in_prompt"}
        answer = request.record.answer or ""
        cited = sorted((i for i in ids if f"[{i}]" in answer), key=lambda i: answer.index(i))
        assert request.record.cited_ids == (tuple(cited) if cited else None), answer
        assert request.record.prompt_tokens and request.record.prompt_chars
        assert all(p.char_end - p.char_start == len(TEXT[p.chunk_id])  # type: ignore[operator]
                   for p in request.record.placements)
        assert {c.id: (c.retrieval_rank, c.retrieval_score, c.source_id)
                for c in request.record.chunks} == {
            d["id"]: (rank, d["score"], d["source"]) for rank, d in enumerate(results, start=1)}
        assert request.record.model == agents_rag_app.MODEL
    assert sum(r.record.cited_ids is not None for r in asked) >= 4
    # the chat: the last turn is the request; the first turn's results, trimmed to a
    # preview, are dropped but for those the second search returned again
    first, second = (agents_rag_app.search(q) for q in record_frameworks.AGENTS_CHAT)
    assert chat.record.question == record_frameworks.AGENTS_CHAT[-1]
    assert placed(chat) == [d["id"] for d in second]
    assert {c.id: c.stage for c in chat.record.chunks} == {
        **{d["id"]: "dropped" for d in first}, **{d["id"]: "in_prompt" for d in second}}
    assert "dropped" in {c.stage for c in chat.record.chunks}


def comparable(request: RagRequest) -> RagRequest:
    return replace(request, trace_id="", time=request.time.replace(year=2000, month=1, day=1,
                                                                   hour=0, minute=0, second=0,
                                                                   microsecond=0),
                   record=replace(request.record, latency_ms=None))


def test_the_script_records_the_same_requests_again(
        tmp_path: Path, samples: dict[str, list[RagRequest]]) -> None:
    assert record_frameworks.record_all(tmp_path) == {
        name: len(QUESTIONS) + (name == "agents") for name in record_frameworks.FILES}
    for name, file in record_frameworks.FILES.items():
        again = requests_in(tmp_path / file)
        assert [comparable(r) for r in again] == [comparable(r) for r in samples[name]], name
