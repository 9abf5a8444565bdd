"""Acknowledge after a durable append, derive behind it: what was acknowledged is derived
even across a crash, and a reader asking for fresh data waits for it."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from midtrace.collector.intake import otlp
from midtrace.collector.intake.accept import recover, redacted_export
from midtrace.collector.storage.intake_log import IntakeLog, RawExport
from midtrace.collector.storage.raw_export import STORED_ZSTD, compact
from midtrace.collector.storage.store import Store
from tests.e2e.test_collector import rows
from tests.e2e.test_grpc_overload import batch_of_spans
from tests.procs import start_collector

PROTOBUF = "application/x-protobuf"


def export_body(tag: str, n: int = 1) -> bytes:
    return otlp.encode_sdk_spans(batch_of_spans(n, tag)).SerializeToString()


def openinference_body(tag: str, n: int = 1) -> bytes:
    """``n`` zero-code requests as OpenInference records them (a RETRIEVER span and an LLM
    span whose prompt holds the documents): no midtrace attribute, so a derive worker
    derives them."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "zero-code"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i in range(n):
        docs = [f"{tag}{i} document {d}: " + "returns are accepted within fourteen days " * 8
                for d in range(3)]
        with tracer.start_as_current_span("rag"):
            with tracer.start_as_current_span("retrieve") as r:
                r.set_attribute("openinference.span.kind", "RETRIEVER")
                for d, text in enumerate(docs):
                    r.set_attribute(f"retrieval.documents.{d}.document.id", f"{tag}{i}-d{d}")
                    r.set_attribute(f"retrieval.documents.{d}.document.content", text)
            with tracer.start_as_current_span("llm") as llm:
                llm.set_attribute("openinference.span.kind", "LLM")
                llm.set_attribute("llm.input_messages.0.message.role", "user")
                llm.set_attribute("llm.input_messages.0.message.content",
                                  "Answer from the documents.\n\n" + "\n\n".join(reversed(docs))
                                  + f"\n\nQuestion {tag}{i}: how long are returns accepted?")
                llm.set_attribute("llm.output_messages.0.message.role", "assistant")
                llm.set_attribute("llm.output_messages.0.message.content", "Fourteen days.")
    return otlp.encode_sdk_spans(list(memory.get_finished_spans())).SerializeToString()


def test_an_acknowledged_export_left_in_the_log_is_derived_when_the_store_opens(tmp_path: Path) -> None:
    db = tmp_path / "crash.duckdb"
    store = Store.open(db)
    log = IntakeLog(store.conn)
    kept = compact(RawExport(export_body("kept", 2), PROTOBUF))  # as the appender keeps it
    log.append([RawExport(export_body("left", 3), PROTOBUF),
                RawExport(b"\x00garbage", PROTOBUF),  # unreadable now: logged and dropped
                kept,
                RawExport(kept.body[:-20], PROTOBUF, STORED_ZSTD)])  # damaged: dropped too
    log.close()
    store.close()  # as if the collector died after acknowledging, before deriving
    assert rows(db, "SELECT count(*) FROM requests") == [(0,)]
    assert rows(db, "SELECT count(*) FROM intake_log") == [(4,)]

    proc = start_collector(db, tmp_path / "log")
    try:
        found = httpx.get(proc.url + "/api/v1/requests", params={"fresh": "1"}, timeout=15).json()
    finally:
        proc.stop()
    assert found["total"] == 5
    assert "derived 4 exports left in the intake log" in proc.log()
    assert "compressed body cannot be read" in proc.log()
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]


def test_recover_on_an_offline_store_empties_the_log(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "offline.duckdb")
    log = IntakeLog(store.conn)
    log.append([RawExport(export_body(f"o{i}"), PROTOBUF) for i in range(4)])
    log.close()
    assert recover(store) == 4
    assert recover(store) == 0
    assert store.conn.execute("SELECT count(*) FROM requests").fetchone() == (4,)
    store.close()


