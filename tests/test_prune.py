"""`midtrace prune` end to end: traces written by the SDK's exporter to OTLP/JSON files and
ingested through the CLI, then pruned; afterwards nothing of them is left in any table, in the
metric views, in the request list or in the bytes of the file, and a compaction cut short is
finished by the next prune."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from midtrace.client import FileClient
from midtrace.collector.storage.retention import prune
from midtrace.collector.storage.store import Store
from midtrace.sample_traces.emit import FileJob, SimRequest, write_trace_file
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord

ERASED = "ERASE-ME-4417"  # carried only by the traces that are pruned
KEPT = "KEEP-ME-8093"  # carried only by the traces that stay
SHARED = "Shared policy text that old and new requests both retrieved. " * 6
OLD = datetime(2020, 3, 2, 9, tzinfo=UTC)


def record(i: int, marker: str, correct: bool | None) -> RagRecord:
    own = f"Clause {i} {marker}: refunds within 14 days of purchase. " * 6  # stored in texts
    chunks = (Chunk(f"own-{marker}-{i}", source_id="refunds.md", text=own,
                    label="direct_answer"),
              Chunk("shared", source_id="policy.md", text=SHARED, label="supporting_background"),
              Chunk(f"noise-{i}", source_id="faq.md", text=f"FAQ {i} {marker}", label="irrelevant"))
    slots = [(1, 0, 2), (0, 1, 2), (2, 0, 1)][i % 3]  # the decisive chunk early, middle or late
    placements = tuple(Placement(chunks[k].id, p, 300 * p, 300 * p + 250)
                       for p, k in enumerate(slots))
    return RagRecord(question=f"question {i} {marker}", answer=f"answer {i} {marker}",
                     model="m", template_id="t", strategy="score_order", prompt_tokens=900,
                     chunks=chunks, placements=placements,
                     outcome=None if correct is None else Outcome(correct=correct))


def requests(start: datetime, marker: str, n: int) -> tuple[SimRequest, ...]:
    grades = (True, False, None)
    return tuple(SimRequest(start + timedelta(minutes=i), record(i, marker, grades[i % 3]),
                            retrieve_ms=20, llm_ms=400, n_retrieved=3, output_tokens=40)
                 for i in range(n))


@dataclass(frozen=True)
class Traffic:
    old_files: tuple[Path, ...]  # traces older than 30 days, and outcomes posted for them
    kept_files: tuple[Path, ...]
    old_ids: tuple[str, ...]
    kept_ids: tuple[str, ...]


def outcomes_file(path: Path, trace_ids: tuple[str, ...]) -> Path:
    path.write_text(json.dumps({"outcomes": [
        {"trace_id": t, "correct": False, "reviewer": "kim", "note": f"graded {i}"}
        for i, t in enumerate(trace_ids[:2])]}))
    return path


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Traffic:
    folder = tmp_path_factory.mktemp("traffic")
    recent = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    old_ids = tuple(write_trace_file(FileJob(folder / "old.jsonl", "support", "old",
                                             requests(OLD, ERASED, 7))))
    kept_ids = tuple(write_trace_file(FileJob(folder / "kept.jsonl", "support", "kept",
                                              requests(recent, KEPT, 8))))
    return Traffic(
        old_files=(folder / "old.jsonl", outcomes_file(folder / "old_outcomes.json", old_ids)),
        kept_files=(folder / "kept.jsonl", outcomes_file(folder / "kept_outcomes.json", kept_ids)),
        old_ids=old_ids, kept_ids=kept_ids)


def midtrace_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "midtrace", *args], capture_output=True, text=True)


def ingest(db: Path, *files: Path) -> None:
    run = midtrace_cli("ingest", "--store", str(db), *map(str, files))
    assert run.returncode == 0, run.stderr


def file_bytes(db: Path) -> bytes:
    assert sorted(p.name for p in db.parent.glob(db.name + "*")) == [db.name], \
        "the store should be one file: no .wal and no compaction left behind"
    return db.read_bytes()


def metric_views(db: Path) -> dict[str, pd.DataFrame]:
    """Every metric view, rows in a fixed order."""
    with FileClient(db) as client:
        frames = {v["name"]: client.view(v["name"]) for v in client.views()}
    return {name: df.astype(str).sort_values(list(df.columns)).reset_index(drop=True)
            for name, df in frames.items()}


def request_list(db: Path, page: int = 4) -> tuple[int, list[str]]:
    """The request list's total and the trace ids its pages reach, walked page by page."""
    seen: list[str] = []
    with FileClient(db) as client:
        _, total = client.requests_page(limit=page)
        for offset in range(0, total + page, page):
            frame, _ = client.requests_page(limit=page, offset=offset)
            seen += list(frame["trace_id"])
    return total, seen


def tables_holding(db: Path, trace_ids: tuple[str, ...]) -> dict[str, int]:
    """For every table of the file: rows that belong to these traces, by trace id or by the
    request id of one of their requests, or that point at a request no longer there."""
    found = {}
    with duckdb.connect(str(db), read_only=True) as conn:
        columns: dict[str, set[str]] = {}
        for table, column in conn.execute(
                "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal "
                "AND table_name IN (SELECT table_name FROM duckdb_tables())").fetchall():
            columns.setdefault(table, set()).add(column)
        for table, cols in columns.items():
            if "trace_id" in cols:
                found[table] = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE list_contains($ids, trace_id)",
                    {"ids": list(trace_ids)}).fetchone()[0]
            elif "request_id" in cols:
                found[table] = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE request_id NOT IN "
                    "(SELECT request_id FROM requests)").fetchone()[0]
    return found


