"""Files midtrace cannot use, given to every command that opens a store, through the installed
`midtrace` script: each says in one line what is wrong and what to do, and exits non-zero
without a traceback. And a collector stopped cleanly leaves one file that is a whole backup."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from midtrace.client import FileClient
from midtrace.sample_traces.emit import FileJob, SimRequest, write_trace_file
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from midtrace.sql import sqlfiles
from tests.procs import start_collector
from tests.sender import Sender

MIDTRACE = str(Path(sys.executable).with_name("midtrace"))
NEWEST = max(m.version for m in sqlfiles.migrations())
CASE = ('{"id": "c0", "question": "What colour is widget 0?", "answers": ["red"], '
        '"decisive": [{"id": "w0", "text": "Widget 0 is red."}], '
        '"distractors": [{"id": "n0", "text": "Widget 1 is blue."}]}\n')


def traffic_file(path: Path) -> Path:
    start = datetime.now(UTC) - timedelta(days=1)
    chunks = (Chunk("refund-7", text="Annual plans are refundable within 14 days. " * 8,
                    label="direct_answer"),
              Chunk("faq-1", text="Monthly plans renew on the first of the month. " * 8))
    write_trace_file(FileJob(path, "support", "store-files", tuple(
        SimRequest(start + timedelta(minutes=i), RagRecord(
            question=f"refund window {i}?", answer="14 days", model="m", prompt_tokens=400,
            chunks=chunks, placements=(Placement("faq-1", 0, 0, 150), Placement("refund-7", 1, 150, 300)),
            outcome=Outcome(correct=i % 2 == 0)), retrieve_ms=10, llm_ms=200, n_retrieved=2,
            output_tokens=5) for i in range(6))))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store midtrace wrote (by `ingest`) and the traffic file it was made from."""
    folder = tmp_path_factory.mktemp("store")
    traces = traffic_file(folder / "traces.jsonl")
    db = folder / "good.duckdb"
    run = subprocess.run([MIDTRACE, "ingest", "--store", str(db), str(traces)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return db, traces


def _text(good: Path, bad: Path) -> None:
    bad.write_text("trace_id,question\n4bf92f35,refund window?\n")


def _sqlite(good: Path, bad: Path) -> None:
    with sqlite3.connect(bad) as conn:
        conn.execute("CREATE TABLE traces (id TEXT)")


def _empty(good: Path, bad: Path) -> None:
    bad.write_bytes(b"")


def _foreign(good: Path, bad: Path) -> None:
    with duckdb.connect(str(bad)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")


def _unrecorded(good: Path, bad: Path) -> None:
    """A midtrace store with no record of its migrations."""
    shutil.copy(good, bad)
    with duckdb.connect(str(bad)) as conn:
        conn.execute("DROP TABLE schema_migrations")


def _newer(good: Path, bad: Path) -> None:
    shutil.copy(good, bad)
    with duckdb.connect(str(bad)) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', now())",
                     [NEWEST + 1])


def _reshaped(good: Path, bad: Path) -> None:
    """Every migration recorded, but a table of an older shape."""
    with duckdb.connect(str(bad)) as conn:
        conn.execute(sqlfiles.query("create_schema_migrations"))
        for m in sqlfiles.migrations():
            conn.execute(sqlfiles.render(m.path))
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [m.version, m.name])
        conn.execute("ALTER TABLE chunks DROP COLUMN text_chars")


def _block_offsets(db: Path, data_only: bool) -> list[int]:
    """Where the file's blocks start: those holding table data, or all of them."""
    with duckdb.connect(str(db), read_only=True) as conn:
        ((size, total),) = conn.execute(
            "SELECT block_size, total_blocks FROM pragma_database_size()").fetchall()
        blocks = set(range(total))
        if data_only:
            blocks = {b for (t,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()
                      for (b,) in conn.execute("SELECT DISTINCT block_id FROM pragma_storage_info(?) "
                                               "WHERE block_id >= 0", [t]).fetchall()}
    header = 3 * 4096  # DuckDB's file header and its two database headers
    return [header + b * size for b in sorted(blocks)]


def _damage(data_only: bool) -> Callable[[Path, Path], None]:
    def damage(good: Path, bad: Path) -> None:
        shutil.copy(good, bad)
        offsets = _block_offsets(bad, data_only)
        assert offsets and max(offsets) < bad.stat().st_size
        with bad.open("r+b") as f:
            for offset in offsets:
                f.seek(offset + 64)
                f.write(b"\xde\xad\xbe\xef" * 16)
    return damage


EVERY = None
ONE_WRITER_ONE_READER = ("ingest", "report")
# kind of file: how to make it from a good store, what the message says, which commands try it
BAD_FILES: dict[str, tuple[Callable[[Path, Path], None], str, tuple[str, ...] | None]] = {
    "text file": (_text, "is not a DuckDB database file", EVERY),
    "store without schema_migrations": (_unrecorded, "no schema_migrations table", EVERY),
    "table of an older shape": (_reshaped, "chunks has no column text_chars", EVERY),
    "damaged data blocks": (_damage(data_only=True), "is damaged (Corrupt database file", EVERY),
    "every block damaged": (_damage(data_only=False), "is damaged", ONE_WRITER_ONE_READER),
    "SQLite file": (_sqlite, "is a SQLite database", ONE_WRITER_ONE_READER),
    "empty file": (_empty, "is empty", ONE_WRITER_ONE_READER),
    "another program's DuckDB file": (
        _foreign, "not a midtrace store: it has tables (orders)", ONE_WRITER_ONE_READER),
    "store from a newer midtrace": (
        _newer, f"newer midtrace (layout {NEWEST + 1}", ONE_WRITER_ONE_READER),
}


def commands(store: Path, traces: Path, cases: Path) -> dict[str, list[str]]:
    s = str(store)
    return {
        "collector": ["collector", "--store", s, "--http-port", "0", "--grpc-port", "0"],
        "serve": ["serve", "--store", s, "--http-port", "0", "--grpc-port", "0", "--port", "0"],
        "ingest": ["ingest", "--store", s, str(traces)],
        "rebuild": ["rebuild", "--store", s],
        "prune": ["prune", "--store", s, "--older-than", "30d"],
        "export": ["export", "--store", s, "--trace-id", "ab" * 16],
        "report": ["report", "--store", s],
        "gate": ["gate", "--store", s],
        "dashboard": ["dashboard", "--store", s, "--port", "0"],
        "sweep": ["sweep", "--cases", str(cases), "--endpoint", "http://127.0.0.1:9/v1",
                  "--model", "m", "--store", s],
    }


def run_all(folder: Path, make: Callable[[Path], None], traces: Path,
            names: tuple[str, ...] | None = None) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every command (or those ``names``) on its own copy of the file ``make`` writes, run side
    by side; each copy is in a folder of its own, ``folder / name``."""
    cases = folder / "cases.jsonl"
    cases.write_text(CASE)
    procs = {}
    for name in commands(Path(), traces, cases):
        if names is not None and name not in names:
            continue
        target = folder / name / "store.duckdb"
        target.parent.mkdir()
        make(target)
        shutil.copyfile(target, target.with_name("as-made"))
        argv = commands(target, traces, cases)[name]
        procs[name] = (argv, subprocess.Popen([MIDTRACE, *argv], stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True,
                                              start_new_session=True))
    done = {}
    try:
        for name, (argv, proc) in procs.items():
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"midtrace {name} kept running on a file it cannot use")
            done[name] = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # with the servers it started
                proc.communicate()
    return done


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_every_command_refuses_a_file_it_cannot_use_in_one_line(
        kind: str, store: tuple[Path, Path], tmp_path: Path) -> None:
    good, traces = store
    make, says, names = BAD_FILES[kind]
    for name, run in run_all(tmp_path, lambda target: make(good, target), traces, names).items():
        shown = f"midtrace {name} on a {kind}: exit {run.returncode}\n{run.stdout}{run.stderr}"
        copy = tmp_path / name / "store.duckdb"
        assert sorted(p.name for p in copy.parent.iterdir()) == ["as-made", copy.name], shown
        assert copy.read_bytes() == (copy.parent / "as-made").read_bytes(), shown  # untouched
        assert run.returncode != 0 and "Traceback" not in run.stderr, shown
        lines = run.stderr.splitlines()
        if name == "sweep":  # the plan and the progress label come first
            lines = lines[2:]
        else:
            assert "listening" not in run.stdout, shown
        assert 1 <= len(lines) <= 2 and lines[0].startswith("midtrace: "), shown
        assert says in lines[0], shown
        if name != "serve":
            assert len(lines) == 1 and run.returncode in (1, 3), shown


def test_a_store_of_an_older_layout_is_migrated_by_a_writer_and_refused_read_only(
        store: tuple[Path, Path], tmp_path: Path) -> None:
    _, traces = store
    core = sqlfiles.migrations()[0]

    def older(target: Path) -> None:
        with duckdb.connect(str(target)) as conn:
            conn.execute(sqlfiles.query("create_schema_migrations"))
            conn.execute(sqlfiles.render(core.path))
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [core.version, core.name])

    runs = run_all(tmp_path, older, traces, ("report", "gate", "dashboard", "ingest"))
    for name in ("report", "gate", "dashboard"):
        run = runs[name]
        assert run.returncode == 3 and run.stderr.count("\n") == 1, run.stderr
        assert f"older layout ({core.version}; this midtrace writes {NEWEST})" in run.stderr
        assert "midtrace rebuild --store" in run.stderr
    assert runs["ingest"].returncode == 0, runs["ingest"].stderr
    migrated = tmp_path / "ingest" / "store.duckdb"
    with FileClient(migrated) as client:
        assert int(client.view("overview")["requests"][0]) == 6


def test_a_clean_stop_leaves_one_file_that_is_a_whole_backup(tmp_path: Path) -> None:
    db = tmp_path / "live" / "traces.duckdb"
    db.parent.mkdir()
    proc = start_collector(db, tmp_path / "collector.log")
    try:
        sender = Sender(proc.url)
        sent = [sender.send(RagRecord(question=f"backup question {i}", model="m"))
                for i in range(3)]
        sender.close()
        assert db.with_name(db.name + ".wal").exists()  # the writes are in the .wal so far
    finally:
        code = proc.stop()
    assert code == 0, proc.log()
    assert sorted(p.name for p in db.parent.iterdir()) == [db.name]
    backup = tmp_path / "backup" / "copy.duckdb"
    backup.parent.mkdir()
    shutil.copyfile(db, backup)
    with FileClient(backup) as client:
        total = client.requests_page()[1]
        assert total == 3
        assert {client.trace(t)["request"]["question"] for t in sent} == {
            f"backup question {i}" for i in range(3)}
