"""Start midtrace's real processes for tests: the collector on a free loopback port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

URL_LINE = re.compile(r"listening on (http://\S+)")
GRPC_LINE = re.compile(r"OTLP/gRPC on (\S+)")
MIDTRACE = [sys.executable, "-m", "midtrace"]


@dataclass
class Proc:
    process: subprocess.Popen[str]
    url: str
    log_path: Path
    grpc: str | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def trace(self, trace_id: str) -> dict[str, Any]:
        return read_trace(self.url, trace_id)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"process did not stop on {sig!r}:\n{self.log()}") from None
        return self.process.returncode


def read_trace(url: str, trace_id: str) -> dict[str, Any]:
    """The query API's reading of one trace at the collector ``url``, once everything it
    acknowledged is derived."""
    from midtrace.client import open_client

    client = open_client(url=url, fresh=True)
    try:
        trace = client.trace(trace_id)
    finally:
        client.close()
    assert trace is not None, f"no request for trace {trace_id}"
    return trace


def site_packages_mapped(pid: int) -> set[str]:
    """The installed packages whose files (extension modules) a process has mapped."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {line.split("site-packages/", 1)[1].split("/")[0].split(".")[0].lstrip("_")
            for line in maps.splitlines() if "site-packages/" in line}


def start(args: list[str], log_path: Path, ready: re.Pattern[str] = URL_LINE,
          timeout: float = 30, env: dict[str, str] | None = None) -> Proc:
    """Run ``python -m midtrace ARGS`` and wait for the line that says it is ready."""
    log = open(log_path, "w")
    full_env = {**os.environ, **(env or {})}
    process = subprocess.Popen(MIDTRACE + args, stdout=subprocess.PIPE, stderr=log, text=True,
                               env=full_env, start_new_session=True)
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        lines.append(line)
        match = ready.search(line)
        if match:
            return Proc(process, match.group(1), log_path)
    process.kill()
    raise AssertionError(f"midtrace {' '.join(args)} did not become ready:\n{''.join(lines)}\n"
                         f"{log_path.read_text(errors='replace')}")


def start_collector(db: Path, log_path: Path, *extra: str, env: dict[str, str] | None = None) -> Proc:
    """A collector on free HTTP and gRPC ports; ``proc.grpc`` is its gRPC ``host:port``."""
    proc = start(["collector", "--db", str(db), "--http-port", "0", "--grpc-port", "0", *extra],
                 log_path, env=env)
    assert proc.process.stdout is not None
    match = GRPC_LINE.search(proc.process.stdout.readline())
    assert match, "the collector did not print its gRPC address"
    proc.grpc = match.group(1)
    assert httpx.get(proc.url + "/healthz", timeout=5).json()["status"] == "ready"
    return proc
