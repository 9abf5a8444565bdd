"""What is kept of received spans, and the offline commands over it: texts stored once,
prompts as skeletons, rebuild, export -> ingest, prune, --no-text, rows from before 003."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from midtrace.collector.storage.rows import dumps
from midtrace.collector.storage.store import Store
from midtrace.sql import sqlfiles
from midtrace.schemas.encode import request_attributes
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from tests.procs import Proc, start_collector
from tests.sender import Sender
from tests.e2e.test_collector import rows

MARKER = "ZEBRA-MARKER-7731"
DOCS = [f"Document {i}: {MARKER} " + f"policy clause {i} " * 40 for i in range(4)]
TEMPLATE = "You are a support assistant. Answer only from the context below. " * 20
TABLES = ("spans", "texts", "requests", "chunks", "placements", "chunk_texts", "outcomes")


def midtrace_record(i: int) -> RagRecord:
    return RagRecord(
        question=f"question {i} {MARKER}", answer=f"answer {i} {MARKER}", model="m",
        chunks=tuple(Chunk(f"doc-{k}", text=DOCS[k], label="direct_answer" if k == 1 else None)
                     for k in range(3)),
        placements=tuple(Placement(f"doc-{k}", k, 100 * k, 100 * k + 90) for k in range(3)),
        outcome=Outcome(correct=i % 2 == 0, decisive_chunk_ids=("doc-1",)))


def openinference_trace(tracer: Any, question: str) -> str:
    """A RETRIEVER, a RERANKER and an LLM span as OpenInference instrumentations send them."""
    prompt = TEMPLATE + "".join(f"\n[{k}] {DOCS[k]}" for k in (2, 0)) + f"\nQuestion: {question}"
    with tracer.start_as_current_span("rag") as root:
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            for i, doc in enumerate(DOCS):
                span.set_attribute(f"retrieval.documents.{i}.document.id", f"doc-{i}")
                span.set_attribute(f"retrieval.documents.{i}.document.content", doc)
                span.set_attribute(f"retrieval.documents.{i}.document.score", 1.0 - i / 10)
        with tracer.start_as_current_span("rerank") as span:
            span.set_attribute("openinference.span.kind", "RERANKER")
            for i, k in enumerate((2, 0)):
                span.set_attribute(f"reranker.output_documents.{i}.document.id", f"doc-{k}")
                span.set_attribute(f"reranker.output_documents.{i}.document.content", DOCS[k])
        with tracer.start_as_current_span("llm") as span:
            span.set_attribute("openinference.span.kind", "LLM")
            span.set_attribute("llm.input_messages.0.message.role", "user")
            span.set_attribute("llm.input_messages.0.message.content", prompt)
            span.set_attribute("llm.output_messages.0.message.content", f"It is 14 days {MARKER}")
        return format(root.get_span_context().trace_id, "032x")


def send_all(proc: Proc) -> dict[str, Any]:
    sender = Sender(proc.url, service="support-bot")
    own = [sender.send(midtrace_record(i)) for i in range(4)]
    sender.close()
    provider = TracerProvider(resource=Resource.create({"service.name": "oi-app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=proc.url + "/v1/traces")))
    oi = openinference_trace(provider.get_tracer("oi"), f"How long? {MARKER}")
    provider.shutdown()
    posted = httpx.post(proc.url + "/v1/outcomes", json={"outcomes": [
        {"trace_id": own[0], "correct": False, "note": "reviewed", "reviewer": "kim"}]})
    assert posted.status_code == 200
    return {"own": own, "oi": oi}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A database written by a real collector: own-convention and OpenInference traces."""
    tmp = tmp_path_factory.mktemp("filled")
    db = tmp / "filled.duckdb"
    proc = start_collector(db, tmp / "log")
    try:
        ids = send_all(proc)
    finally:
        proc.stop()
    yield db, ids


