"""Benchmark a ClickHouse store (chdb, in-process) against a DuckDB file: ingest and the views.

    python bench/clickhouse.py [--repeats 2] [--copies 1] [--requests 1000000]
                               [--work /tmp/midtrace-chbench] [--rebuild] [--only ingest|views]

1. Ingest: the bundled samples (tests/clickhouse_samples.py ``sample_files()``), repeated
   COPIES times with fresh trace ids (rewritten in the JSON text), through ``ingest_files``
   into a fresh DuckDB ``Store`` and a fresh ``ClickHouseStore`` on a chdb folder, alternating
   DuckDB, chdb, DuckDB, chdb (REPEATS pairs), each run in its own process. Per run: requests,
   seconds, requests/s, bytes on disk per request (DuckDB: the file after close; chdb: the
   active parts' ``bytes_on_disk`` from system.parts, and ``du`` of the folder beside it).
2. Views: REQUESTS synthetic requests built in DuckDB by bench/views.py's ``build()``, copied
   into chdb through Parquet as the view tests do (``copy_tables``), then request_evidence
   computed by ClickHouse; then every metric view, ungrouped and by week, median of 3, on each
   engine in its own process (chdb opens one folder per process).

The machine may be shared: the load average (1 min) is printed beside every figure; compare
runs as ratios. The DuckDB file and the chdb folder of step 2 are kept in WORK and reused
unless --rebuild.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.views import build, timed  # noqa: E402
from midtrace.collector.intake.ingest import ingest_files, read_text  # noqa: E402
from midtrace.collector.query import reads  # noqa: E402
from midtrace.collector.query.reads import Filters  # noqa: E402
from midtrace.collector.settings import parse_store  # noqa: E402
from midtrace.collector.storage import clickhouse  # noqa: E402
from midtrace.collector.storage.clickhouse_store import ClickHouseStore  # noqa: E402
from midtrace.collector.storage.store import Store, connect  # noqa: E402
from tests.clickhouse_samples import copy_tables, sample_files  # noqa: E402

TRACE_ID = re.compile(r'("(?:traceId|trace_id)"\s*:\s*")([0-9a-f]{8})([0-9a-f]{24}")')
REPEAT = 3


def load() -> float:
    return os.getloadavg()[0]


def du(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def chdb_parts_bytes(conn: clickhouse.Connection) -> int:
    return int(conn.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE active "
                          "AND database = currentDatabase()").column(0)[0].as_py() or 0)


def write_copies(folder: Path, copies: int) -> list[Path]:
    """The sample files COPIES times, copy k's trace ids starting with k in hex (copy 0 is the
    samples as they are); every span file first, then the outcome files."""
    spans, outcomes = [], []
    for k in range(copies):
        for path in sample_files():
            text, _ = read_text(path)  # the samples: every line readable
            if k:
                text = TRACE_ID.sub(lambda m: f"{m[1]}{k:08x}{m[3]}", text)
            out = folder / f"{k}-{path.name.removesuffix('.gz')}"
            out.write_text(text)
            (outcomes if path.suffix == ".json" else spans).append(out)
    return spans + outcomes


def ingest_run(engine: str, target: Path, inputs: list[Path]) -> dict[str, object]:
    if engine == "duckdb":
        store = Store.open(target)
    else:
        store = ClickHouseStore.open(parse_store(f"chdb://{target}"))  # type: ignore[arg-type]
    started = time.perf_counter()
    report = ingest_files(store, inputs)
    seconds = time.perf_counter() - started
    if engine == "duckdb":
        requests = store.conn.execute("SELECT count(*) FROM requests").fetchone()[0]  # type: ignore[union-attr]
        store.close()
        size, du_size = target.stat().st_size, None
    else:
        conn = store.conn  # type: ignore[union-attr]
        requests = conn.query("SELECT count() FROM requests").column(0)[0].as_py()
        size, du_size = chdb_parts_bytes(conn), du(target)
    return {"requests": requests, "written": report.requests, "refused": len(report.refused),
            "seconds": seconds, "bytes": size, "du": du_size, "load": load()}


def measure(engine: str, db: Path, folder: Path) -> dict[str, object]:
    if engine == "duckdb":
        conn = connect(db, read_only=True)
        count = conn.cursor().execute("SELECT count(*) FROM request_evidence").fetchone()[0]  # type: ignore[index]
        conn = conn.cursor()
    else:
        conn = clickhouse.connect(parse_store(f"chdb://{folder}"))  # type: ignore[arg-type]
        count = conn.query("SELECT count() FROM request_evidence").column(0)[0].as_py()
    rows = {}
    for name in reads.metric_views():
        plain = timed(lambda: reads.run_view(conn, name), REPEAT)
        weekly = timed(lambda: reads.run_view(conn, name, Filters(), ["week"]), REPEAT)
        rows[name] = (plain, weekly, load())
    return {"evidence_rows": count, "rows": rows}


def prepare(db: Path, folder: Path, n: int) -> dict[str, float]:
    """The DuckDB file built (bench/views.py), or the chdb folder filled from it."""
    if folder == Path():
        return {**build(db, n), "load": load()}
    url = parse_store(f"chdb://{folder}")
    with tempfile.TemporaryDirectory(dir=folder.parent) as work:
        started = time.perf_counter()
        conn = copy_tables(db, url, Path(work))  # type: ignore[arg-type]
        copied, load_copied = time.perf_counter() - started, load()
    started = time.perf_counter()
    clickhouse.fill_request_evidence(conn)  # in request id ranges past clickhouse.FILL_BATCH requests
    return {"copy_s": copied, "load_copy": load_copied,
            "fill_evidence_s": time.perf_counter() - started, "load": load(),
            "parts_bytes": chdb_parts_bytes(conn)}


def phase(*args: str) -> dict:  # type: ignore[type-arg]
    run = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"phase {' '.join(args)} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def bench_ingest(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        inputs = write_copies(Path(tmp), args.copies)
        mb = sum(p.stat().st_size for p in inputs) / 1e6
        print(f"ingest: {len(inputs)} files ({mb:.1f} MB of JSON), the samples x {args.copies}; "
              "chdb size = active parts' bytes_on_disk (system.parts), du of the folder beside it")
        print(f"{'run':>3} {'engine':7} {'requests':>8} {'seconds':>8} {'req/s':>8} "
              f"{'bytes/req':>10} {'du/req':>8} {'load 1m':>7}")
        rates: dict[str, list[float]] = {"duckdb": [], "chdb": []}
        for i in range(args.repeats * 2):
            engine = ("duckdb", "chdb")[i % 2]
            target = Path(tmp) / f"run{i}" / ("store.duckdb" if engine == "duckdb" else "chdb")
            target.parent.mkdir()
            r = phase("--phase", "ingest", "--engine", engine, "--target", str(target), "--inputs",
                      json.dumps([str(p) for p in inputs]))
            shutil.rmtree(target.parent)
            rate = r["requests"] / r["seconds"]
            rates[engine].append(rate)
            per_du = f"{r['du'] / r['requests']:8.0f}" if r["du"] is not None else f"{'':>8}"
            print(f"{i + 1:>3} {engine:7} {r['requests']:>8,} {r['seconds']:8.2f} {rate:8.1f} "
                  f"{r['bytes'] / r['requests']:10.0f} {per_du} {r['load']:7.2f}"
                  + (f"  ({r['refused']} refused)" if r["refused"] else ""))
    duck, ch = statistics.mean(rates["duckdb"]), statistics.mean(rates["chdb"])
    print(f"mean requests/s: DuckDB {duck:.1f}, chdb {ch:.1f}; chdb/DuckDB = {ch / duck:.2f} "
          f"(load 1m now {load():.2f})")


def bench_views(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / f"views-{args.requests}.duckdb"
    folder = args.work / f"views-{args.requests}-chdb"
    n = str(args.requests)
    if args.rebuild or not db.exists():
        folder.with_suffix(".ready").unlink(missing_ok=True)
        b = phase("--phase", "prepare", "--db", str(db), "--requests", n)
        print(f"DuckDB build of {args.requests:,} requests: generate {b['generate_s']:.1f} s, "
              f"request_evidence {b['rebuild_evidence_s']:.1f} s (load 1m {b['load']:.2f})")
    ready = folder.with_suffix(".ready")
    if not ready.exists():
        shutil.rmtree(folder, ignore_errors=True)
        c = phase("--phase", "prepare", "--db", str(db), "--folder", str(folder), "--requests", n)
        ready.touch()
        batches = "at once" if args.requests <= clickhouse.FILL_BATCH else f"in ranges of {clickhouse.FILL_BATCH:,} ids"
        print(f"chdb copy through Parquet {c['copy_s']:.1f} s (load 1m {c['load_copy']:.2f}), "
              f"request_evidence filled {batches} {c['fill_evidence_s']:.1f} s "
              f"(load 1m {c['load']:.2f})")
    m = {e: phase("--phase", "measure", "--engine", e, "--db", str(db), "--folder", str(folder))
         for e in ("duckdb", "chdb")}
    print(f"stores: DuckDB file {db.stat().st_size / 1e6:.0f} MB, chdb active parts "
          f"{m['chdb']['parts_bytes'] / 1e6:.0f} MB (du {du(folder) / 1e6:.0f} MB); "
          f"request_evidence rows {m['duckdb']['evidence_rows']:,} / {m['chdb']['evidence_rows']:,}")
    print(f"seconds, median of {REPEAT}; load 1m after each view in each engine's process")
    print(f"{'view':34} {'DuckDB s':>9} {'CH s':>8} {'CH/Duck':>7}   {'week:':>5} "
          f"{'DuckDB s':>8} {'CH s':>8} {'CH/Duck':>7}  {'load D/CH':>10}")
    for name, (dp, dw, dl) in m["duckdb"]["rows"].items():
        cp, cw, cl = m["chdb"]["rows"][name]
        print(f"{name:34} {dp:9.3f} {cp:8.3f} {cp / dp:7.1f}   {'':>5} {dw:8.3f} {cw:8.3f} "
              f"{cw / dw:7.1f}  {dl:4.2f}/{cl:4.2f}")
    tot = [sum(r[i] for r in m[e]["rows"].values()) for e in ("duckdb", "chdb") for i in (0, 1)]
    print(f"{'all views':34} {tot[0]:9.3f} {tot[2]:8.3f} {tot[2] / tot[0]:7.1f}   {'':>5} "
          f"{tot[1]:8.3f} {tot[3]:8.3f} {tot[3] / tot[1]:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/midtrace-chbench"))
    parser.add_argument("--rebuild", action="store_true", help="build the view stores again")
    parser.add_argument("--only", choices=["ingest", "views"])
    for hidden in ("--phase", "--engine", "--target", "--inputs", "--db", "--folder"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "ingest":
        print(json.dumps(ingest_run(args.engine, Path(args.target),
                                    [Path(p) for p in json.loads(args.inputs)])))
    elif args.phase == "prepare":
        print(json.dumps(prepare(Path(args.db), Path(args.folder or ""), args.requests)))
    elif args.phase == "measure":
        out = measure(args.engine, Path(args.db), Path(args.folder))
        if args.engine == "chdb":
            out["parts_bytes"] = chdb_parts_bytes(clickhouse.connect(
                parse_store(f"chdb://{args.folder}")))  # type: ignore[arg-type]
        print(json.dumps(out))
    else:
        if args.only != "views":
            bench_ingest(args)
        if args.only != "ingest":
            bench_views(args)


if __name__ == "__main__":
    main()
