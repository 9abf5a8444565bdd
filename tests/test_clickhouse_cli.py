"""The offline commands on a ClickHouse store, each in a process of its own (chdb holds one
folder per process): ingest, rebuild, report, export, and prune's retention and erasure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.clickhouse_samples import SAMPLES


def midtrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "midtrace", *args], capture_output=True,
                          text=True, timeout=300)


TTLS = """
import sys
from midtrace.collector.settings import parse_store
from midtrace.collector.storage import clickhouse
conn = clickhouse.connect(parse_store(sys.argv[1]))
for row in conn.query("SELECT name, engine_full FROM system.tables "
                      "WHERE database = currentDatabase() AND engine_full LIKE '%TTL%' "
                      "AND NOT startsWith(name, 'scoped_')").to_pylist():
    print(row["name"], "|", row["engine_full"])
"""


def ttls(folder: Path) -> dict[str, str]:
    """Each table of the store with a TTL, and its engine's definition (not the copies a
    refresh of request_evidence reads, which keep an hour whatever the retention)."""
    run = subprocess.run([sys.executable, "-c", TTLS, f"chdb://{folder}"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    pairs = (line.split("|", 1) for line in run.stdout.splitlines() if "|" in line)
    return {name.strip(): engine.strip() for name, engine in pairs}


def sample_age_days(path: Path) -> int:
    """How many whole days ago the oldest span of the OTLP/JSON file ``path`` started."""
    starts = [int(span["startTimeUnixNano"])
              for line in path.read_text().splitlines() if line.strip()
              for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
              for span in ss["spans"]]
    return (time.time_ns() - min(starts)) // (86_400 * 10 ** 9)


def test_ingest_rebuild_report_and_retention_on_chdb(tmp_path: Path) -> None:
    store = f"chdb://{tmp_path}/store"
    ingested = midtrace("ingest", "--store", store, str(SAMPLES / "langchain_rag.jsonl"))
    assert ingested.returncode == 0, ingested.stderr
    assert "ingested" in ingested.stdout and "into chdb://" in ingested.stdout
    rebuilt = midtrace("rebuild", "--store", store)
    assert rebuilt.returncode == 0, rebuilt.stderr
    requests = int(ingested.stdout.split("(")[1].split()[0])
    assert f"rebuilt {requests} requests" in rebuilt.stdout
    report = midtrace("report", "--store", store, "--format", "json")
    assert report.returncode == 0, report.stderr
    # a trace exported from ClickHouse reads into a DuckDB file as the same request
    trace_ids = [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
                 for line in (SAMPLES / "langchain_rag.jsonl").read_text().splitlines()[:3]]
    exported = midtrace("export", "--store", store, *(a for t in trace_ids for a in ("--trace-id", t)))
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 3
    (tmp_path / "three.jsonl").write_text(exported.stdout)
    again = midtrace("ingest", "--store", str(tmp_path / "three.duckdb"), str(tmp_path / "three.jsonl"))
    assert again.returncode == 0 and "(3 request updates)" in again.stdout, again.stdout
    assert ttls(tmp_path / "store") == {}
    refused = midtrace("prune", "--store", store, "--older-than", "12h", "--trace-id", "ab" * 16)
    assert refused.returncode == 2 and "whole days" in refused.stderr, refused.stderr
    kept = midtrace("prune", "--store", store, "--older-than", "2w")
    assert kept.returncode == 0, kept.stderr
    assert "keeps 14 days" in kept.stdout
    found = ttls(tmp_path / "store")
    assert {"spans", "requests_versions", "chunks_versions", "outcomes_versions"} <= set(found)
    assert all("toIntervalDay(14)" in e or "INTERVAL 14 DAY" in e for e in found.values()), found


def test_grading_a_chdb_store_grades_as_a_duckdb_file(tmp_path: Path) -> None:
    """grade --store --references on ClickHouse reads the same requests and writes the same
    outcomes as on a DuckDB file: the same summary, the same report, the same sweep cases."""
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"question": "How many days do I have to return an item?",
                                "answers": ["30 days"], "in_corpus": True}) + "\n")
    said = {}
    for name, store in (("duckdb", str(tmp_path / "g.duckdb")), ("chdb", f"chdb://{tmp_path}/g")):
        ingested = midtrace("ingest", "--store", store, str(SAMPLES / "langchain_rag.jsonl"))
        assert ingested.returncode == 0, ingested.stderr
        graded = midtrace("grade", "--store", store, "--references", str(refs))
        assert graded.returncode == 0, graded.stderr
        report = midtrace("report", "--store", store)
        assert report.returncode == 0, report.stderr
        cases = midtrace("cases", "--store", store, "--references", str(refs))
        assert cases.returncode == 0, cases.stderr
        said[name] = (graded.stdout, [line for line in report.stdout.splitlines()
                                      if "generated" not in line], cases.stdout)
    assert "sent 2 outcomes (references:refs.jsonl)" in said["duckdb"][0]
    assert len(said["duckdb"][2].splitlines()) == 2  # the two graded requests, as cases
    assert said["chdb"] == said["duckdb"]


def test_prune_trace_id_erases_from_chdb_as_from_a_duckdb_file(tmp_path: Path) -> None:
    """The same traces erased from a chdb store and a DuckDB file: the same report, nothing of
    them to export afterwards, the trace sharing a text with the erased one whole, and an erased
    trace ingested again exported as before."""
    erased, sharing, missing = ("afadf7ebc721e27692aedb42afff7815",
                                "da9d10313728205278aabeea650c2544", "ab" * 16)
    said = {}
    for name, store in (("duckdb", str(tmp_path / "e.duckdb")), ("chdb", f"chdb://{tmp_path}/e")):
        ingested = midtrace("ingest", "--store", store, str(SAMPLES / "langchain_rag.jsonl"))
        assert ingested.returncode == 0, ingested.stderr
        before = midtrace("export", "--store", store, "--trace-id", erased)
        assert before.returncode == 0 and len(before.stdout.splitlines()) == 1, before.stderr
        pruned = midtrace("prune", "--store", store, "--trace-id", erased, "--trace-id", missing)
        assert pruned.returncode == 0, pruned.stderr
        gone = midtrace("export", "--store", store, "--trace-id", erased)
        assert gone.returncode == 1 and "no spans stored" in gone.stderr, gone.stderr
        kept = midtrace("export", "--store", store, "--trace-id", sharing)
        assert kept.returncode == 0 and len(kept.stdout.splitlines()) == 1, kept.stderr
        (tmp_path / f"{name}.jsonl").write_text(before.stdout)
        again = midtrace("ingest", "--store", store, str(tmp_path / f"{name}.jsonl"))
        assert again.returncode == 0 and "(1 request updates)" in again.stdout, again.stdout
        back = midtrace("export", "--store", store, "--trace-id", erased)
        assert back.returncode == 0, back.stderr
        # what each did to leave no byte of them behind: DuckDB rewrote its file, chdb waited
        # until the parts the deletions replaced were gone from the disk
        assert pruned.stdout.splitlines()[0].endswith({"duckdb": " (file compacted)",
                                                       "chdb": " (replaced parts removed)"}[name])
        said[name] = (pruned.stdout.replace(store, "<store>").replace(" (file compacted)", "")
                      .replace(" (replaced parts removed)", ""),
                      before.stdout, kept.stdout, back.stdout)
    assert said["duckdb"][0] == ("deleted 1 trace(s): 10 spans, 1 requests, 0 outcomes from "
                                 f"<store>\nnot stored, so not deleted: 1 trace id(s) named: {missing}\n")
    assert said["chdb"] == said["duckdb"]
    assert said["chdb"][3] == said["chdb"][1]
    # a retention and an erasure at once, the retention long enough to keep the sample's traces
    # (their times are fixed; today moves on)
    store = f"chdb://{tmp_path}/e"
    days = sample_age_days(SAMPLES / "langchain_rag.jsonl") + 30
    both = midtrace("prune", "--store", store, "--older-than", f"{days}d", "--trace-id", sharing,
                    "--no-compact")
    assert both.returncode == 0, both.stderr
    assert f"keeps {days} days" in both.stdout and both.stdout.endswith(
        f"deleted 1 trace(s): 10 spans, 1 requests, 0 outcomes from {store}\n"), both.stdout
    assert "spans" in ttls(tmp_path / "e")
    gone = midtrace("export", "--store", store, "--trace-id", sharing)
    assert gone.returncode == 1, gone.stdout