def test_fresh_reads_wait_until_every_acknowledged_export_is_derived(tmp_path: Path) -> None:
    db = tmp_path / "fresh.duckdb"
    proc = start_collector(db, tmp_path / "log")
    bodies = [openinference_body(f"f{i}-", 20) for i in range(40)]
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as http:
            for body in bodies:
                answer = http.post("/v1/traces", content=body, headers={"content-type": PROTOBUF})
                assert answer.status_code == 200, answer.text
            fresh = http.get("/api/v1/requests", params={"fresh": "1", "limit": "1"}).json()
            health = http.get("/healthz").json()
            bad = http.get("/api/v1/requests", params={"fresh": "yes"})
    finally:
        proc.stop()
    assert fresh["total"] == 40 * 20
    derivation = health["derivation"]
    # the writer thread derives some itself while the worker is busy; between them, all 40
    assert derivation.pop("exports_by_workers") + derivation.pop("exports_derived_ahead") == 40
    assert 1 <= derivation.pop("evidence_refreshes") <= health["commits"]
    assert derivation == {"pending_exports": 0, "oldest_pending_seconds": 0.0,
                          "workers": max(1, (os.cpu_count() or 1) - 1), "worker_restarts": 0}
    assert bad.status_code == 400 and "fresh must be 0 or 1" in bad.json()["error"]


def test_kill_9_between_acknowledgement_and_derivation_loses_nothing(tmp_path: Path) -> None:
    """Acknowledge many exports quickly, kill the collector at once; the restart derives
    whatever was acknowledged and not yet derived."""
    db = tmp_path / "kill.duckdb"
    proc = start_collector(db, tmp_path / "log")
    acked = 0
    with httpx.Client(base_url=proc.url, timeout=30) as http:
        for i in range(30):
            answer = http.post("/v1/traces", content=export_body(f"k{i}-", 30),
                               headers={"content-type": PROTOBUF})
            if answer.status_code == 200:
                acked += 30
    proc.stop(signal.SIGKILL)
    assert acked > 0
    proc = start_collector(db, tmp_path / "log2")
    try:
        total = httpx.get(proc.url + "/api/v1/requests", params={"fresh": "1", "limit": "1"},
                          timeout=15).json()["total"]
    finally:
        proc.stop()
    assert total >= acked


def test_kill_9_while_evidence_is_owed_leaves_no_request_out_of_the_metrics(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A commit's rows are durable before their request_evidence rows, which the writer
    computes for many commits at once (EVIDENCE_SECONDS later, or when a reader waits): a
    collector killed in between leaves those requests out of the metrics, and the next open
    of the store computes their rows."""
    db = tmp_path / "owed.duckdb"
    proc = start_collector(db, tmp_path / "log")
    owed = False
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as http:
            for attempt in range(5):  # the kill must fall between a commit and its refresh
                health = http.get("/healthz").json()
                while health["derivation"]["pending_exports"]:  # nothing owed to start with
                    health = http.get("/healthz").json()
                expected = health["requests_written"] + 3 * 20
                for i in range(3):
                    answer = http.post("/v1/traces", content=export_body(f"o{attempt}{i}-", 20),
                                       headers={"content-type": PROTOBUF})
                    assert answer.status_code == 200, answer.text
                while health["requests_written"] < expected:
                    health = http.get("/healthz").json()
                if health["derivation"]["pending_exports"]:  # stored, evidence still owed
                    proc.stop(signal.SIGKILL)
                    owed = True
                    break
    finally:
        proc.stop(signal.SIGKILL)
    assert owed, "every refresh came before the kill: nothing was owed"
    with caplog.at_level(logging.INFO, logger="midtrace.collector.storage.store"):
        store = Store.open(db)
    try:
        requests, evidence = store.conn.execute(
            "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM request_evidence)"
        ).fetchone()  # type: ignore[misc]
    finally:
        store.close()
    assert "a stop left without it" in caplog.text
    assert requests == expected and evidence == requests


def test_under_no_text_the_log_holds_no_text_and_still_derives(tmp_path: Path) -> None:
    marker = "OKAPI-MARKER-5151"
    spans = [s for s, _ in otlp.spans_of(otlp.encode_sdk_spans(batch_of_spans(2, marker)))]
    raw = redacted_export([s for s in spans if s is not None])
    assert marker.encode() not in raw.body
    assert marker.encode() in export_body(marker, 2)  # the same spans with text: found
    store = Store.open(tmp_path / "private.duckdb", keep_text=False)
    log = IntakeLog(store.conn)
    log.append([raw])
    log.close()
    assert recover(store) == 1
    assert store.conn.execute("SELECT count(*), count(question) FROM requests").fetchone() == (2, 0)
    store.close()


def test_a_log_opened_again_goes_on_counting(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "ids.duckdb")
    log = IntakeLog(store.conn)
    first = log.append([RawExport(export_body("a"), PROTOBUF)])
    assert recover(store) == 1  # derived: the log is empty again
    again = IntakeLog(store.conn, next_id=log.next_id)
    assert again.append([RawExport(export_body("b"), PROTOBUF)]) == [first[0] + 1]
    log.close()
    again.close()
    store.close()


def derive_workers_of(pid: int) -> list[int]:
    """The collector's derive worker processes (its spawned children, not the resource
    tracker multiprocessing also starts)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            out.append(int(stat.parent.name))
    return out


