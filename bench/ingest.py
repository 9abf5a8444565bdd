"""Ingest benchmark: a real collector process fed pre-encoded OTLP/HTTP batches.

Workload: a corpus of 50,000 chunks of about 600 characters; each request retrieves 20 of
them (Zipf-skewed: popular chunks come back often), a reranker keeps 8, and the prompt holds
those 8 plus a template (about 6,000 characters). Each request is one trace, built with the
real OTel SDK and encoded with the SDK's own OTLP encoder in batches of 50 requests:

- run ``own``: midtrace's conventions (schemas/encode.py), 3 spans a request, all 20 chunk
  texts on the LLM span;
- run ``openinference``: RETRIEVER, RERANKER and LLM spans as OpenInference sends them,
  the whole prompt in ``llm.input_messages.0.message.content``. Without the OpenInference
  normalizer these traces derive no request rows: the run measures receiving and storing.

A separate process sends the batches over several keep-alive connections, as fast as the
collector answers, or with ``--rate`` steadily at that many requests a second. Reported: requests/s
and spans/s from the first byte sent to the last acknowledgement (the collector answers once
an export is durable in its intake log), and to the moment everything acknowledged is
derived (a ``fresh=1`` read returns); CPU per request of the collector with its derive
workers (counted from the moment it is ready: start-up is not ingest) and of the sender; the
cost per request of decoding and checking the exports and of normalizing their traces, with
the checkout's own code in a process of its own; peak RSS summed over the collector
and its workers; database bytes per request; and how many exports a derive worker derived,
how many the writer thread derived itself while the workers were busy, and in how many
commits (from ``/healthz``). A second table splits the collector's CPU by part, read from the
names its threads have in the OS: intake (the event loop: HTTP and the checks), the writer
(with the threads feeding its workers, and the groups it derives itself), the appender of
the intake log, DuckDB's own threads, and the derive workers; each also as a share of one
core over the time to derive everything.

    .venv/bin/python bench/ingest.py                      # both runs, 20,000 requests each
    .venv/bin/python bench/ingest.py --requests 5000 --run own
    .venv/bin/python bench/ingest.py --profile own        # cProfile of the write path in-process
    .venv/bin/python bench/ingest.py --derive-workers 0,1 # the writer thread alone vs a worker
    .venv/bin/python bench/ingest.py --memory-limits none,256MB  # DuckDB's default vs a cap
    .venv/bin/python bench/ingest.py --into /tmp/midtrace-bench.duckdb  # into a 1M-request file
    .venv/bin/python bench/ingest.py --into /tmp/midtrace-bench.duckdb --and-empty --repeats 3
    .venv/bin/python bench/ingest.py --run own --chdb     # a collector on DuckDB vs one on chdb
    .venv/bin/python bench/ingest.py --rate 400 --requests 4000  # a steady 400 requests/s
"""

from __future__ import annotations

import argparse
import http.client
import inspect
import json
import multiprocessing as mp
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from midtrace.schemas.encode import record_request  # noqa: E402
from midtrace.schemas.model import Chunk, Placement, RagRecord  # noqa: E402

CORPUS = 50_000
RETRIEVED, KEPT = 20, 8
BATCH = 50
WORDS = ("refund policy annual plan warranty hardware customer support invoice renewal "
         "contract clause exception region tier enterprise premium shipping return window "
         "days purchase receipt account billing cancel subscription upgrade downgrade credit "
         "eligible approval manager escalation ticket priority response document section").split()


def corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(CORPUS):
        words = rng.choices(WORDS, k=95)
        out.append(f"[doc {i // 20} §{i % 20}] " + " ".join(words)[:585] + ".")
    return out


