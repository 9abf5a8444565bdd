"""The Vercel AI SDK sample sent to a real collector process as a Node app's OTLP/HTTP JSON
exporter sends it, one request's trace per POST: the stored requests have the prompt order,
slots, dropped chunks and citations the app really built (sample_traces/vercel_ai/
expected.json, written by the recorder from what the app did).

Graded afterwards with the policy that answers each question as its decisive chunk, the
requests fall into the failure classes the app's choices make: a policy the budget cut is
`dropped`, one never retrieved `missing`.
"""

from __future__ import annotations

from typing import Any

import httpx

from midtrace.client import open_client
from tests.procs import Proc
from tests.test_vercel_ai_sample import EXPECTED, FIXTURE


def check(trace: dict[str, Any], app: dict[str, Any]) -> None:
    request = trace["request"]
    assert (request["convention"], request["service"], request["model"]) == (
        "vercel_ai", EXPECTED["service"], app["model"])
    assert (request["question"], request["answer"]) == (app["question"], app["answer"])
    assert request["prompt_tokens"] == app["prompt_tokens"]
    assert request["warnings"] in (None, [])
    placements = sorted(trace["placements"], key=lambda p: p["prompt_index"])
    assert [p["chunk_id"] for p in placements] == app["in_prompt"]
    assert [p["slot"] for p in placements] == list(range(1, len(app["in_prompt"]) + 1))
    assert {p["k"] for p in placements} <= {len(app["in_prompt"])}
    chunks = {c["chunk_id"]: c for c in trace["chunks"]}
    assert sorted(chunks, key=lambda cid: chunks[cid]["retrieval_rank"]) == app["retrieved"]
    assert {cid: c["stage"] for cid, c in chunks.items()} == {
        cid: "dropped" if cid in app["dropped"] else "in_prompt" for cid in app["retrieved"]}
    assert {cid: c["source_id"] for cid, c in chunks.items()} == app["source"]
    assert list(request["cited_ids"] or []) == app["cited"]


def test_the_vercel_ai_sample_through_a_collector(collector: Proc) -> None:
    with httpx.Client(timeout=15) as http:
        for line in FIXTURE.read_text().splitlines():
            answer = http.post(collector.url + "/v1/traces", content=line.encode(),
                               headers={"Content-Type": "application/json"})
            assert answer.status_code == 200, answer.text
        apps = EXPECTED["requests"]
        for app in apps:
            check(collector.trace(app["trace_id"]), app)

        # graded: right when the answer cites the policy that answers the question
        outcomes = [{"trace_id": app["trace_id"], "correct": app["decisive"] in app["cited"],
                     "decisive_chunk_ids": [app["decisive"]], "reviewer": "policy-qa"}
                    for app in apps]
        answer = http.post(collector.url + "/v1/outcomes", json={"outcomes": outcomes})
        assert answer.status_code == 200, answer.text
    for app in apps:
        trace = collector.trace(app["trace_id"])
        placed = app["in_prompt"]
        slot = placed.index(app["decisive"]) + 1 if app["decisive"] in placed else None
        assert trace["request"]["decisive_slot"] == slot, app["question"]
        expected_class = ("answered" if app["decisive"] in app["cited"]
                          else "missing" if app["decisive"] not in app["retrieved"]
                          else "dropped" if app["decisive"] in app["dropped"] else None)
        assert expected_class is not None, app["question"]  # every wrong answer here is one of both
        assert trace["taxonomy_class"] == expected_class, app["question"]


def test_a_vercel_ai_request_gives_its_answering_prompt_to_replay(collector: Proc) -> None:
    app = next(a for a in EXPECTED["requests"] if a["shape"] == "tool")
    line = next(line for line in FIXTURE.read_text().splitlines() if app["trace_id"] in line)
    assert httpx.post(collector.url + "/v1/traces", content=line.encode(), timeout=15,
                      headers={"Content-Type": "application/json"}).status_code == 200
    collector.trace(app["trace_id"])  # derived
    client = open_client(url=collector.url, fresh=True)
    try:
        answering, first_step = client.prompts(app["trace_id"])
    finally:
        client.close()
    # the step that read the tool result holds every policy the tool returned; the first
    # step, only the instructions and the question
    assert all(app["text"][cid] in answering for cid in app["in_prompt"])
    assert app["question"] in first_step and not any(
        app["text"][cid] in first_step for cid in app["in_prompt"])
