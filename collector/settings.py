"""The collector's settings, and the one rule every server midtrace starts follows:
bound beyond loopback, it asks for a token.

Standard library only: the CLI and the process supervisor build these without importing
the server's dependencies.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

DEFAULT_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 4318
DEFAULT_GRPC_PORT = 4317
DEFAULT_MAX_BODY_MB = 64
DEFAULT_QUEUE_SIZE = 256
DEFAULT_FORWARD_QUEUE = 1000


class SettingsError(ValueError):
    """Settings that cannot work; the message says how to fix them."""


# Sizes as DuckDB writes them: KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB of 1024.
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", re.I)
MIN_MEMORY_LIMIT = 64 * 2**20  # below this DuckDB cannot hold one group of exports


def parse_size(text: str) -> int:
    """Bytes in a size such as ``512MB``, ``1.5GiB`` or ``268435456B``."""
    match = _SIZE.fullmatch(text)
    if match is None or match[2].lower() not in _UNITS:
        raise SettingsError(f"{text!r} is not a size: give a number and a unit, e.g. 512MB or "
                            "2GiB (KB, MB, GB, TB count in 1000s; KiB, MiB, GiB, TiB in 1024s)")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def memory_limit(text: str | None) -> int | None:
    """``--memory-limit`` in bytes (None: not set), at least MIN_MEMORY_LIMIT."""
    if text is None or not text.strip():
        return None
    size = parse_size(text)
    if size < MIN_MEMORY_LIMIT:
        raise SettingsError(f"--memory-limit {text.strip()} is too small: DuckDB needs at least "
                            f"{MIN_MEMORY_LIMIT >> 20}MiB to store a group of exports")
    return size


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


CLICKHOUSE_SCHEMES = ("clickhouse", "clickhouses", "chdb")
CLICKHOUSE_PASSWORD_ENV = "MIDTRACE_CLICKHOUSE_PASSWORD"


@dataclass(frozen=True)
class ClickHouseURL:
    """A ClickHouse store (docs/architecture.md, "Two engines"): ``clickhouse://user@host:port/db``
    (HTTP, port 8123 by default), ``clickhouses://...`` (HTTPS, 8443), or ``chdb:///path``
    (the in-process engine on a folder). The password is never part of it: it comes from
    MIDTRACE_CLICKHOUSE_PASSWORD when the store is opened."""

    scheme: str
    host: str = ""
    port: int = 0
    user: str = "default"
    database: str = "default"
    path: Path | None = None  # chdb

    def __str__(self) -> str:
        if self.scheme == "chdb":
            return f"chdb://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{self.user}@{host}:{self.port}/{self.database}"


def parse_store(url: str) -> Path | ClickHouseURL:
    """What a ``--store`` value names: a DuckDB file (a path, or ``duckdb:///absolute/path``;
    ``duckdb://relative/path`` is relative to the working directory), or a ClickHouse store."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        if not url.strip():
            raise SettingsError("--store is empty; give a DuckDB file path")
        return Path(url)
    if scheme == "duckdb" and rest:
        return Path(rest)
    if scheme == "chdb":
        if not rest.strip("/"):
            raise SettingsError("chdb:// needs a folder: chdb:///absolute/path or chdb://relative/path")
        return ClickHouseURL("chdb", path=Path(rest))
    if scheme in ("clickhouse", "clickhouses"):
        return _server_url(scheme, url)
    raise SettingsError(f"{url!r} is not a store midtrace knows: give a DuckDB file path, "
                        "duckdb:///path, clickhouse://user@host:8123/db or chdb:///path")


def _server_url(scheme: str, url: str) -> ClickHouseURL:
    parts = urlsplit(url)
    if parts.password is not None:
        raise SettingsError(f"put the ClickHouse password in {CLICKHOUSE_PASSWORD_ENV}, not in "
                            "the store URL (a URL shows in ps and in logs)")
    if not parts.hostname:
        raise SettingsError(f"{scheme}:// needs a host: {scheme}://user@host:port/database")
    try:
        port = parts.port or (8443 if scheme == "clickhouses" else 8123)
    except ValueError as e:
        raise SettingsError(f"{url!r}: {e}") from None
    database = parts.path.strip("/") or "default"
    if not database.replace("_", "").isalnum():
        raise SettingsError(f"{database!r} is not a ClickHouse database name midtrace accepts "
                            "(letters, digits and _)")
    return ClickHouseURL(scheme, host=parts.hostname, port=port,
                         user=unquote(parts.username or "default"), database=database)


def store_path(url: str) -> Path:
    """The DuckDB file a ``--store`` value names, for a command that has no ClickHouse path yet."""
    store = parse_store(url)
    if isinstance(store, ClickHouseURL):
        raise SettingsError(f"this command cannot use a ClickHouse store ({store.scheme}://) "
                            "yet: give a DuckDB file path or duckdb:///path")
    return store


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
    memory_limit: int | None = None  # bytes of DuckDB's cache; None: DuckDB's default

    def check(self) -> None:
        check_exposure(self.host, self.token, "collector (OTLP and its query API)")
        if self.memory_limit is not None and isinstance(parse_store(self.db), ClickHouseURL):
            raise SettingsError("--memory-limit caps the memory of a DuckDB store; a ClickHouse "
                                "server's memory is set on the server")