@pytest.fixture
def pruned_and_reference(traffic: Traffic, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    db = tmp_path / "traces.duckdb"
    ingest(db, *traffic.old_files, *traffic.kept_files)
    reference = tmp_path / "never-had-them.duckdb"
    ingest(reference, *traffic.kept_files)
    yield db, reference


def test_prune_leaves_nothing_of_the_traces_in_tables_views_list_or_file(
        traffic: Traffic, pruned_and_reference: tuple[Path, Path]) -> None:
    db, reference = pruned_and_reference
    n_old, n_kept = len(traffic.old_ids), len(traffic.kept_ids)
    before = metric_views(db)
    assert int(before["overview"]["requests"][0]) == n_old + n_kept
    assert ERASED.encode() in file_bytes(db) and traffic.old_ids[0].encode() in file_bytes(db)

    run = midtrace_cli("prune", "--store", str(db), "--older-than", "30d")
    assert run.returncode == 0, run.stderr
    assert f"deleted {n_old} trace(s)" in run.stdout and "(file compacted)" in run.stdout

    assert set(tables_holding(db, traffic.old_ids).values()) == {0}, tables_holding(db, traffic.old_ids)
    after = metric_views(db)
    assert int(after["overview"]["requests"][0]) == n_kept
    assert int(after["overview"]["graded"][0]) < int(before["overview"]["graded"][0])
    for name, frame in metric_views(reference).items():
        pd.testing.assert_frame_equal(after[name], frame, obj=name)
    total, seen = request_list(db)
    assert total == len(seen) == n_kept
    assert set(seen) == set(traffic.kept_ids)

    data = file_bytes(db)
    assert ERASED.encode() not in data
    for trace_id in traffic.old_ids:
        assert trace_id.encode() not in data, trace_id
    assert KEPT.encode() in data and SHARED.encode() in data  # the grep sees what is there
    assert traffic.kept_ids[0].encode() in data


def test_a_compaction_cut_short_is_finished_by_the_next_prune(
        traffic: Traffic, pruned_and_reference: tuple[Path, Path]) -> None:
    db, _ = pruned_and_reference
    store = Store.open(db)
    try:  # the deletion commits; then the process dies while copying into the fresh file
        assert prune(store, older_than=timedelta(days=30)).traces == len(traffic.old_ids)
    finally:
        store.close()
    fresh = db.with_name(db.name + ".compacting")
    whole = db.read_bytes()
    fresh.write_bytes(whole[: len(whole) // 2])
    db.with_name(fresh.name + ".wal").write_bytes(b"\0" * 4096)
    assert ERASED.encode() in db.read_bytes()  # deleted, but its bytes are still in the file

    run = midtrace_cli("prune", "--store", str(db), "--older-than", "30d")
    assert run.returncode == 0, run.stderr
    assert "deleted 0 trace(s)" in run.stdout and "compacted" in run.stdout
    data = file_bytes(db)
    assert ERASED.encode() not in data and KEPT.encode() in data
    again = midtrace_cli("prune", "--store", str(db), "--older-than", "30d")
    assert again.returncode == 0 and "compacted" not in again.stdout  # nothing owed any more
    total, seen = request_list(db)
    assert total == len(seen) == len(traffic.kept_ids)


def test_no_compact_leaves_the_rewrite_to_the_next_prune(
        traffic: Traffic, pruned_and_reference: tuple[Path, Path]) -> None:
    db, _ = pruned_and_reference
    run = midtrace_cli("prune", "--store", str(db), "--older-than", "30d", "--no-compact")
    assert run.returncode == 0 and "compacted" not in run.stdout, run.stderr
    assert ERASED.encode() in db.read_bytes()
    run = midtrace_cli("prune", "--store", str(db), "--older-than", "30d")
    assert run.returncode == 0 and "deleted 0 trace(s)" in run.stdout, run.stderr
    assert "compacted" in run.stdout
    assert ERASED.encode() not in file_bytes(db)


def test_a_trace_id_the_store_holds_nothing_of_is_named_not_counted(
        traffic: Traffic, pruned_and_reference: tuple[Path, Path]) -> None:
    db, _ = pruned_and_reference
    erased, never = traffic.old_ids[0], "ab" * 16
    store = Store.open(db)
    try:
        first = prune(store, trace_ids=[erased.upper(), never])
        assert (first.traces, first.not_stored) == (1, [never])
        assert first.spans > 0 and first.requests == 1
        again = prune(store, trace_ids=[erased])  # erased already: nothing left to delete
        assert (again.traces, again.spans, again.not_stored) == (0, 0, [erased])
    finally:
        store.close()
    run = midtrace_cli("prune", "--store", str(db), "--trace-id", never, "--no-compact")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("deleted 0 trace(s): 0 spans"), run.stdout
    assert f"not stored, so not deleted: 1 trace id(s) named: {never}" in run.stdout
