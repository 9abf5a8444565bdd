"""The collector's settings, and the one rule every server midtrace starts follows:
bound beyond loopback, it asks for a token.

Standard library only: the CLI and the process supervisor build these without importing
the server's dependencies.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 4318
DEFAULT_GRPC_PORT = 4317
DEFAULT_MAX_BODY_MB = 64
DEFAULT_QUEUE_SIZE = 256
DEFAULT_FORWARD_QUEUE = 1000


class SettingsError(ValueError):
    """Settings that cannot work; the message says how to fix them."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None, what: str) -> None:
    """Refuse to serve ``what`` beyond this machine without a token."""
    if token is not None and not token.strip():
        raise SettingsError("--token / MIDTRACE_TOKEN is empty; set a token or leave it unset")
    if not is_loopback(host) and not token:
        raise SettingsError(
            f"--host {host} exposes the {what} beyond this machine, so it needs a token: set "
            "MIDTRACE_TOKEN (or --token, which other users can see in ps), or bind 127.0.0.1")


def store_path(url: str) -> Path:
    """The DuckDB file a ``--store`` value names: a path, or ``duckdb:///absolute/path``
    (``duckdb://relative/path`` is relative to the working directory)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        if not url.strip():
            raise SettingsError("--store is empty; give a DuckDB file path")
        return Path(url)
    if scheme == "duckdb" and rest:
        return Path(rest)
    if scheme in ("clickhouse", "clickhouses", "chdb"):
        raise SettingsError(f"{scheme}:// stores are not supported by this version of midtrace; "
                            "give a DuckDB file path or duckdb:///path")
    raise SettingsError(f"{url!r} is not a store midtrace knows: give a DuckDB file path or "
                        "duckdb:///path")


@dataclass(frozen=True)
class CollectorSettings:
    db: str
    host: str = DEFAULT_HOST
    http_port: int = DEFAULT_HTTP_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_MB * 1024 * 1024
    queue_size: int = DEFAULT_QUEUE_SIZE
    derive_workers: int | None = None  # None: the cores but one (derive.default_workers)
    grpc_port: int = DEFAULT_GRPC_PORT
    token: str | None = None
    keep_text: bool = True
    forward: tuple[str, ...] = ()
    forward_headers: dict[str, str] = field(default_factory=dict)
    forward_queue: int = DEFAULT_FORWARD_QUEUE
    prices: Path | None = None  # the price table (midtrace/prices.py); None: MIDTRACE_PRICES, else shipped

    def check(self) -> None:
        check_exposure(self.host, self.token, "collector (OTLP and its query API)")
