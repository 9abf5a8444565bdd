"""`midtrace dashboard` and `midtrace serve`: start-up checks, real processes, stopping."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from collector.store import Store
from midtrace.cli import cli
from tests.procs import Proc, start

DASHBOARD = re.compile(r"midtrace dashboard at (http://\S+)")


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.split(") ", 1)[1][0] != "Z"


def wait_gone(pids: list[int], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)], "child processes outlived their parent"


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    db = tmp_path / "traces.duckdb"
    Store.open(db).close()
    return db


@pytest.mark.parametrize("args, message", [
    (["dashboard"], "give either --url"),
    (["dashboard", "--url", "http://127.0.0.1:4318", "--db", "x.duckdb"], "give either --url"),
    (["dashboard", "--db", "missing.duckdb"], "does not exist"),
    (["dashboard", "--url", "http://127.0.0.1:4318", "--host", "0.0.0.0"], "set --token"),
    (["serve", "--db", "x.duckdb", "--host", "0.0.0.0"], "set --token"),
])
def test_refuses_settings_that_cannot_work(args: list[str], message: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("MIDTRACE_URL", "MIDTRACE_DB", "MIDTRACE_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_says_plainly_when_a_collector_holds_the_file(tmp_path: Path, collector: Proc,
                                                      db_path: Path) -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--db", str(db_path)])
    assert result.exit_code == 3
    assert "held by another process" in result.output and "--url" in result.output


def test_dashboard_on_a_file_prints_its_address_and_stops_on_sigterm(
        tmp_path: Path, empty_db: Path) -> None:
    proc = start(["dashboard", "--db", str(empty_db), "--port", "0"], tmp_path / "dash.log",
                 ready=DASHBOARD, timeout=90)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", proc.url)
    assert httpx.get(proc.url + "/_stcore/health", timeout=5).text == "ok"
    streamlit = children(proc.process.pid)
    assert streamlit
    assert proc.stop(signal.SIGTERM) == 0, proc.log()
    wait_gone(streamlit)


def test_serve_runs_both_and_stops_both(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    proc = start(["serve", "--db", str(db), "--http-port", "0", "--port", "0"],
                 tmp_path / "serve.log", ready=DASHBOARD, timeout=120)
    assert httpx.get(proc.url + "/_stcore/health", timeout=5).text == "ok"
    kids = children(proc.process.pid)
    assert len(kids) == 2
    assert proc.stop(signal.SIGINT) == 0, proc.log()
    wait_gone(kids)


def test_serve_stops_the_dashboard_and_fails_when_the_collector_dies(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    proc = start(["serve", "--db", str(db), "--http-port", "0", "--port", "0"],
                 tmp_path / "serve.log", ready=DASHBOARD, timeout=120)
    collector, dashboard = children(proc.process.pid)
    os.kill(collector, signal.SIGKILL)
    assert proc.process.wait(30) != 0
    wait_gone([dashboard])
    assert "the collector exited" in proc.log()
