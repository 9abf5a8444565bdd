"""``--no-text`` end to end: a real collector, traces sent with the real OTLP exporter carrying
a marker in every attribute that holds text, and the database file read byte by byte.

Every marker shares one random prefix, so one search of the raw bytes (and of every row,
which DuckDB's string compression cannot hide) covers them all. The same traffic sent to a
collector that keeps text is the positive control: there every marker is found.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from tests.e2e.test_collector import rows
from tests.procs import start_collector
from tests.sender import Sender

PREFIX = f"leak{uuid.uuid4().hex}"


@dataclass
class Markers:
    """One unique, long marker per text-bearing attribute (``mark(name)``)."""

    made: dict[str, str] = field(default_factory=dict)

    def __call__(self, name: str) -> str:
        return self.made.setdefault(name, f"{PREFIX}-{name}-{uuid.uuid4().hex}")


def doc_text(m: Markers, name: str) -> str:
    return f"{m(name)} " + f"clause {name} of the refund policy applies. " * 6


@dataclass
class Sent:
    oi: str = ""
    genai: str = ""
    own: str = ""
    oi_docs: dict[str, str] = field(default_factory=dict)


def openinference_trace(tracer: Tracer, m: Markers, sent: Sent) -> None:
    """A LangChain-shaped trace: chain, retriever, reranker, prompt, LLM with tool calls, tool."""
    docs = {"doc-a": doc_text(m, "oi.doc.a"), "": doc_text(m, "oi.doc.noid"),
            "doc-c": doc_text(m, "oi.doc.c")}
    sent.oi_docs = docs
    template = f"{m('oi.template')} Answer from the context.\n{{context}}\nQuestion: {{question}}"
    prompt = (f"{m('oi.template.rendered')}\n[1] {docs['']}\n[2] {docs['doc-a']}\n"
              f"Question: {m('oi.question.in.prompt')}")
    with tracer.start_as_current_span("RetrievalQA") as root:
        root.set_attributes({
            "openinference.span.kind": "CHAIN", "input.mime_type": "application/json",
            "input.value": json.dumps({"question": m("oi.input.value")}),
            "output.value": m("oi.output.value"), "session.id": "session-1",
            "metadata": json.dumps({"ticket": m("oi.metadata")}),
            "tag.tags": [m("oi.tag")], "app.unknown.attribute": m("oi.unknown"),
        })
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attributes({"openinference.span.kind": "RETRIEVER",
                                 "input.value": m("oi.retriever.query")})
            for i, (doc_id, text) in enumerate(docs.items()):
                prefix = f"retrieval.documents.{i}.document"
                if doc_id:
                    span.set_attribute(f"{prefix}.id", doc_id)
                span.set_attribute(f"{prefix}.content", text)
                span.set_attribute(f"{prefix}.score", 0.9 - i / 10)
                span.set_attribute(f"{prefix}.metadata", json.dumps(
                    {"source": f"policy-{i}.md", "title": m(f"oi.retrieval.metadata.{i}")}))
        with tracer.start_as_current_span("rerank") as span:
            span.set_attributes({"openinference.span.kind": "RERANKER",
                                 "reranker.query": m("oi.reranker.query"),
                                 "reranker.model_name": "cross-encoder"})
            for i, (doc_id, text) in enumerate(docs.items()):
                prefix = f"reranker.input_documents.{i}.document"
                if doc_id:
                    span.set_attribute(f"{prefix}.id", doc_id)
                span.set_attribute(f"{prefix}.content", text)
                span.set_attribute(f"{prefix}.metadata",
                                   json.dumps({"title": m(f"oi.rerank.in.metadata.{i}")}))
            for i, doc_id in enumerate(("", "doc-a")):
                prefix = f"reranker.output_documents.{i}.document"
                if doc_id:
                    span.set_attribute(f"{prefix}.id", doc_id)
                span.set_attribute(f"{prefix}.content", docs[doc_id])
                span.set_attribute(f"{prefix}.score", 0.8 - i / 10)
                span.set_attribute(f"{prefix}.metadata",
                                   json.dumps({"title": m(f"oi.rerank.out.metadata.{i}")}))
        with tracer.start_as_current_span("prompt") as span:
            span.set_attributes({
                "openinference.span.kind": "CHAIN", "llm.prompt_template.template": template,
                "llm.prompt_template.version": "v3",
                "llm.prompt_template.variables": json.dumps(
                    {"question": m("oi.template.variables")}),
            })
        with tracer.start_as_current_span("ChatOpenAI") as span:
            span.set_attributes({
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                "llm.token_count.prompt": 300,
                "llm.invocation_parameters": json.dumps({"stop": [m("oi.invocation")]}),
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.contents.0.message_content.type": "text",
                "llm.input_messages.0.message.contents.0.message_content.text": m("oi.system"),
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": prompt,
                "llm.input_messages.2.message.role": "assistant",
                "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call-1",
                "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments":
                    json.dumps({"query": m("oi.in.tool.arguments")}),
                "llm.input_messages.3.message.role": "tool",
                "llm.input_messages.3.message.tool_call_id": "call-1",
                "llm.input_messages.3.message.content": m("oi.tool.result.message"),
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": f"{m('oi.answer')} 14 days [1].",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call-2",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                    json.dumps({"query": m("oi.out.tool.arguments")}),
                "llm.tools.0.tool.json_schema": json.dumps(
                    {"type": "function", "function": {"name": "lookup",
                                                      "description": m("oi.tool.schema")}}),
            })
        with tracer.start_as_current_span("lookup") as span:
            span.set_attributes({
                "openinference.span.kind": "TOOL", "tool.name": "lookup",
                "tool.description": m("oi.tool.description"),
                "tool.parameters": json.dumps({"query": m("oi.tool.parameters")}),
                "input.value": m("oi.tool.input"), "output.value": m("oi.tool.output"),
            })
        with tracer.start_as_current_span("embed") as span:
            span.set_attributes({"openinference.span.kind": "EMBEDDING",
                                 "embedding.model_name": "text-embedding-3-small",
                                 "embedding.embeddings.0.embedding.text": m("oi.embedding"),
                                 "embedding.embeddings.0.embedding.vector": [0.1, 0.2]})
        sent.oi = format(root.get_span_context().trace_id, "032x")


def genai_trace(tracer: Tracer, m: Markers, sent: Sent) -> None:
    """OTel GenAI spans: retrieval, chat with messages and tool calls, a tool, an older form."""
    docs = [{"id": "g-1", "score": 0.9, "content": doc_text(m, "genai.doc.1"),
             "metadata": {"source": "kb/returns.md", "title": m("genai.doc.metadata")}},
            {"id": "g-2", "score": 0.7, "content": doc_text(m, "genai.doc.2")}]
    system = [{"type": "text", "content": f"{m('genai.system')}\n[1] {docs[1]['content']}"}]
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": m("genai.user")}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call-9", "name": "search",
                                         "arguments": {"q": m("genai.message.tool.arguments")}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call-9",
                                    "response": m("genai.message.tool.response")}]},
    ]
    output = [{"role": "assistant", "finish_reason": "stop",
               "parts": [{"type": "text", "content": f"{m('genai.answer')} [1]"}]}]
    with tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute("gen_ai.agent.description", m("genai.agent.description"))
        with tracer.start_as_current_span("retrieval kb") as span:
            span.set_attributes({
                "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb",
                "gen_ai.retrieval.query.text": m("genai.query"),
                "gen_ai.retrieval.documents": json.dumps(docs)})
        with tracer.start_as_current_span("chat legacy") as span:
            span.set_attributes({
                "gen_ai.system": "openai", "gen_ai.request.model": "gpt-3.5-turbo",
                "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": m("genai.prompt"),
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": m("genai.completion")})
        with tracer.start_as_current_span("execute_tool search") as span:
            span.set_attributes({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": "call-9", "gen_ai.tool.description": m("genai.tool.description"),
                "gen_ai.tool.call.arguments": json.dumps({"q": m("genai.tool.arguments")}),
                "gen_ai.tool.call.result": m("genai.tool.result")})
        with tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 120,
                "gen_ai.system_instructions": json.dumps(system),
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(output),
                "gen_ai.response.finish_reasons": ["stop"]})
        sent.genai = format(root.get_span_context().trace_id, "032x")


def own_record(m: Markers) -> RagRecord:
    return RagRecord(
        question=m("own.question"), answer=m("own.answer"), model="gpt-4.1-mini",
        template_id="support", strategy="edge", answer_constraints=(m("own.answer.constraint"),),
        unresolved_conflicts=(m("own.conflict"),), verifier_result=m("own.verifier"),
        chunks=(Chunk("refund-7", source_id="refunds.md", label="direct_answer",
                      updated=date(2026, 4, 12), text=doc_text(m, "own.chunk")),
                Chunk("faq-1", text=doc_text(m, "own.chunk.2"))),
        placements=(Placement("refund-7", 0, 10, 90), Placement("faq-1", 1, 90, 170)),
        outcome=Outcome(correct=False, decisive_chunk_ids=("refund-7",), reviewer="app",
                        required_constraints=(m("own.required"),),
                        recalled_constraints=(m("own.required"),), note=m("own.span.note")))


def send_everything(url: str, m: Markers) -> Sent:
    """Each trace goes as one export, so its request is derived while its text is at hand."""
    sent = Sent()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces")))
    tracer = provider.get_tracer("tests.no_text")
    openinference_trace(tracer, m, sent)
    assert provider.force_flush(10_000)
    genai_trace(tracer, m, sent)
    assert provider.force_flush(10_000)
    provider.shutdown()
    sender = Sender(url, service="own-app")
    sent.own = sender.send(own_record(m))
    sender.close()
    posted = httpx.post(url + "/v1/outcomes", json={"outcomes": [{
        "trace_id": sent.own, "correct": True, "reviewer": "kim", "note": m("posted.note"),
        "required_constraints": [m("posted.required")],
        "recalled_constraints": [m("posted.required")]}]})
    assert posted.status_code == 200 and posted.json()["accepted"] == 1, posted.text
    return sent


@dataclass
class Run:
    db: Path
    file_bytes: bytes = field(repr=False)
    markers: Markers
    sent: Sent


def run_collector(tmp: Path, *flags: str) -> Run:
    db = tmp / "traces.duckdb"
    proc = start_collector(db, tmp / "collector.log", *flags)
    markers = Markers()
    try:
        sent = send_everything(proc.url, markers)
        health = httpx.get(proc.url + "/healthz").json()
    finally:
        assert proc.stop() == 0, proc.log()
    assert health["normalize_errors"] == 0 and health["failed_jobs"] == 0, health
    data = b"".join(p.read_bytes() for p in sorted(tmp.glob("traces.duckdb*")))
    return Run(db, data, markers, sent)


@pytest.fixture(scope="module")
def without_text(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield run_collector(tmp_path_factory.mktemp("no_text"), "--no-text")


@pytest.fixture(scope="module")
def with_text(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield run_collector(tmp_path_factory.mktemp("with_text"))


def rows_holding(db: Path, needle: str) -> dict[str, int]:
    """Rows of each table with ``needle`` anywhere in them, read through DuckDB (decompressed)."""
    with duckdb.connect(str(db), read_only=True) as conn:
        tables = [t for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()]
        found = {}
        for t in tables:
            ((n,),) = conn.execute(
                f'SELECT count(*) FROM "{t}" r WHERE contains(CAST(r AS VARCHAR), ?)',
                [needle]).fetchall()
            if n:
                found[t] = n
    return found


def test_with_text_every_marker_is_in_the_file(with_text: Run) -> None:
    """The positive control: the same search finds each marker when text is kept."""
    assert len(with_text.markers.made) > 50
    missing = [name for name, marker in with_text.markers.made.items()
               if marker.encode() not in with_text.file_bytes]
    assert not missing, f"the raw-byte search cannot see these stored markers: {missing}"
    assert rows_holding(with_text.db, PREFIX)


def test_no_text_keeps_no_text_of_the_trace_in_the_file(without_text: Run) -> None:
    leaked = [name for name, marker in without_text.markers.made.items()
              if marker.encode() in without_text.file_bytes]
    assert not leaked, f"stored with --no-text: {leaked}"
    assert PREFIX.encode() not in without_text.file_bytes
    assert rows_holding(without_text.db, PREFIX) == {}
    for table in ("texts", "chunk_texts"):
        assert rows(without_text.db, f"SELECT count(*) FROM {table}") == [(0,)]


def test_no_text_still_derives_requests_chunks_and_placements(without_text: Run,
                                                              with_text: Run) -> None:
    db, sent = without_text.db, without_text.sent
    assert rows(db, "SELECT trace_id, convention, question, answer, verifier_result "
                    "FROM requests ORDER BY convention") == [
        (sent.genai, "genai", None, None, None), (sent.own, "midtrace", None, None, None),
        (sent.oi, "openinference", None, None, None)]

    def derived(run: Run, trace_id: str) -> dict[str, Any]:
        return {
            "request": rows(run.db, "SELECT model, template_id, template_version, prompt_tokens, "
                                    "prompt_chars, evidence_tokens, cited_ids FROM requests "
                                    "WHERE trace_id = ?", [trace_id]),
            "chunks": rows(run.db, "SELECT c.* EXCLUDE (request_id) FROM chunks c "
                                   "JOIN requests USING (request_id) WHERE trace_id = ? "
                                   "ORDER BY ordinal", [trace_id]),
            "placements": rows(run.db, "SELECT p.* EXCLUDE (request_id) FROM placements p "
                                       "JOIN requests USING (request_id) WHERE trace_id = ? "
                                       "ORDER BY prompt_index", [trace_id])}

    for name in ("oi", "genai", "own"):
        kept = derived(with_text, getattr(with_text.sent, name))
        dropped = derived(without_text, getattr(sent, name))
        assert dropped["placements"], name
        # the same rows, but for ids that hash a text holding a (different) marker
        assert [(r[0], *r[2:6]) for r in dropped["request"]] == [
            (r[0], *r[2:6]) for r in kept["request"]], name
        assert [c[1:-2] for c in dropped["chunks"]] == [c[1:-2] for c in kept["chunks"]], name
        assert [p[1:] for p in dropped["placements"]] == [p[1:] for p in kept["placements"]], name

    oi = derived(without_text, sent.oi)
    ids = [c[0] for c in oi["chunks"]]
    assert ids == ["doc-a", content_hash(sent.oi_docs[""]), "doc-c"]
    assert [(c[0], c[2], c[4]) for c in oi["chunks"]] == [
        ("doc-a", "in_prompt", "policy-0.md"), (ids[1], "in_prompt", "policy-1.md"),
        ("doc-c", "dropped", "policy-2.md")]
    assert [(c[-2], c[-1]) for c in oi["chunks"]] == [
        (content_hash(t), len(t)) for t in sent.oi_docs.values()]
    assert [p[0] for p in oi["placements"]] == [ids[1], "doc-a"]
    ((model, template_id, version, *_, cited),) = oi["request"]
    assert (model, version, cited) == ("gpt-4o-mini", "v3", [ids[1]])
    template = [v for k, v in without_text.markers.made.items() if k == "oi.template"][0]
    assert template_id == content_hash(
        f"{template} Answer from the context.\n{{context}}\nQuestion: {{question}}")[:23]

    genai = derived(without_text, sent.genai)
    assert [(c[0], c[4]) for c in genai["chunks"]] == [("g-1", "kb/returns.md"), ("g-2", None)]

    (own_outcomes) = rows(db, "SELECT origin, reviewer, note, required_constraints, "
                              "recalled_constraints FROM outcomes WHERE trace_id = ? "
                              "ORDER BY origin", [sent.own])
    m = without_text.markers
    assert own_outcomes == [
        ("api", "kim", None, [content_hash(m("posted.required"))],
         [content_hash(m("posted.required"))]),
        ("span", "app", None, [content_hash(m("own.required"))], [content_hash(m("own.required"))])]
    assert rows(db, "SELECT answer_constraints, unresolved_conflicts FROM requests "
                    "WHERE trace_id = ?", [sent.own]) == [
        ([content_hash(m("own.answer.constraint"))], [content_hash(m("own.conflict"))])]
    assert rows(db, "SELECT n_required, n_recalled FROM request_evidence e "
                    "WHERE e.trace_id = ?", [sent.own]) == [(1, 1)]
