"""`midtrace demo` as a newcomer runs it: sample traces in, collector and dashboard up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "sample_traces" / "manifest.json").read_text())
# The framework samples (langchain_rag.jsonl and the others recorded from real
# instrumented apps) hold one request's trace per line.
FRAMEWORK_REQUESTS = sum(len(p.read_text().splitlines())
                         for p in (ROOT / "sample_traces").glob("*.jsonl"))


def expected_requests() -> int:
    """Production traffic, what the report counts by default: the sweep is an experiment."""
    return MANIFEST["support"]["requests"] + FRAMEWORK_REQUESTS


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_serves_the_samples_and_stops_on_a_signal(tmp_path: Path, stop: signal.Signals) -> None:
    db = tmp_path / "demo.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "midtrace", "demo", "--db", str(db), "--http-port", "0", "--grpc-port", "0",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "demo.log", "w"), text=True, cwd=tmp_path,
        env={**os.environ, "MIDTRACE_LOG_LEVEL": "warning"})
    assert process.stdout is not None
    urls: dict[str, str] = {}
    deadline = time.monotonic() + 180
    while len(urls) < 2 and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        match = re.search(r"midtrace (collector|dashboard) at (http://\S+)", line)
        if match:
            urls[match[1]] = match[2]
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


def test_demo_never_deletes_a_file_the_user_named(tmp_path: Path) -> None:
    precious = tmp_path / "precious.duckdb"
    precious.write_bytes(b"not yours")
    run = subprocess.run([sys.executable, "-m", "midtrace", "demo", "--db", str(precious),
                          "--http-port", "0", "--grpc-port", "0", "--port", "0"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "already exists" in run.stderr
    assert precious.read_bytes() == b"not yours"