@pytest.fixture
def copy_of(filled: tuple[Path, dict[str, Any]], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    db, ids = filled
    target = tmp_path / "copy.duckdb"
    shutil.copy(db, target)
    return target, ids


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {t: rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in TABLES}


def midtrace_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "midtrace", *args], capture_output=True, text=True)


def test_each_text_is_stored_once_and_a_prompt_as_a_skeleton(filled: tuple[Path, dict[str, Any]]) -> None:
    db, ids = filled
    for doc in DOCS:
        assert rows(db, "SELECT count(*) FROM texts WHERE text = ?", [doc]) == [(1,)]
    assert rows(db, "SELECT count(*) FROM spans WHERE contains(attributes, ?)", [DOCS[0][:80]]) == [(0,)]
    (llm,) = rows(db, "SELECT attributes FROM spans WHERE trace_id = ? AND name = 'llm'", [ids["oi"]])
    content = json.loads(llm[0])["llm.input_messages.0.message.content"]
    refs = [p["$ref"] for p in content["$skel"] if isinstance(p, dict)]
    assert len(refs) == 3  # the template and the two documents; the question stays inline
    store = Store.open(db)
    try:
        spans = store.spans_of_traces([ids["oi"]])[ids["oi"]]
    finally:
        store.close()
    llm_span = next(s for s in spans.values() if s.name == "llm")
    prompt = llm_span.attributes["llm.input_messages.0.message.content"]
    assert prompt == TEMPLATE + f"\n[2] {DOCS[2]}\n[0] {DOCS[0]}\nQuestion: How long? {MARKER}"


