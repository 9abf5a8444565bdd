"""Request kinds (docs/metrics.md, "Request kinds"): a trace with retrieval and the LLM call
that answered is `rag`; retrieval with no LLM call is `retrieval_only`; an LLM call with no
retrieval is `llm_only`. All three are stored and listed, by both derive paths (the writer
thread and a worker's prepare); only `rag` counts in the metric views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from midtrace.collector.normalize.pipeline import normalize_trace
from midtrace.collector.query.reads import (Filters, run_facets, run_requests, run_trace,
                                            run_view)
from midtrace.collector.storage.derive import prepare
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.schemas.span import SpanRecord
from midtrace.sql import sqlfiles

DOC = "Customers may return unused items within 14 days of delivery for a full refund."
QUESTION = "How long do I have to return an item?"
RAG, SEARCH, CHAT = "1" * 32, "2" * 32, "3" * 32
T0 = 1_800_000_000 * 10**9  # 2027-01-15


def retriever(trace_id: str) -> SpanRecord:
    return SpanRecord(trace_id, "a" * 16, "retrieve", T0, T0 + 1_000, {
        "openinference.span.kind": "RETRIEVER", "input.value": QUESTION,
        "retrieval.documents.0.document.id": "returns",
        "retrieval.documents.0.document.content": DOC,
        "retrieval.documents.0.document.score": 0.9})


def llm(trace_id: str, prompt: str, answer: str) -> SpanRecord:
    return SpanRecord(trace_id, "b" * 16, "chat", T0 + 2_000, T0 + 3_000, {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1-mini",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": prompt,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "llm.token_count.prompt": 40})


TRACES = {
    RAG: [retriever(RAG), llm(RAG, f"Document [1] {DOC}\n\nQuestion: {QUESTION}", "14 days [1].")],
    SEARCH: [retriever(SEARCH)],
    CHAT: [llm(CHAT, "Hello there, who are you?", "A support assistant.")],
}


def test_each_trace_gets_its_kind() -> None:
    kinds = {t: normalize_trace(spans) for t, spans in TRACES.items()}
    assert {t: r.kind for t, r in kinds.items() if r is not None} == {
        RAG: "rag", SEARCH: "retrieval_only", CHAT: "llm_only"}
    chat = kinds[CHAT]
    assert chat is not None and chat.record.chunks == ()
    assert (chat.record.question, chat.record.answer, chat.record.model,
            chat.record.prompt_tokens, chat.record.prompt_chars) == (
        "Hello there, who are you?", "A support assistant.", "gpt-4.1-mini", 40, 25)
    assert normalize_trace([SpanRecord(CHAT, "c" * 16, "other", T0, T0 + 1, {})]) is None


@pytest.mark.parametrize("path", ["writer", "worker"])
def test_every_kind_is_listed_and_only_rag_is_counted(tmp_path: Path, path: str) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        spans = [s for trace in TRACES.values() for s in trace]
        if path == "writer":
            store.write([WriteJob(spans=spans)])
        else:
            store.apply([(prepare(spans, keep_text=True), [WriteJob()])])
        conn = store.conn
        assert dict(conn.execute("SELECT trace_id, kind FROM requests").fetchall()) == {
            RAG: "rag", SEARCH: "retrieval_only", CHAT: "llm_only"}
        # the metric views count the RAG request alone
        assert conn.execute("SELECT trace_id FROM request_facts").fetchall() == [(RAG,)]
        overview = run_view(conn, "overview").to_pylist()
        assert [row["requests"] for row in overview] == [1]
        # the requests list shows all three, with a class for the RAG request only
        table, total = run_requests(conn, Filters())
        assert total == 3
        assert sorted(zip(table["trace_id"].to_pylist(), table["kind"].to_pylist(),
                          table["taxonomy_class"].to_pylist())) == [
            (RAG, "rag", "ungraded"), (SEARCH, "retrieval_only", None),
            (CHAT, "llm_only", None)]
        assert run_requests(conn, Filters(), taxonomy_class="ungraded")[1] == 1
        assert run_facets(conn)["kinds"] == {"rag": 1, "retrieval_only": 1, "llm_only": 1}
        # the inspector reads each of them
        chat = run_trace(conn, CHAT)
        assert chat is not None and chat["request"]["kind"] == "llm_only"
        assert chat["request"]["answer"] == "A support assistant." and chat["chunks"] == []
    finally:
        store.close()


def test_the_migration_marks_retrieval_without_an_llm_call(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        store.write([WriteJob(spans=[s for trace in TRACES.values() for s in trace])])
        conn = store.conn
        # as a database written before kinds: every request counted as RAG
        conn.execute("UPDATE requests SET kind = NULL")
        (migration,) = [m for m in sqlfiles.migrations() if m.version == 11]
        sql = sqlfiles.render(migration.path)
        conn.execute(sql[sql.index("UPDATE requests"):])  # all but the ALTER TABLE
        assert dict(conn.execute("SELECT trace_id, coalesce(kind, 'rag') FROM requests")
                    .fetchall()) == {RAG: "rag", SEARCH: "retrieval_only", CHAT: "rag"}
    finally:
        store.close()


def test_facets_count_kinds_as_json(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.duckdb")
    try:
        store.write([WriteJob(spans=TRACES[CHAT])])
        assert json.loads(json.dumps(run_facets(store.conn)))["kinds"] == {
            "rag": 0, "retrieval_only": 0, "llm_only": 1}
    finally:
        store.close()