def test_a_dead_derive_worker_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "worker.duckdb"
    proc = start_collector(db, tmp_path / "log", "--derive-workers", "1")
    try:
        workers = derive_workers_of(proc.process.pid)
        assert len(workers) == 1, workers
        with httpx.Client(base_url=proc.url, timeout=30) as http:
            for i in range(5):
                assert http.post("/v1/traces", content=openinference_body(f"before{i}-", 10),
                                 headers={"content-type": PROTOBUF}).status_code == 200
            os.kill(workers[0], signal.SIGKILL)  # killed, as the OOM killer would
            for i in range(5):
                assert http.post("/v1/traces", content=openinference_body(f"after{i}-", 10),
                                 headers={"content-type": PROTOBUF}).status_code == 200
            for _ in range(6):  # a fresh read waits 10 s; starting workers again may take longer
                answer = http.get("/api/v1/requests", params={"fresh": "1", "limit": "1"})
                if answer.status_code != 503:
                    break
            assert answer.status_code == 200, answer.text
            found = answer.json()
            health = http.get("/healthz").json()
    finally:
        proc.stop()
    assert found["total"] == 100
    assert health["status"] == "ready"
    assert health["derivation"]["worker_restarts"] == 1
    assert health["derivation"]["workers"] == 1
    assert rows(db, "SELECT count(*) FROM intake_log") == [(0,)]


def test_derive_workers_leave_when_their_collector_is_killed(tmp_path: Path) -> None:
    proc = start_collector(tmp_path / "orphan.duckdb", tmp_path / "log", "--derive-workers", "1")
    workers = derive_workers_of(proc.process.pid)
    assert len(workers) == 1, workers
    proc.process.send_signal(signal.SIGKILL)  # nothing of the collector runs to stop them
    proc.process.wait(10)

    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"  # exited, not yet reaped

    deadline = time.monotonic() + 15
    while running(workers[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(workers[0]), "a derive worker outlived its collector"


def os_thread_names(pid: int) -> set[str]:
    return {(task / "comm").read_text().strip() for task in Path(f"/proc/{pid}/task").iterdir()}


def test_top_and_ps_tell_the_collectors_threads_and_workers_apart(tmp_path: Path) -> None:
    proc = start_collector(tmp_path / "names.duckdb", tmp_path / "log", "--derive-workers", "1")
    try:
        [worker] = derive_workers_of(proc.process.pid)
        collector_threads = os_thread_names(proc.process.pid)
        worker_threads = os_thread_names(worker)
        worker_name = Path(f"/proc/{worker}/comm").read_text().strip()
    finally:
        proc.stop()
    assert {"writer", "writer-dispatch", "appender", "derive-watch",
            f"feed-{worker}"} <= collector_threads, collector_threads
    assert worker_name == "derive-worker"  # the process as ps and top name it
    assert "parent-watch" in worker_threads, worker_threads
