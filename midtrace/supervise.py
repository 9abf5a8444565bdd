"""Process supervision for `dashboard`, `serve` and `demo`: start the children, wait until
they are ready, print their addresses, forward SIGINT/SIGTERM, stop the rest when one dies.

Each child's command line and environment are built here from one complete settings object.
Nothing here imports Streamlit or the dashboard: the app runs in a child process
(`python -m streamlit run <dashboard folder>/app.py`) and learns where its data comes from
through the environment variables below. Secrets (the token, forward headers) travel in the
environment, never in argv, where `ps` shows them.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO
from urllib.parse import quote

import httpx

from midtrace.collector.settings import (
    DEFAULT_HOST, ClickHouseURL, CollectorSettings, SettingsError, check_exposure, is_loopback,
    parse_store)

log = logging.getLogger(__name__)

HEALTH_PATH = "/_stcore/health"
COLLECTOR_READY = re.compile(r"listening on (http://\S+)")
DEFAULT_DASHBOARD_PORT = 8501

# What the app reads (dashboard/data.py): where the data is (a collector's URL, or a store: a
# DuckDB file's absolute path or a ClickHouse store's URL, its password left in
# MIDTRACE_CLICKHOUSE_PASSWORD), and whether to ask for the token.
ENV_URL = "MIDTRACE_URL"
ENV_DB = "MIDTRACE_DB"
ENV_TOKEN = "MIDTRACE_TOKEN"
ENV_REQUIRE_TOKEN = "MIDTRACE_REQUIRE_TOKEN"
# The collector options a child collector could otherwise pick up from this process's
# environment: its command line states every one of them instead.
COLLECTOR_ENV = ("MIDTRACE_DB", "MIDTRACE_STORE", "MIDTRACE_HOST", "MIDTRACE_HTTP_PORT",
                 "MIDTRACE_GRPC_PORT", "MIDTRACE_MAX_BODY_MB", "MIDTRACE_QUEUE_SIZE",
                 "MIDTRACE_NO_TEXT", "MIDTRACE_FORWARD", "MIDTRACE_FORWARD_HEADERS",
                 "MIDTRACE_FORWARD_QUEUE", "MIDTRACE_TOKEN", "MIDTRACE_MEMORY_LIMIT")


class LaunchError(Exception):
    """The dashboard or collector could not be started; the message says why."""


@dataclass(frozen=True)
class DashboardSettings:
    url: str | None = None
    db: str | None = None
    token: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_DASHBOARD_PORT

    def check(self) -> None:
        """Refuse settings that cannot work, with a message that says how to fix them."""
        if (self.url is None) == (self.db is None):
            raise LaunchError("give either --url (a running collector) or --store (a DuckDB file), "
                              "not both and not neither")
        if self.db is not None and not is_clickhouse(self.db) and not Path(self.db).is_file():
            raise LaunchError(f"{self.db} does not exist; point --db at a midtrace DuckDB file")
        _check_exposure(self.host, self.token, "dashboard")


@dataclass(frozen=True)
class ServeSettings:
    """A collector and a dashboard reading through it, on the collector's host and token."""

    collector: CollectorSettings
    dashboard_port: int = DEFAULT_DASHBOARD_PORT

    def check(self) -> None:
        _check_exposure(self.collector.host, self.collector.token, "collector and the dashboard")


def is_clickhouse(db: str) -> bool:
    """Whether the store ``db`` names is a ClickHouse store (else a DuckDB file)."""
    try:
        return isinstance(parse_store(db), ClickHouseURL)
    except SettingsError:
        return False