def template_parts() -> tuple[str, str]:
    head = ("You are a support assistant for an enterprise software vendor. Answer the question "
            "using only the numbered context passages below. Cite the passages you used by "
            "their number in square brackets. If the passages disagree, prefer the newest "
            "canonical source and say that a conflict exists. If the answer is not in the "
            "context, say you do not know. Keep the answer under 120 words. ") * 2
    tail = ("\n\nRemember: cite passage numbers, do not invent policies, and mention every "
            "exception or regional constraint that applies to the customer's plan.\n")
    return head, tail


def requests_of(n: int, seed: int) -> list[tuple[list[int], list[int], str]]:
    """Per request: 20 retrieved chunk indices (Zipf-skewed), the 8 kept, the question."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(n):
        chosen: list[int] = []
        while len(chosen) < RETRIEVED:
            k = int(rng.zipf(1.3)) - 1
            if k < CORPUS and k not in chosen:
                chosen.append(k if rng.random() < 0.7 else int(rng.integers(CORPUS)))
            chosen = list(dict.fromkeys(chosen))
        out.append((chosen, chosen[:KEPT], f"Question {r}: what is the refund window for plan {r % 97}?"))
    return out


def build_batches(run: str, n: int, seed: int) -> tuple[list[bytes], int]:
    texts = corpus(seed)
    head, tail = template_parts()
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"bench-{run}"}),
                              span_limits=SpanLimits(max_attributes=1024))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    batches: list[bytes] = []
    n_spans = 0
    for i, (retrieved, kept, question) in enumerate(requests_of(n, seed)):
        prompt_parts = [head]
        offsets = []
        pos = len(head)
        for slot, k in enumerate(kept):
            block = f"\n[{slot + 1}] {texts[k]}"
            offsets.append((pos + 5, pos + len(block)))
            prompt_parts.append(block)
            pos += len(block)
        prompt_parts += [tail, question]
        prompt = "".join(prompt_parts)
        with tracer.start_as_current_span("rag.request"):
            if run == "own":
                with tracer.start_as_current_span("retrieve"):
                    pass
                with tracer.start_as_current_span("llm.chat") as llm:
                    record_request(llm, own_record(texts, retrieved, kept, question, prompt, offsets))
            else:
                openinference_spans(tracer, texts, retrieved, kept, prompt)
        if (i + 1) % BATCH == 0 or i + 1 == n:
            spans = memory.get_finished_spans()
            n_spans += len(spans)
            batches.append(encode_spans(spans).SerializeToString())
            memory.clear()
    return batches, n_spans


def own_record(texts: list[str], retrieved: list[int], kept: list[int], question: str,
               prompt: str, offsets: list[tuple[int, int]]) -> RagRecord:
    chunks = []
    for rank, k in enumerate(retrieved, start=1):
        in_prompt = k in kept
        chunks.append(Chunk(f"c{k}", stage="in_prompt" if in_prompt else "dropped",
                            drop_reason=None if in_prompt else "budget", source_id=f"doc{k // 20}",
                            source_position=k % 20, retrieval_rank=rank,
                            retrieval_score=1.0 - rank / 100, rerank_rank=kept.index(k) + 1 if in_prompt else None,
                            label="direct_answer" if rank == 1 else "supporting_background",
                            text=texts[k]))
    placements = tuple(Placement(f"c{k}", slot, cs // 4, ce // 4, cs, ce)
                       for slot, (k, (cs, ce)) in enumerate(zip(kept, offsets)))
    return RagRecord(question=question, answer="Annual plans can be refunded within 14 days [1].",
                     model="bench-model", template_id="support", template_version="v3",
                     strategy="score_order", prompt_tokens=len(prompt) // 4,
                     prompt_chars=len(prompt), chunks=tuple(chunks), placements=placements)


def openinference_spans(tracer: Any, texts: list[str], retrieved: list[int], kept: list[int],
                        prompt: str) -> None:
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        for i, k in enumerate(retrieved):
            span.set_attribute(f"retrieval.documents.{i}.document.id", f"c{k}")
            span.set_attribute(f"retrieval.documents.{i}.document.content", texts[k])
            span.set_attribute(f"retrieval.documents.{i}.document.score", 1.0 - i / 100)
    with tracer.start_as_current_span("rerank") as span:
        span.set_attribute("openinference.span.kind", "RERANKER")
        for i, k in enumerate(kept):
            span.set_attribute(f"reranker.output_documents.{i}.document.id", f"c{k}")
            span.set_attribute(f"reranker.output_documents.{i}.document.content", texts[k])
            span.set_attribute(f"reranker.output_documents.{i}.document.score", 0.9 - i / 100)
    with tracer.start_as_current_span("llm") as span:
        span.set_attribute("openinference.span.kind", "LLM")
        span.set_attribute("llm.model_name", "bench-model")
        span.set_attribute("llm.input_messages.0.message.role", "user")
        span.set_attribute("llm.input_messages.0.message.content", prompt)
        span.set_attribute("llm.output_messages.0.message.content", "Within 14 days [1].")


# --- the sender process ------------------------------------------------------------------

def send_all(path: str, host: str, port: int, connections: int, out: Any,
             rate: float | None = None) -> None:
    """Send every batch over ``connections`` keep-alive connections: as fast as the
    collector answers, or with ``rate``, batch i no sooner than i / rate batches a second
    after the first (a steady load below the collector's limit)."""
    with open(path, "rb") as f:
        batches: list[bytes] = pickle.load(f)
    lock = threading.Lock()
    next_index = [0]
    failures: list[str] = []
    retries = [0]

    def worker() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(batches):
                break
            if rate is not None and (wait := first + i / rate - time.time()) > 0:
                time.sleep(wait)
            while True:
                conn.request("POST", "/v1/traces", body=batches[i],
                             headers={"content-type": "application/x-protobuf"})
                answer = conn.getresponse()
                answer.read()
                if answer.status in (429, 503):
                    with lock:
                        retries[0] += 1
                    time.sleep(float(answer.getheader("retry-after") or 1))
                    continue
                if answer.status != 200:
                    failures.append(f"batch {i}: HTTP {answer.status}")
                break
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    cpu = time.process_time()
    first = time.time()  # read by the workers, which start below
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last = time.time()
    # Acknowledged is not derived: wait as a reader would, with fresh=1.
    derived = None
    conn = http.client.HTTPConnection(host, port, timeout=120)
    while derived is None:
        conn.request("GET", "/api/v1/settings?fresh=1")
        answer = conn.getresponse()
        answer.read()
        if answer.status == 200:
            derived = time.time()
        elif answer.status != 503:  # a collector without the freshness wait: nothing to wait for
            derived = last
    # who derived the exports (a worker, or the writer thread while the workers were busy)
    # and in how many commits
    conn.request("GET", "/healthz")
    answer = conn.getresponse()
    body = answer.read()
    health = json.loads(body) if answer.status == 200 else {}
    derivation = health.get("derivation", {})
    split = (f"{derivation.get('exports_by_workers', '-')}/"
             f"{derivation.get('exports_derived_ahead', '-')}/{health.get('commits', '-')}")
    conn.close()
    out.put({"first": first, "last": last, "derived": derived, "failures": failures,
             "retries": retries[0], "sender_cpu_s": time.process_time() - cpu, "split": split})


# --- measuring ---------------------------------------------------------------------------

def decode_cost(batches: list[bytes], n_requests: int) -> tuple[float, float]:
    """Microseconds per request: protobuf parse + flatten + checks; then normalization."""
    from midtrace.collector.normalize.pipeline import normalize_trace
    from midtrace.collector.receive.bodies import check_spans
    from midtrace.collector.intake.otlp import parse_protobuf

    sample = batches[: max(1, len(batches) // 10)]
    per = n_requests / len(batches)
    started = time.perf_counter()
    checked = [check_spans(parse_protobuf(b)) for b in sample]
    decode = time.perf_counter() - started
    started = time.perf_counter()
    for check in checked:
        by_trace: dict[str, list[Any]] = {}
        for s in check.accepted:
            by_trace.setdefault(s.trace_id, []).append(s)
        for spans in by_trace.values():
            normalize_trace(spans)
    normalize = time.perf_counter() - started
    return decode / (len(sample) * per) * 1e6, normalize / (len(sample) * per) * 1e6


DECODE_COST = """
import json, pickle, sys, time
from typing import Any

{source}

with open(sys.argv[1], "rb") as f:
    batches = pickle.load(f)
print(json.dumps(decode_cost(batches, int(sys.argv[2]))))
"""


def decode_cost_of(python: str, checkout: Path, batch_file: Path, n_requests: int,
                   ) -> tuple[float, float]:
    """``decode_cost`` measured with ``checkout``'s code: run by its Python, in a process of
    its own (this process has imported this checkout's)."""
    script = DECODE_COST.format(source=inspect.getsource(decode_cost))
    done = subprocess.run([python, "-c", script, str(batch_file), str(n_requests)],
                          cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0:  # e.g. an older checkout without a module decode_cost imports
        raise SystemExit(f"measuring decode and normalize costs with {checkout}'s code "
                         f"failed:\n{done.stderr.strip()}")
    decode_us, normalize_us = json.loads(done.stdout.strip().splitlines()[-1])
    return decode_us, normalize_us


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (the collector's derive workers)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


def stat_cpu_seconds(stat: Path) -> float:
    """User + system CPU seconds in a /proc ``stat`` file (a process's or one thread's);
    0 for one that has exited."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process, its threads and its children."""
    return sum(stat_cpu_seconds(Path(f"/proc/{p}/stat")) for p in process_tree(pid))


# Where the collector's CPU goes, by the names its threads have in the OS
# (collector/storage/threads.py). The main thread runs the event loop: intake's checks, HTTP.
# Threads with no name of midtrace's are DuckDB's and Arrow's (and gRPC's, idle here); a
# checkout whose threads have no names shows its writer and appender there too.
PARTS = ("intake", "writer", "appender", "DuckDB & other", "workers")


def cpu_by_part(pid: int) -> dict[str, float]:
    """CPU seconds of the collector's threads and of its derive workers, by PARTS."""
    out = dict.fromkeys(PARTS, 0.0)
    for p in process_tree(pid):
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            if p != pid:
                part = "workers"
            elif task.name == str(pid):
                part = "intake"
            elif name in ("writer", "writer-dispatch") or name.startswith("feed-"):
                part = "writer"  # and the threads that hand its groups to the workers
            elif name == "appender":
                part = "appender"
            else:
                part = "DuckDB & other"
            out[part] += stat_cpu_seconds(task / "stat")
    return out


def peak_rss_mb_of(pid: int) -> float:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return float("nan")
    return next((int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM:")),
                float("nan"))


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory summed over the process and its children."""
    total = 0
    for p in process_tree(pid):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in lines if line.startswith("VmHWM:")), 0)
    return total / 1024 if total else float("nan")


def cached_batches(run: str, n: int, seed: int, cache: Path | None) -> tuple[list[bytes], int]:
    """The encoded batches, from ``cache`` when a previous run left them there."""
    path = cache / f"{run}-{n}-{seed}.pkl" if cache else None
    if path is not None and path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)  # type: ignore[no-any-return]
    batches, n_spans = build_batches(run, n, seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump((batches, n_spans), f)
    return batches, n_spans


def run_once(run: str, n: int, connections: int, queue_size: int, seed: int,
             workdir: Path, cache: Path | None = None, checkout: Path = ROOT,
             label: str = "this checkout", derive_workers: int | None = None,
             into: Path | None = None, engine: str = "duckdb",
             memory_limit: str | None = None, rate: float | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    batches, n_spans = cached_batches(run, n, seed, cache)
    print(f"[{run}] built {len(batches)} batches, {n_spans} spans, "
          f"{sum(map(len, batches)) / 1e6:.0f} MB in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    batch_file = workdir / f"{run}.batches"
    with open(batch_file, "wb") as f:
        pickle.dump(batches, f)
    del batches
    python = sys.executable if checkout == ROOT else str(checkout / ".venv" / "bin" / "python")
    decode_us, normalize_us = decode_cost_of(python, checkout, batch_file, n)
    db = workdir / f"{run}-{re.sub(r'[^A-Za-z0-9]+', '-', label)}.duckdb"
    if db.is_dir():  # a chdb folder from an earlier repeat
        shutil.rmtree(db)
    db.unlink(missing_ok=True)
    store = f"chdb://{db}" if engine == "chdb" else str(db)  # chdb: a folder
    base_size, base_counts = 0, (0, 0)
    if into is not None:  # a file that already holds many requests (e.g. bench/views.py's)
        shutil.copyfile(into, db)
        # on disk before the collector starts: the kernel would otherwise write the copy's
        # half a gigabyte back while the run is measured, and every commit's sync waits on it
        with open(db, "rb+") as copy:
            os.fsync(copy.fileno())
        base_size = db.stat().st_size
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            base_counts = (conn.execute("SELECT count(*) FROM spans").fetchone()[0],  # type: ignore[index]
                           conn.execute("SELECT count(*) FROM requests").fetchone()[0])  # type: ignore[index]
    collector = subprocess.Popen(
        [python, "-m", "midtrace", "collector", "--store", store, "--http-port", "0",
         "--grpc-port", "0", "--queue-size", str(queue_size)]
        + ([] if derive_workers is None else ["--derive-workers", str(derive_workers)])
        + ([] if memory_limit is None else ["--memory-limit", memory_limit]),
        cwd=checkout, stdout=subprocess.PIPE, text=True)
    assert collector.stdout is not None
    line = collector.stdout.readline()
    match = re.search(r"http://([\d.]+):(\d+)", line)
    assert match, f"collector did not start: {line!r}"
    host, port = match[1], int(match[2])
    # start-up (migrations, the derive workers' imports) is not ingest: count from here
    collector_cpu_at_start = cpu_seconds(collector.pid)
    parts_at_start = cpu_by_part(collector.pid)
    results: Any = mp.get_context("spawn").Queue()
    sender = mp.get_context("spawn").Process(
        target=send_all, args=(str(batch_file), host, port, connections, results,
                               None if rate is None else rate / BATCH))
    sender.start()
    outcome = results.get()
    sender.join()
    rss = peak_rss_mb(collector.pid)
    print(f"[{run}] peak RSS MB per process: " + ", ".join(
        f"{p}: {peak_rss_mb_of(p):.0f}" for p in process_tree(collector.pid)), file=sys.stderr)
    collector_cpu = cpu_seconds(collector.pid) - collector_cpu_at_start
    parts = {k: v - parts_at_start[k] for k, v in cpu_by_part(collector.pid).items()}
    collector.terminate()
    collector.wait(60)
    stored_spans, stored_requests = stored_counts(store)
    stored_spans -= base_counts[0]
    stored_requests -= base_counts[1]
    size = (sum(f.stat().st_size for f in db.rglob("*") if f.is_file()) if engine == "chdb" else
            sum(p.stat().st_size for p in workdir.glob(db.name + "*"))) - base_size
    seconds = outcome["last"] - outcome["first"]
    derived_seconds = outcome["derived"] - outcome["first"]
    return {
        "run": run, "checkout": label, "load": os.getloadavg()[0], "requests": n, "spans": n_spans, "stored_spans": stored_spans,
        "request_rows": stored_requests, "seconds": seconds, "requests_per_s": n / seconds,
        "derived_seconds": derived_seconds, "derived_per_s": n / derived_seconds,
        "collector_cpu_ms_per_request": collector_cpu / n * 1000,
        "sender_cpu_ms_per_request": outcome["sender_cpu_s"] / n * 1000,
        "spans_per_s": n_spans / seconds, "decode_us": decode_us, "normalize_us": normalize_us,
        "peak_rss_mb": rss, "db_bytes_per_request": size / n, "retries": outcome["retries"],
        "failures": outcome["failures"], "split": outcome["split"],
        "cpu_parts_ms_per_request": {k: v / n * 1000 for k, v in parts.items()},
    }


COUNTS = """
import sys
from midtrace.collector.settings import parse_store
from midtrace.collector.storage import clickhouse
from midtrace.collector.storage.store import connect
store = parse_store(sys.argv[1])
if isinstance(store, clickhouse.ClickHouseURL):
    row = clickhouse.connect(store).query(
        "SELECT (SELECT uniqExact(trace_id, span_id) FROM spans), (SELECT count() FROM requests)"
    ).to_pylist()[0]
    print(*row.values())
else:
    with connect(store, read_only=True) as conn:
        print(*conn.execute("SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM requests)").fetchone())
"""


def stored_counts(store: str) -> tuple[int, int]:
    """Spans and requests in the store, counted in a process of its own (chdb holds a folder
    in one process only)."""
    out = subprocess.run([sys.executable, "-c", COUNTS, store], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]), int(out[1])


def phoenix_spans(url: str) -> int:
    """Spans a running Phoenix has stored, over all its projects (its GraphQL API)."""
    import urllib.request

    query = json.dumps({"query": "{ projects { edges { node { recordCount } } } }"}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/graphql", data=query,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        edges = json.load(answer)["data"]["projects"]["edges"]
    return sum(int(e["node"]["recordCount"]) for e in edges)


def phoenix_once(run: str, n: int, connections: int, seed: int, workdir: Path, url: str,
                 pid: int | None, cache: Path | None = None) -> dict[str, Any]:
    """The same batches sent to a running Phoenix (installed in its own venv, never in this
    project's lock): acknowledged, then stored (its span count reaches what was sent)."""
    from urllib.parse import urlsplit

    batches, n_spans = cached_batches(run, n, seed, cache)
    batch_file = workdir / f"{run}.batches"
    with open(batch_file, "wb") as f:
        pickle.dump(batches, f)
    del batches
    before = phoenix_spans(url)
    cpu_before = cpu_seconds(pid) if pid else 0.0
    parts = urlsplit(url)
    results: Any = mp.get_context("spawn").Queue()
    sender = mp.get_context("spawn").Process(
        target=send_all, args=(str(batch_file), parts.hostname, parts.port, connections, results))
    sender.start()
    outcome = results.get()
    sender.join()
    stored = before
    deadline = time.time() + 600
    while stored < before + n_spans and time.time() < deadline:
        time.sleep(0.2)
        stored = phoenix_spans(url)
    derived = time.time()
    seconds = outcome["last"] - outcome["first"]
    cpu = (cpu_seconds(pid) - cpu_before) if pid else float("nan")
    return {
        "run": run, "checkout": "Phoenix", "load": os.getloadavg()[0], "requests": n,
        "spans": n_spans, "stored_spans": stored - before, "request_rows": 0,
        "seconds": seconds, "requests_per_s": n / seconds,
        "derived_seconds": derived - outcome["first"], "derived_per_s": n / (derived - outcome["first"]),
        "collector_cpu_ms_per_request": cpu / n * 1000,
        "sender_cpu_ms_per_request": outcome["sender_cpu_s"] / n * 1000,
        "spans_per_s": n_spans / seconds, "decode_us": float("nan"), "normalize_us": float("nan"),
        "peak_rss_mb": peak_rss_mb(pid) if pid else float("nan"), "db_bytes_per_request": float("nan"),
        "retries": outcome["retries"], "failures": outcome["failures"],
    }


def profile(run: str, n: int, seed: int, workdir: Path) -> None:
    """cProfile of parse -> check -> store.write, in this process, for finding hot spots."""
    import cProfile
    import pstats

    from midtrace.collector.receive.bodies import check_spans
    from midtrace.collector.storage.store import Store, WriteJob
    from midtrace.collector.intake.otlp import parse_protobuf

    batches, _ = build_batches(run, n, seed)
    store = Store.open(workdir / f"profile-{run}.duckdb")
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    group: list[WriteJob] = []
    for body in batches:
        group.append(WriteJob(spans=check_spans(parse_protobuf(body)).accepted))
        if len(group) == 20:
            store.write(group)
            group = []
    if group:
        store.write(group)
    prof.disable()
    elapsed = time.perf_counter() - started
    store.close()
    print(f"{n / elapsed:.0f} requests/s in-process (one thread, no HTTP)")
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--run", choices=["own", "openinference", "both"], default="both")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--queue-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", choices=["own", "openinference"])
    parser.add_argument("--cache", type=Path, help="keep the encoded batches here between runs")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout (with its own .venv) to run alternately with this "
                             "one, e.g. a worktree of the previous release")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each checkout, alternating")
    parser.add_argument("--phoenix", metavar="URL",
                        help="also send the same batches to a running Arize Phoenix, e.g. "
                             "http://127.0.0.1:6006, alternating with midtrace")
    parser.add_argument("--derive-workers", type=lambda v: [int(x) for x in v.split(",")],
                        help="run this checkout once per value of the collector's "
                             "--derive-workers, alternating, e.g. 0,1")
    parser.add_argument("--memory-limits", type=lambda v: [None if x == "none" else x
                                                           for x in v.split(",")],
                        help="run this checkout once per value of the collector's "
                             "--memory-limit, alternating; none: DuckDB's default, "
                             "e.g. none,256MB")
    parser.add_argument("--into", type=Path,
                        help="start every run from a copy of this store, e.g. the 1M-request "
                             "file bench/views.py builds, to see how a full file slows ingest")
    parser.add_argument("--and-empty", action="store_true",
                        help="with --into: run each checkout also into an empty file, "
                             "alternating, and print the ratio (the issue's bound: into a "
                             "1M-request file no more than 10%% slower)")
    parser.add_argument("--phoenix-pid", type=int, help="Phoenix's process id, for its CPU and RSS")
    parser.add_argument("--rate", type=float,
                        help="offer this many requests/s, steadily, instead of as many as the "
                             "collector takes: CPU per request below the collector's limit, and "
                             "whether derivation keeps up (derived s close to acked s)")
    parser.add_argument("--chdb", action="store_true",
                        help="also run a collector on a chdb folder (ClickHouse in-process), "
                             "alternating with the DuckDB one")
    args = parser.parse_args()
    if args.and_empty and args.into is None:
        parser.error("--and-empty compares runs into --into FILE with runs into an empty file: "
                     "give --into")
    with tempfile.TemporaryDirectory(prefix="midtrace-bench-") as tmp:
        if args.profile:
            profile(args.profile, args.requests, args.seed, Path(tmp))
            return
        runs = ["own", "openinference"] if args.run == "both" else [args.run]
        # (checkout, label, --derive-workers, engine, --memory-limit)
        checkouts: list[tuple[Path, str, int | None, str, str | None]] = [
            (ROOT, "this checkout", None, "duckdb", None)]
        if args.derive_workers:
            checkouts = [(ROOT, f"{w} derive workers", w, "duckdb", None)
                         for w in args.derive_workers]
        if args.memory_limits:
            checkouts = [(ROOT, f"memory limit {m or 'none'}", None, "duckdb", m)
                         for m in args.memory_limits]
        if args.baseline:  # with --derive-workers, the baseline runs with each count too
            checkouts += [(args.baseline.resolve(),
                           "baseline" if w is None else f"baseline, {w} derive workers", w,
                           "duckdb", None)
                          for w in (args.derive_workers or [None])]
        if args.chdb:
            checkouts.append((ROOT, "chdb", None, "chdb", None))
        into: dict[str, Path | None] = {label: args.into for _, label, *_ in checkouts}
        if args.and_empty:  # each checkout into the file, then into an empty one
            named = f"into {args.into.name}"
            checkouts = [(c, f"{label}, {tag}", *rest) for c, label, *rest in checkouts
                         for tag in (named, "empty file")]
            into = {label: args.into if label.endswith(named) else None
                    for _, label, *_ in checkouts}
        results = []
        for r in runs:
            for k in range(args.repeats):  # A, B, A, B: the two compared under the same load
                # A seed per repeat: Phoenix keeps a span id once, so a repeated batch would
                # cost it nothing; every checkout of a repeat gets the same batches.
                seed = args.seed + k
                for checkout, label, workers, engine, limit in checkouts:
                    results.append(run_once(r, args.requests, args.connections, args.queue_size,
                                            seed, Path(tmp), args.cache, checkout, label, workers,
                                            into[label], engine, limit, args.rate))
                if args.phoenix:
                    results.append(phoenix_once(r, args.requests, args.connections, seed,
                                                Path(tmp), args.phoenix, args.phoenix_pid,
                                                args.cache))
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"{args.connections} connections, queue size {args.queue_size}"
          + (f", {args.rate:.0f} requests/s offered" if args.rate else "") + "\n")
    print("| run | checkout | load | requests | spans | acked s | acked requests/s | derived s | derived requests/s "
          "| collector CPU ms/req | sender CPU ms/req | decode µs/req | normalize µs/req "
          "| peak RSS MB | DB bytes/req | 503 retries | request rows | exports by workers/ahead/commits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['run']} | {r['checkout']} | {r['load']:.1f} | {r['requests']} | {r['spans']} | "
              f"{r['seconds']:.1f} | "
              f"{r['requests_per_s']:.0f} | {r['derived_seconds']:.1f} | {r['derived_per_s']:.0f} | "
              f"{r['collector_cpu_ms_per_request']:.2f} | {r['sender_cpu_ms_per_request']:.2f} | "
              f"{r['decode_us']:.0f} | "
              f"{r['normalize_us']:.0f} | {r['peak_rss_mb']:.0f} | {r['db_bytes_per_request']:.0f} | "
              f"{r['retries']} | {r['request_rows']} | {r.get('split', '-')} |")
        if r["failures"] or r["stored_spans"] != r["spans"]:
            print(f"  ! {r['run']}: {len(r['failures'])} failed batches, "
                  f"{r['stored_spans']} of {r['spans']} spans stored")
    parted = [r for r in results if "cpu_parts_ms_per_request" in r]
    if parted:
        print("\ncollector CPU by part, ms per request (and % of one core while deriving):\n")
        print("| run | checkout | " + " | ".join(PARTS) + " |")
        print("|---|---|" + "---|" * len(PARTS))
        for r in parted:
            cells = []
            for part in PARTS:
                ms = r["cpu_parts_ms_per_request"][part]
                busy = ms * r["requests"] / 1000 / r["derived_seconds"] * 100
                cells.append(f"{ms:.2f} ({busy:.0f}%)")
            print(f"| {r['run']} | {r['checkout']} | " + " | ".join(cells) + " |")
    first = checkouts[0][1]
    others = [label for _, label, *_ in checkouts[1:]] + (["Phoenix"] if args.phoenix else [])
    for other in others:
        print(f"\nratio {first} / {other} (mean of the alternating runs):")
        for run in runs:
            for key in ("requests_per_s", "derived_per_s", "collector_cpu_ms_per_request",
                        "peak_rss_mb"):
                mine = [r[key] for r in results if r["run"] == run and r["checkout"] == first]
                base = [r[key] for r in results if r["run"] == run and r["checkout"] == other]
                if mine and base:
                    a, b = sum(mine) / len(mine), sum(base) / len(base)
                    print(f"  {run} {key}: {a:.2f} / {b:.2f} = {a / b:.2f}")


if __name__ == "__main__":
    main()
