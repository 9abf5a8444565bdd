"""Benchmark the dashboard's views on a synthetic database of a million requests.

    python bench/views.py [--db /tmp/midtrace-bench.duckdb] [--requests 1000000] [--rebuild]

Builds (once) a file database of REQUESTS requests with 20 chunk rows each, written
straight into the tables with DuckDB SQL (fast; this is a benchmark, not a test), about a
third of them graded, then fills request_evidence the way the store does on open. Then, in a
fresh process, times every metric view ungrouped and grouped by week (median of 5), the
request list, one trace, the facets, and the writer's per-commit refresh of a small batch,
and prints a table with the peak RSS of each phase.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from midtrace.collector.storage.store import Store, connect, refresh_evidence  # noqa: E402
from midtrace.collector.query import reads  # noqa: E402
from midtrace.collector.query.reads import Filters  # noqa: E402

CHUNKS_PER_REQUEST = 20

GENERATE = """
INSERT INTO requests BY NAME
SELECT
    i AS request_id,
    md5(CAST(i AS VARCHAR)) AS trace_id,
    TIMESTAMPTZ '2026-08-03 00:00:00+00' + to_microseconds(CAST(i * (91 * 86400e6 / $n) AS BIGINT)) AS time,
    ['support-bot', 'billing-bot', 'search'][1 + i % 3] AS service,
    ['gpt-large', 'gpt-mini', 'claude-x', 'local-8b'][1 + (i // 3) % 4] AS model,
    ['policy-qa', 'cards', 'plain'][1 + (i // 7) % 3] AS template_id,
    'v1' AS template_version,
    ['score_order', 'edge', 'long_context_reorder', 'reverse', 'doc_order_within_source'][1 + (i // 11) % 5] AS strategy,
    CASE WHEN i % 10 = 0 THEN 'sweep-' || (i // 100000) END AS experiment_id,
    CASE WHEN i % 10 = 0 THEN ['absent', 'start', 'middle', 'end', 'start_end'][1 + (i // 10) % 5] END AS condition,
    CASE WHEN i % 10 = 0 THEN 'case-' || (i // 50) END AS case_id,
    'question ' || i AS question,
    'answer ' || (hash(i) % 3) AS answer,
    (hash(i * 3) % 100) / 100.0 AS confidence,
    CASE WHEN i % 4 = 0 THEN ['r' || (i % 5)] END AS cited_ids,
    1000 + hash(i * 5) % 90000 AS prompt_tokens,
    false AS tokens_estimated,
    'midtrace' AS convention
FROM range(1, $n + 1) t(i);

INSERT INTO chunks BY NAME
SELECT
    r.request_id,
    'c' || ((r.request_id * 31 + j) % 200000) AS chunk_id,
    j AS ordinal,
    CASE WHEN j < r.k THEN 'in_prompt' WHEN j < r.k + 3 THEN 'dropped' ELSE 'retrieved' END AS stage,
    CASE WHEN j >= r.k AND j < r.k + 3 THEN 'budget' END AS drop_reason,
    's' || ((r.request_id * 31 + j) % 5000) AS source_id,
    j AS source_position,
    j + 1 AS retrieval_rank,
    1.0 - j / 20.0 AS retrieval_score,
    CASE
        WHEN j = r.d THEN 'direct_answer'
        WHEN j = (r.d + 3) % 20 AND r.request_id % 3 = 0 THEN 'exception_constraint'
        WHEN j % 4 = 0 THEN 'conflicting'
        ELSE 'supporting_background'
    END AS label,
    CASE WHEN (r.request_id + j) % 10 = 0 THEN 'deprecated' ELSE 'canonical' END AS authority,
    CASE WHEN r.request_id % 10 = 0 THEN j = r.d END AS decisive,
    (j = r.d AND r.request_id % 5 < 3) OR (j <> r.d AND hash(r.request_id * 20 + j) % 20 = 0) AS cited
FROM (
    SELECT request_id, 5 + hash(request_id) % 11 AS k, hash(request_id * 7) % 20 AS d
    FROM requests
) r, range(0, 20) c(j);

INSERT INTO placements BY NAME
SELECT
    c.request_id,
    c.chunk_id,
    (c.ordinal + c.request_id) % r.k AS prompt_index,
    CAST(((c.ordinal + c.request_id) % r.k) * (r.prompt_tokens // r.k) AS INTEGER) AS token_start,
    CAST(((c.ordinal + c.request_id) % r.k + 1) * (r.prompt_tokens // r.k) AS INTEGER) AS token_end
FROM chunks c
JOIN (SELECT request_id, prompt_tokens, 5 + hash(request_id) % 11 AS k FROM requests) r USING (request_id)
WHERE c.stage = 'in_prompt';

INSERT INTO outcomes BY NAME
SELECT
    row_number() OVER () AS outcome_id,
    trace_id,
    'api' AS origin,
    time + INTERVAL 1 HOUR AS time,
    time + INTERVAL 1 HOUR AS received_at,
    hash(request_id * 11) % 10 < 7 AS correct,
    CASE WHEN request_id % 6 = 0 THEN ['limit', 'prerequisite'] END AS required_constraints,
    CASE WHEN request_id % 6 = 0 THEN (CASE WHEN request_id % 12 = 0 THEN ['limit'] ELSE ['limit', 'prerequisite'] END) END
        AS recalled_constraints
FROM requests
WHERE request_id % 3 = 0 OR experiment_id IS NOT NULL;
"""


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(db: Path, n: int) -> dict[str, float]:
    if db.exists():
        db.unlink()
    store = Store.open(db)
    conn = store.conn
    started = time.perf_counter()
    conn.execute("BEGIN TRANSACTION")
    for statement in GENERATE.split(";\n"):
        if statement.strip():
            conn.execute(statement, {"n": n} if "$n" in statement else None)
    conn.execute("COMMIT")
    generated = time.perf_counter() - started
    conn.execute("DELETE FROM derived_state")
    store.close()
    started = time.perf_counter()
    Store.open(db).close()  # the store sees the stale definition and rebuilds request_evidence
    rebuilt = time.perf_counter() - started
    return {"generate_s": generated, "rebuild_evidence_s": rebuilt, "peak_rss_mb": peak_rss_mb()}


def timed(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(db: Path) -> dict[str, object]:
    conn = connect(db, read_only=True)
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
              for t in ("requests", "chunks", "placements", "outcomes", "request_evidence")}
    rows = []
    for name in reads.metric_views():
        cur = conn.cursor()
        plain = timed(lambda: reads.run_view(cur, name))
        weekly = timed(lambda: reads.run_view(cur, name, Filters(), ["week"]))
        filtered = timed(lambda: reads.run_view(cur, name, Filters(model="gpt-mini"), ["week", "strategy"]))
        rows.append((name, plain, weekly, filtered))
    cur = conn.cursor()
    some_trace = cur.execute("SELECT trace_id FROM requests WHERE request_id = (SELECT max(request_id) // 2 FROM requests)").fetchone()[0]  # type: ignore[index]
    extra = [
        ("requests (page 1)", timed(lambda: reads.run_requests(cur)), None, None),
        ("requests (class=buried, q)", timed(lambda: reads.run_requests(
            cur, Filters(service="search"), "question 4", "buried")), None, None),
        ("trace", timed(lambda: reads.run_trace(cur, some_trace)), None, None),
        ("facets", timed(lambda: reads.run_facets(cur)), None, None),
    ]
    conn.close()
    return {"counts": counts, "rows": rows + extra, "peak_rss_mb": peak_rss_mb()}


def refresh_cost(db: Path) -> dict[str, float]:
    """What the writer adds to each commit: refreshing request_evidence for 100 traces."""
    conn = connect(db)
    ids = [r[0] for r in conn.execute(
        "SELECT trace_id FROM requests ORDER BY request_id DESC LIMIT 100").fetchall()]
    old = [r[0] for r in conn.execute(
        "SELECT trace_id FROM requests WHERE request_id % 10000 = 7 LIMIT 100").fetchall()]
    out = {}
    for label, batch in (("recent", ids), ("spread", old)):
        times = []
        for _ in range(3):
            conn.execute("BEGIN TRANSACTION")
            started = time.perf_counter()
            refresh_evidence(conn, batch)
            times.append(time.perf_counter() - started)
            conn.execute("ROLLBACK")
        out[label] = statistics.median(times)
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/midtrace-bench.duckdb"))
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--rebuild", action="store_true", help="build the database again")
    parser.add_argument("--phase", choices=["build", "prepare", "measure", "refresh"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "build":
        print(json.dumps(build(args.db, args.requests)))
        return
    if args.phase == "prepare":
        started = time.perf_counter()
        Store.open(args.db).close()  # brings views and request_evidence up to date
        print(json.dumps({"open_s": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}))
        return
    if args.phase == "measure":
        print(json.dumps(measure(args.db)))
        return
    if args.phase == "refresh":
        print(json.dumps({**refresh_cost(args.db), "peak_rss_mb": peak_rss_mb()}))
        return

    def phase(name: str) -> dict:  # type: ignore[type-arg]
        out = subprocess.run([sys.executable, __file__, "--db", str(args.db), "--requests",
                              str(args.requests), "--phase", name],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]

    if args.rebuild or not args.db.exists():
        b = phase("build")
        print(f"built {args.db}: generate {b['generate_s']:.1f} s, request_evidence rebuild "
              f"{b['rebuild_evidence_s']:.1f} s, peak RSS {b['peak_rss_mb']:.0f} MB")
    p = phase("prepare")
    print(f"opened with the store in {p['open_s']:.1f} s (rebuilds request_evidence when its "
          f"definition changed), peak RSS {p['peak_rss_mb']:.0f} MB")
    load = Path("/proc/loadavg").read_text().split()[:3]
    m = phase("measure")
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    print(" ".join(f"{k}={v:,}" for k, v in m["counts"].items()))
    print(f"load average while measuring: {' '.join(load)} at the start, "
          f"{' '.join(load_end)} at the end (a shared machine: compare runs as ratios)")
    print(f"{'view':34} {'ungrouped':>10} {'by week':>10} {'filtered, by week+strategy':>27}")
    for name, plain, weekly, filtered in m["rows"]:
        cols = [f"{plain * 1000:8.0f}ms"] + [
            f"{v * 1000:8.0f}ms" if v is not None else f"{'':>10}" for v in (weekly, filtered)]
        print(f"{name:34} {cols[0]:>10} {cols[1]:>10} {cols[2]:>27}")
    print(f"peak RSS while querying: {m['peak_rss_mb']:.0f} MB")
    r = phase("refresh")
    print(f"writer refresh of 100 traces: recent {r['recent'] * 1000:.0f} ms, spread over the "
          f"history {r['spread'] * 1000:.0f} ms (peak RSS {r['peak_rss_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