def test_rebuild_gives_the_same_rows_twice_and_refuses_while_a_collector_holds_the_db(
        copy_of: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    db, _ = copy_of
    before = snapshot(db)
    assert before["requests"] and before["outcomes"]
    run = midtrace_cli("rebuild", "--db", str(db))
    assert run.returncode == 0, run.stderr
    assert f"rebuilt {len(before['requests'])} requests from 5 traces" in run.stdout
    assert snapshot(db) == before
    with duckdb.connect(str(db)) as conn:  # as if an older normalizer had missed everything
        conn.execute("DELETE FROM chunks; DELETE FROM placements; DELETE FROM requests; "
                     "DELETE FROM outcomes WHERE origin = 'span'")
    assert midtrace_cli("rebuild", "--db", str(db)).returncode == 0
    after = snapshot(db)
    assert {t: after[t] for t in TABLES if t != "outcomes"} == {
        t: before[t] for t in TABLES if t != "outcomes"}

    def graded(outcomes: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return sorted(((r[1], r[2], *r[5:]) for r in outcomes), key=repr)  # ids, times are new

    assert graded(after["outcomes"]) == graded(before["outcomes"])
    assert midtrace_cli("rebuild", "--db", str(db)).returncode == 0
    assert snapshot(db) == after
    proc = start_collector(db, tmp_path / "log")
    try:
        held = midtrace_cli("rebuild", "--db", str(db))
    finally:
        proc.stop()
    assert held.returncode == 3 and "held by another process" in held.stderr


def test_export_then_ingest_into_a_new_db_gives_the_same_rows(
        filled: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    db, ids = filled
    chosen = ids["own"][1:3] + [ids["oi"]]
    run = midtrace_cli("export", "--db", str(db), *[a for t in chosen for a in ("--trace-id", t)])
    assert run.returncode == 0, run.stderr
    incident = tmp_path / "incident.json"
    incident.write_text(run.stdout)
    assert len(run.stdout.splitlines()) == 3
    fresh = tmp_path / "fresh.duckdb"
    loaded = midtrace_cli("ingest", "--db", str(fresh), str(incident))
    assert loaded.returncode == 0, loaded.stderr

    def of(path: Path, sql: str) -> list[tuple[Any, ...]]:
        return rows(path, sql, [chosen])

    for sql in (
        "SELECT * EXCLUDE (request_id) FROM requests WHERE list_contains($1, trace_id) ORDER BY ALL",
        "SELECT r.trace_id, c.* EXCLUDE (request_id) FROM chunks c JOIN requests r USING (request_id) "
        "WHERE list_contains($1, trace_id) ORDER BY ALL",
        "SELECT r.trace_id, p.* EXCLUDE (request_id) FROM placements p JOIN requests r USING (request_id) "
        "WHERE list_contains($1, trace_id) ORDER BY ALL",
        "SELECT * EXCLUDE (received_at, text_refs) FROM spans WHERE list_contains($1, trace_id) ORDER BY ALL",
        "SELECT * EXCLUDE (outcome_id, received_at) FROM outcomes WHERE origin = 'span' "
        "AND list_contains($1, trace_id) ORDER BY ALL",
    ):
        assert of(fresh, sql) == of(db, sql), sql
    # two traces in midtrace's conventions and one OpenInference trace: three requests
    assert of(fresh, "SELECT count(*) FROM requests WHERE list_contains($1, trace_id)") == [(3,)]
    unknown = midtrace_cli("export", "--db", str(db), "--trace-id", "12" * 16)
    assert unknown.returncode == 1 and "no spans stored" in unknown.stderr


def test_prune_named_traces_deletes_every_row_and_their_text_from_the_file(
        copy_of: tuple[Path, dict[str, Any]]) -> None:
    db, ids = copy_of
    gone = ids["own"][0]
    ((n_requests,),) = rows(db, "SELECT count(*) FROM requests")
    doomed = f"{MARKER}-only-in-the-pruned-trace"
    with duckdb.connect(str(db)) as conn:  # a text only the pruned trace refers to
        conn.execute("INSERT INTO texts VALUES ('f' || repeat('0', 63), ?)", [doomed])
        conn.execute("UPDATE spans SET text_refs = list_append(text_refs, 'f' || repeat('0', 63)) "
                     "WHERE trace_id = ?", [gone])
    run = midtrace_cli("prune", "--db", str(db), "--trace-id", gone)
    assert run.returncode == 0, run.stderr
    assert "deleted 1 trace(s)" in run.stdout
    for table in ("spans", "requests", "outcomes"):
        assert rows(db, f"SELECT count(*) FROM {table} WHERE trace_id = ?", [gone]) == [(0,)]
    assert rows(db, "SELECT count(*) FROM requests") == [(n_requests - 1,)]
    assert rows(db, "SELECT count(*) FROM chunks c LEFT JOIN requests r USING (request_id) "
                    "WHERE r.request_id IS NULL") == [(0,)]
    assert rows(db, "SELECT count(*) FROM texts WHERE text = ?", [doomed]) == [(0,)]
    assert rows(db, "SELECT count(*) FROM texts WHERE text = ?", [DOCS[0]]) == [(1,)]
    data = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    assert doomed.encode() not in data
    assert f"question 0 {MARKER}".encode() not in data
    assert f"question 1 {MARKER}".encode() in data  # the check can see text that is there


def test_prune_older_than_keeps_recent_traces(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    proc = start_collector(db, tmp_path / "log")
    try:
        sender = Sender(proc.url)
        old = sender.send(RagRecord(question="old"), start_ns=1_600_000_000 * 10**9)
        sender.send(RagRecord(question="new"))
        sender.close()
    finally:
        proc.stop()
    bad_age = midtrace_cli("prune", "--db", str(db), "--older-than", "a month")
    assert bad_age.returncode == 2 and "e.g. 30d" in bad_age.stderr
    # The old trace's spans end now (only their start is old), so 30 days keeps both.
    assert midtrace_cli("prune", "--db", str(db), "--older-than", "30d").returncode == 0
    assert rows(db, "SELECT count(*) FROM requests") == [(2,)]
    with duckdb.connect(str(db)) as conn:
        conn.execute("UPDATE spans SET end_ns = start_ns WHERE trace_id = ?", [old])
    run = midtrace_cli("prune", "--db", str(db), "--older-than", "30d")
    assert run.returncode == 0 and "deleted 1 trace(s)" in run.stdout, run.stdout + run.stderr
    assert rows(db, "SELECT question FROM requests") == [("new",)]


def test_no_text_stores_hashes_offsets_and_lengths_only(filled: tuple[Path, dict[str, Any]],
                                                         tmp_path: Path) -> None:
    with_text = b"".join(p.read_bytes() for p in filled[0].parent.glob(filled[0].name + "*"))
    assert MARKER.encode() in with_text  # the same traffic with text: the grep can see it
    db = tmp_path / "private.duckdb"
    proc = start_collector(db, tmp_path / "log", "--no-text")
    try:
        assert httpx.get(proc.url + "/healthz").json()["text"].startswith("not stored")
        ids = send_all(proc)
    finally:
        proc.stop()
    data = b"".join(p.read_bytes() for p in tmp_path.glob("private.duckdb*"))
    assert MARKER.encode() not in data
    assert rows(db, "SELECT count(*) FROM texts") == [(0,)]
    assert rows(db, "SELECT count(*) FROM chunk_texts") == [(0,)]
    assert rows(db, "SELECT count(*) FROM requests WHERE question IS NOT NULL OR answer IS NOT NULL") == [(0,)]
    assert rows(db, "SELECT DISTINCT text_chars FROM chunks ORDER BY 1") == sorted(
        {(len(d),) for d in DOCS[:3]})
    assert rows(db, "SELECT count(*) FROM chunks WHERE text_hash IS NULL") == [(0,)]
    # Rebuilding changes nothing the spans alone decide. Where an OpenInference document sat
    # in the prompt can be found only while the texts are in hand (docs/collector.md,
    # "Privacy"): when the trace's spans were derived together they were, on a rebuild
    # they are not, so that request's own rows are left out of the comparison.
    oi_request = rows(db, "SELECT request_id FROM requests WHERE trace_id = ?", [ids["oi"]])
    assert len(oi_request) == 1

    def without_oi(snap: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
        derived = ("requests", "chunks", "placements")
        return {t: [r for r in v if not (t in derived and r[0] == oi_request[0][0])]
                for t, v in snap.items()}

    before = snapshot(db)
    run = midtrace_cli("rebuild", "--db", str(db))
    assert run.returncode == 0, run.stderr
    after = snapshot(db)
    assert without_oi(after) == without_oi(before)
    assert [r[:3] for r in after["chunks"] if r[0] == oi_request[0][0]] == [
        r[:3] for r in before["chunks"] if r[0] == oi_request[0][0]]  # the same documents


def test_rows_written_before_migration_003_are_read_and_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "v1.duckdb"
    (core,) = [m for m in sqlfiles.migrations() if m.version == 1]
    attrs = request_attributes(midtrace_record(7))
    with duckdb.connect(str(db)) as conn:
        conn.execute(sqlfiles.render(core.path))
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                     "name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
        conn.execute("INSERT INTO schema_migrations VALUES (1, 'core', now())")
        conn.execute("INSERT INTO spans VALUES (?, ?, NULL, 'llm', 1, 1000, 2000, 'legacy', NULL, "
                     "0, 0, ?, ?, now())",
                     ["9a" * 16, "01" * 8, dumps(attrs), dumps({"service.name": "legacy"})])
    run = midtrace_cli("rebuild", "--db", str(db))
    assert run.returncode == 0, run.stderr
    assert rows(db, "SELECT trace_id, question, service FROM requests") == [
        ("9a" * 16, f"question 7 {MARKER}", "legacy")]
    assert rows(db, "SELECT t.text FROM chunks c JOIN chunk_texts t USING (text_hash) "
                    "ORDER BY ordinal") == [(d,) for d in DOCS[:3]]
    newest = max(m.version for m in sqlfiles.migrations())
    assert newest >= 4 and rows(db, "SELECT max(version) FROM schema_migrations") == [(newest,)]
    exported = midtrace_cli("export", "--db", str(db), "--trace-id", "9a" * 16)
    assert exported.returncode == 0 and DOCS[0] in exported.stdout
