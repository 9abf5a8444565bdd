"""`midtrace demo` as a newcomer runs it: sample traces in, collector and dashboard up."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from midtrace import demo
from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage.clickhouse_store import ClickHouseStore
from tests.chdb_databases import connection_in

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "sample_traces" / "manifest.json").read_text())
# The framework samples (langchain_rag.jsonl and the others recorded from real
# instrumented apps) hold one request's trace per line.
FRAMEWORK_REQUESTS = sum(len(p.read_text().splitlines())
                         for p in (ROOT / "sample_traces").glob("*.jsonl"))


def expected_requests() -> int:
    """Production traffic, what the report counts by default: the sweep is an experiment."""
    return MANIFEST["support"]["requests"] + FRAMEWORK_REQUESTS


def start_demo(store: str, tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`midtrace demo --store STORE` on free ports, and the addresses it printed (both, unless
    it failed: its log says why)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "midtrace", "demo", "--store", store, "--http-port", "0",
         "--grpc-port", "0", "--port", "0"],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "demo.log", "w"), text=True, cwd=tmp_path,
        env={**os.environ, "MIDTRACE_LOG_LEVEL": "warning"})
    assert process.stdout is not None
    urls: dict[str, str] = {}
    deadline = time.monotonic() + 240
    while len(urls) < 2 and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        match = re.search(r"midtrace (collector|dashboard) at (http://\S+)", line)
        if match:
            urls[match[1]] = match[2]
    return process, urls


def check_demo(process: subprocess.Popen[str], urls: dict[str, str], tmp_path: Path,
               stop: signal.Signals) -> None:
    """The demo serves every sample request through the collector's query API and the
    dashboard, then stops on ``stop`` and closes both."""
    try:
        assert set(urls) == {"collector", "dashboard"}, (tmp_path / "demo.log").read_text()
        assert httpx.get(urls["dashboard"] + "/_stcore/health", timeout=10).text == "ok"
        report = subprocess.run([sys.executable, "-m", "midtrace", "report", "--url",
                                 urls["collector"], "--format", "json"],
                                capture_output=True, text=True, timeout=120)
        assert report.returncode == 0, report.stderr
        assert json.loads(report.stdout)["requests"] == expected_requests()
        assert json.loads(report.stdout)["traffic"] == "production"
    finally:
        process.send_signal(stop)
        code = process.wait(60)
    assert code in (0, 130, -signal.SIGINT), (tmp_path / "demo.log").read_text()
    for url in urls.values():
        with pytest.raises(httpx.TransportError):
            httpx.get(url, timeout=2)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_serves_the_samples_and_stops_on_a_signal(tmp_path: Path, stop: signal.Signals) -> None:
    process, urls = start_demo(str(tmp_path / "demo.duckdb"), tmp_path)
    check_demo(process, urls, tmp_path, stop)


def test_demo_serves_the_samples_from_a_new_chdb_folder(tmp_path: Path) -> None:
    """The samples are loaded into the folder in a process of its own, which exits before the
    collector opens the folder (one process holds a chdb folder at a time)."""
    process, urls = start_demo(f"chdb://{tmp_path}/store", tmp_path)
    check_demo(process, urls, tmp_path, signal.SIGTERM)
    assert "into chdb://" in (tmp_path / "demo.log").read_text()


def test_demo_never_deletes_a_file_the_user_named(tmp_path: Path) -> None:
    precious = tmp_path / "precious.duckdb"
    precious.write_bytes(b"not yours")
    run = subprocess.run([sys.executable, "-m", "midtrace", "demo", "--db", str(precious),
                          "--http-port", "0", "--grpc-port", "0", "--port", "0"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "already exists" in run.stderr
    assert precious.read_bytes() == b"not yours"


@pytest.mark.parametrize("kind", ["duckdb", "chdb"])
def test_demo_where_no_store_can_be_made_says_so_in_one_line(tmp_path: Path, kind: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file, not a folder")
    store = blocker / "demo.duckdb" if kind == "duckdb" else f"chdb://{blocker}/store"
    run = subprocess.run([sys.executable, "-m", "midtrace", "demo", "--store", str(store),
                          "--http-port", "0", "--grpc-port", "0", "--port", "0"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert f"cannot make room for the demo's store at {blocker}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and "--store" in run.stderr
    assert blocker.read_text() == "a file, not a folder"


def test_demo_never_deletes_a_chdb_folder_the_user_named(tmp_path: Path) -> None:
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("not yours")
    run = subprocess.run([sys.executable, "-m", "midtrace", "demo", "--store",
                          f"chdb://{folder}", "--http-port", "0", "--grpc-port", "0",
                          "--port", "0"], capture_output=True, text=True)
    assert run.returncode == 2
    assert f"{folder} already exists" in run.stderr and "chdb:///new/folder" in run.stderr
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


def test_demo_fills_an_empty_clickhouse_database_and_refuses_a_midtrace_store(
        chdb_database: ClickHouseURL) -> None:
    """A server's database is never dropped: an empty one (or one of other tables) is the
    demo's, one that holds a midtrace store is refused with a message that says so. Checked
    on a database of this process's chdb folder, through the same query as on a server."""
    conn = connection_in(chdb_database.path, chdb_database.database)  # type: ignore[arg-type]
    conn.command("CREATE TABLE other (x Int64) ENGINE = MergeTree ORDER BY x")
    demo._empty_database(chdb_database)
    ClickHouseStore.open(chdb_database)
    with pytest.raises(demo.DemoError, match="already holds a midtrace store .*never drops"):
        demo._empty_database(chdb_database)
    assert conn.query("SELECT count() AS n FROM spans").to_pylist() == [{"n": 0}]


def test_demo_on_a_clickhouse_server_it_cannot_reach_exits_3(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "midtrace", "demo", "--store",
                              f"clickhouse://127.0.0.1:{port}/demo", "--http-port", "0",
                              "--grpc-port", "0", "--port", "0"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 3, run.stderr
    assert run.stderr.startswith(f"midtrace: cannot reach clickhouse://default@127.0.0.1:{port}/demo")