def _check_exposure(host: str, token: str | None, what: str) -> None:
    try:
        check_exposure(host, token, what)
    except SettingsError as e:
        raise LaunchError(str(e)) from None


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_or_any(host: str, port: int) -> int:
    """``port`` if it can be bound on ``host`` now, else 0 (any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return 0
    return port


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _reachable_host(host: str) -> str:
    """Where a local client connects to reach a server bound to ``host``."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def app_path() -> Path:
    """The dashboard's Streamlit script, found without importing the dashboard."""
    spec = importlib.util.find_spec("midtrace.dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError("the dashboard is not installed with this midtrace")
    return Path(next(iter(spec.submodule_search_locations))) / "app.py"


def streamlit_command(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(app_path()),
            "--server.headless", "true", "--server.address", host, "--server.port", str(port),
            "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "viewer", "--theme.base", "light"]


def streamlit_env(settings: DashboardSettings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (ENV_URL, ENV_DB, ENV_TOKEN, ENV_REQUIRE_TOKEN)}
    env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] = "false"
    if settings.url is not None:
        env[ENV_URL] = settings.url
    if settings.db is not None:
        env[ENV_DB] = settings.db if is_clickhouse(settings.db) else str(Path(settings.db).resolve())
    if settings.token:
        env[ENV_TOKEN] = settings.token
    env[ENV_REQUIRE_TOKEN] = "0" if is_loopback(settings.host) else "1"
    return env


def collector_command(settings: CollectorSettings) -> tuple[list[str], dict[str, str]]:
    """`midtrace collector` with every setting stated: (argv, environment)."""
    argv = [sys.executable, "-m", "midtrace", "collector", "--db", settings.db,
            "--host", settings.host, "--http-port", str(settings.http_port),
            "--grpc-port", str(settings.grpc_port),
            "--max-body-mb", str(settings.max_body_bytes // (1024 * 1024)),
            "--queue-size", str(settings.queue_size),
            "--forward-queue", str(settings.forward_queue)]
    if settings.derive_workers is not None:
        argv += ["--derive-workers", str(settings.derive_workers)]
    if settings.memory_limit is not None:
        argv += ["--memory-limit", f"{settings.memory_limit}B"]
    if not settings.keep_text:
        argv.append("--no-text")
    if settings.prices is not None:
        argv += ["--prices", str(settings.prices)]
    for url in settings.forward:
        argv += ["--forward", url]
    env = {k: v for k, v in os.environ.items() if k not in COLLECTOR_ENV}
    if settings.token:
        env["MIDTRACE_TOKEN"] = settings.token
    if settings.forward_headers:
        env["MIDTRACE_FORWARD_HEADERS"] = ",".join(
            f"{key}={quote(value, safe='')}" for key, value in settings.forward_headers.items())
    return argv, env


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Poll Streamlit's health endpoint until it answers ``ok``; fail if the process exits."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2, trust_env=False) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise LaunchError(f"the dashboard server exited with code {process.returncode} "
                                  "before it was ready (its log is above)")
            try:
                r = http.get(url + HEALTH_PATH)
                if r.status_code == 200 and r.text.strip() == "ok":
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise LaunchError(f"the dashboard server did not answer {HEALTH_PATH} within {timeout:.0f} s")


def check_store(db: str) -> None:
    """Open the ClickHouse store ``db`` in a child process (midtrace/store_check.py) and read
    what the dashboard's first page reads, so a store the dashboard cannot use fails before it
    starts; the child exits before the dashboard opens the store (a chdb folder takes one
    process). LaunchError with the child's one line."""
    run = subprocess.run([sys.executable, "-m", "midtrace.store_check", db], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines()
        raise LaunchError(lines[-1] if lines else f"cannot read {db} (exit code {run.returncode})")


def start_dashboard(settings: DashboardSettings,
                    output: IO[str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start the Streamlit server and wait until it is healthy; returns (process, url)."""
    settings.check()
    port = settings.port or free_port(settings.host)
    process = subprocess.Popen(streamlit_command(settings.host, port), env=streamlit_env(settings),
                               stdout=output or sys.stderr, stderr=output or sys.stderr,
                               stdin=subprocess.DEVNULL)
    url = f"http://{_url_host(settings.host)}:{port}"
    try:
        wait_healthy(f"http://{_url_host(_reachable_host(settings.host))}:{port}", process)
    except BaseException:
        stop(process)
        raise
    return process, url


def start_collector(settings: CollectorSettings) -> tuple[subprocess.Popen[bytes], str]:
    """Start `midtrace collector` and wait for its "listening on URL" line."""
    argv, env = collector_command(settings)
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=sys.stderr,
                               stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        raw = process.stdout.readline()
        if not raw:
            break
        line = raw.decode(errors="replace")
        print(line, end="", file=sys.stderr, flush=True)
        match = COLLECTOR_READY.search(line)
        if match:
            # Keep draining its stdout so the collector never blocks on a full pipe.
            _drain(process.stdout)
            return process, match.group(1)
    stop(process)
    raise LaunchError(f"the collector did not start (exit code {process.poll()}); its log is above")


def _drain(stream: IO[bytes]) -> None:
    def pump() -> None:
        for raw in iter(stream.readline, b""):
            sys.stderr.write(raw.decode(errors="replace"))
    threading.Thread(target=pump, daemon=True).start()


def stop(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Stopper:
    """Turns SIGINT/SIGTERM into a flag the supervising loop reads."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}

    def __enter__(self) -> _Stopper:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _supervise(children: dict[str, subprocess.Popen[bytes]], stopper: _Stopper) -> int:
    """Wait until a stop is asked for (exit 0) or a child dies (stop the rest, exit 1)."""
    try:
        while not stopper.requested:
            for name, child in children.items():
                code = child.poll()
                if code is not None:
                    print(f"midtrace: the {name} exited with code {code}; stopping",
                          file=sys.stderr, flush=True)
                    return 1
            time.sleep(0.2)
        return 0
    finally:
        for child in reversed(list(children.values())):
            stop(child)


def run_dashboard(settings: DashboardSettings) -> int:
    """Serve the dashboard until SIGINT/SIGTERM; the exit code says how it ended."""
    with _Stopper() as stopper:
        process, url = start_dashboard(settings)
        print(f"midtrace dashboard at {url}", flush=True)
        return _supervise({"dashboard": process}, stopper)


def run_serve(settings: ServeSettings) -> int:
    """A team's shared instance: a collector and a dashboard reading through it."""
    settings.check()
    host, token = settings.collector.host, settings.collector.token
    with _Stopper() as stopper:
        collector, collector_url = start_collector(settings.collector)
        children = {"collector": collector}
        try:
            local = collector_url.replace(f"//{_url_host(host)}:",
                                          f"//{_url_host(_reachable_host(host))}:")
            dashboard, url = start_dashboard(DashboardSettings(
                url=local, token=token, host=host, port=settings.dashboard_port))
        except BaseException:
            stop(collector)
            raise
        children["dashboard"] = dashboard
        print(f"midtrace collector at {collector_url} (OTLP/HTTP {collector_url}/v1/traces)",
              flush=True)
        print(f"midtrace dashboard at {url}", flush=True)
        return _supervise(children, stopper)
