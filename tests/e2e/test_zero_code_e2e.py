"""Zero-code end to end: an OpenInference-traced LangChain app and a GenAI-traced one send
to a real collector process with the real OTLP/HTTP exporter; the DuckDB file holds the
inferred positions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from midtrace.sample_traces.langchain_rag_app import KeywordRetriever, build_chain, select
from midtrace.sample_traces.record_langchain import CASES, OUT
from midtrace.schemas.chunk_hash import content_hash
from tests.procs import Proc
from tests.zero_code import instrumented, prompt_string, provider_with, where

QUESTION = "How long does standard shipping take and what does it cost?"
ANSWER = "Standard shipping takes 3 to 5 business days [1] and is free over 50 euros [3]."
RETRIEVED = KeywordRetriever(k=6).invoke(QUESTION)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_langchain_traces_become_requests_with_positions(collector: Proc, db_path: Path) -> None:
    # SimpleSpanProcessor exports each span as it ends: the collector sees the trace arrive
    # in pieces, retriever first, and must end with the whole request.
    provider = provider_with(OTLPSpanExporter(endpoint=collector.url + "/v1/traces",
                                              timeout=10), service="shop-bot")
    with instrumented(provider):
        build_chain(ANSWER, top_k=4, reorder=True, prompt_tokens=400).invoke(QUESTION)
    provider.shutdown()
    collector.stop()

    in_prompt = select(RETRIEVED, 4, reorder=True)
    prompt = prompt_string(in_prompt, QUESTION)
    ((request_id, service, question, answer, convention, estimated, tokens, chars, cited),) = rows(
        db_path, "SELECT request_id, service, question, answer, convention, tokens_estimated, "
                 "prompt_tokens, prompt_chars, cited_ids FROM requests")
    assert (service, question, answer, convention) == ("shop-bot", QUESTION, ANSWER,
                                                       "openinference")
    assert estimated and tokens == 400 and chars == len(prompt)
    assert cited == [content_hash(in_prompt[0].page_content),
                     content_hash(in_prompt[2].page_content)]

    stages = rows(db_path, "SELECT retrieval_rank, stage FROM chunks ORDER BY retrieval_rank")
    assert stages == [(1, "in_prompt"), (2, "in_prompt"), (3, "in_prompt"), (4, "in_prompt"),
                      (5, "dropped"), (6, "dropped")]
    placed = rows(db_path, f"SELECT chunk_id, char_start, char_end, token_start FROM placements "
                           f"WHERE request_id = {int(request_id)} ORDER BY prompt_index")
    assert [p[0] for p in placed] == [content_hash(d.page_content) for d in in_prompt]
    assert [(p[1], p[2]) for p in placed] == where(prompt, in_prompt)
    assert [p[3] for p in placed] == [int(s * 400 / len(prompt)) for s, _ in where(prompt,
                                                                                   in_prompt)]


def test_genai_traces_become_requests_with_positions(collector: Proc, db_path: Path) -> None:
    docs = [{"id": f"kb-{i}", "score": 1 - i / 10, "content": d.page_content}
            for i, d in enumerate(RETRIEVED[:3])]
    prompt = "Sources:\n" + "\n".join(f"[{i}] {d['content']}" for i, d in
                                      enumerate(reversed(docs), start=1))
    provider = provider_with(OTLPSpanExporter(endpoint=collector.url + "/v1/traces",
                                              timeout=10), service="genai-bot")
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("retrieval kb") as span:
            span.set_attributes({"gen_ai.operation.name": "retrieval",
                                 "gen_ai.retrieval.query.text": QUESTION,
                                 "gen_ai.retrieval.documents": json.dumps(docs)})
        with tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 90,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "See [3]."}]}])})
    provider.shutdown()
    collector.stop()

    (req,) = rows(db_path, "SELECT convention, model, prompt_tokens, cited_ids FROM requests")
    assert req == ("genai", "gpt-4o", 90, ["kb-0"])
    placed = rows(db_path, "SELECT chunk_id FROM placements ORDER BY prompt_index")
    assert [p[0] for p in placed] == ["kb-2", "kb-1", "kb-0"]


def test_the_langchain_sample_ingests_with_positions(db_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db_path),
                           str(OUT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ((n, conventions, cited),) = rows(
        db_path, "SELECT count(*), list(DISTINCT convention), count(cited_ids) FROM requests")
    assert (n, conventions, cited) == (len(CASES), ["openinference"], len(CASES))
    expected_drops = sum(6 - (c.top_k or 6) for c in CASES)
    assert rows(db_path, "SELECT count(*) FROM chunks WHERE stage = 'dropped'") == [
        (expected_drops,)]
    assert rows(db_path, "SELECT count(*) FROM placements") == [
        (sum(c.top_k or 6 for c in CASES),)]
