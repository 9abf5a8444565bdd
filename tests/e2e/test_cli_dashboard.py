"""`midtrace dashboard` and `midtrace serve`: start-up checks, real processes, stopping."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from dataclasses import MISSING, fields
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from midtrace.collector.settings import CollectorSettings
from midtrace.collector.storage.store import Store
from midtrace.cli import cli
from midtrace.commands.options import collector_settings
from midtrace.commands.serving import collector as cli_collector
from midtrace.supervise import collector_command, port_or_any
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
    (["dashboard", "--url", "http://127.0.0.1:9", "--db", "x.duckdb"], "give either --url"),
    (["dashboard", "--db", "missing.duckdb"], "does not exist"),
    (["dashboard", "--url", "http://127.0.0.1:9", "--host", "0.0.0.0"], "needs a token"),
    (["serve", "--db", "x.duckdb", "--host", "0.0.0.0"], "needs a token"),
    (["collector", "--db", "x.duckdb", "--host", "0.0.0.0"], "needs a token"),
    (["demo", "--db", "x.duckdb", "--host", "0.0.0.0"], "needs a token"),
    (["collector", "--db", "x.duckdb", "--host", "::"], "needs a token"),
    (["serve", "--db", "x.duckdb", "--token", " "], "is empty"),
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
    proc = start(["serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0", "--port", "0"],
                 tmp_path / "serve.log", ready=DASHBOARD, timeout=120)
    assert httpx.get(proc.url + "/_stcore/health", timeout=5).text == "ok"
    kids = children(proc.process.pid)
    assert len(kids) == 2
    assert proc.stop(signal.SIGINT) == 0, proc.log()
    wait_gone(kids)


def test_serve_stops_the_dashboard_and_fails_when_the_collector_dies(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    proc = start(["serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0", "--port", "0"],
                 tmp_path / "serve.log", ready=DASHBOARD, timeout=120)
    collector, dashboard = children(proc.process.pid)
    os.kill(collector, signal.SIGKILL)
    assert proc.process.wait(30) != 0
    wait_gone([dashboard])
    assert "the collector exited" in proc.log()


def test_serve_passes_every_collector_option_to_its_collector(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    dead = f"http://127.0.0.1:{free_port()}"
    proc = start(["serve", "--db", str(db), "--http-port", "0", "--grpc-port", "0", "--port", "0",
                  "--no-text", "--queue-size", "7", "--forward", dead],
                 tmp_path / "serve.log", ready=DASHBOARD, timeout=120,
                 env={"MIDTRACE_TOKEN": "s3cret"})
    try:
        match = re.search(r"listening on (http://\S+)", proc.log())
        assert match, proc.log()
        collector = match.group(1)
        health = httpx.get(collector + "/healthz", timeout=5).json()
        assert health["token_required"] is True
        assert health["text"].startswith("not stored")
        assert health["queue_capacity"] == 7
        assert [f["url"] for f in health["forward"]] == [dead + "/v1/traces"]
        assert httpx.post(collector + "/v1/outcomes", json={"outcomes": []}).status_code == 401
        grpc = re.search(r"OTLP/gRPC on (\S+)", proc.log())
        assert grpc, proc.log()
    finally:
        assert proc.stop(signal.SIGINT) == 0, proc.log()


def test_a_child_collector_gets_every_setting_and_no_secret_in_argv(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"models": {}}')
    settings = CollectorSettings(
        db="/tmp/x.duckdb", host="::1", http_port=1234, max_body_bytes=3 * 1024 * 1024,
        queue_size=9, derive_workers=2, grpc_port=0, token="tok,en=1", keep_text=False,
        forward=("http://a:1", "http://b:2/v1/traces"),
        forward_headers={"Authorization": "Basic a,b=c", "X-Team": "rag"}, forward_queue=11,
        prices=prices, memory_limit=300 << 20)
    assert all(getattr(settings, f.name) != f.default for f in fields(CollectorSettings)
               if f.default is not MISSING), "give every field a non-default value"
    argv, env = collector_command(settings)
    assert argv[1:4] == ["-m", "midtrace", "collector"]
    assert "tok,en=1" not in " ".join(argv) and "Basic" not in " ".join(argv)
    for key in list(os.environ):
        if key.startswith("MIDTRACE_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("MIDTRACE_"):
            monkeypatch.setenv(key, value)
    ctx = cli_collector.make_context("collector", argv[4:])
    params = dict(ctx.params)
    assert collector_settings(Path(params.pop("db")), **params) == settings


def test_the_demo_swaps_a_taken_port_for_a_free_one() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert port_or_any("127.0.0.1", taken) == 0
    assert port_or_any("127.0.0.1", taken) == taken


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
