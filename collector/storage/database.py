"""Opening a DuckDB file, and what to tell the user when the file cannot be used.

Every way into a store goes through :func:`connect` (the writer's ``Store.open``, the
read-only file client, compaction). A file that is not a DuckDB database, one another process
holds, one written by a newer DuckDB, or one with a damaged block becomes a :class:`StoreError`
whose message is one line: what is wrong with the file and what to do. :func:`describe` says
the same of a DuckDB error met later, while reading or writing (a damaged block is found only
when something reads it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb

from midtrace.collector.settings import parse_size

# DuckDB's main file header: an 8-byte checksum, then these magic bytes.
_MAGIC = b"DUCK"
_MAGIC_AT = 8
_SQLITE = b"SQLite format 3\x00"
_LOCK_PID = re.compile(r"PID (\d+)")
_DAMAGE = re.compile(r"corrupt|checksum|could not read enough bytes|failed to deserial|"
                     r"invalidated", re.I)
_NEWER_DUCKDB = re.compile(r"version number|storage version|newer version", re.I)
RESTORE = "restore it from a backup (docs/collector.md, \"Backup\") or move it aside to start a new store"


class StoreError(Exception):
    """The database cannot be used; the message says why and what to do."""


class DatabaseBusy(StoreError):
    """Another process (a running collector) holds the database file."""


# DuckDB folds its write-ahead log into the file once the log reaches this size (its default
# is 16MB). Until then what the log holds stays in DuckDB's memory, and a checkpoint holds it
# twice while it writes it out: the threshold sets the collector's peak memory. The intake
# log's bodies are compressed (raw_export.compact), so the log is mostly derived rows.
# bench/ingest.py, 20,000 requests, three alternating rounds at load 1.6-2.3: at 32MB
# against 256MB the collector peaked at 885-906 MB against 942-957 (own conventions) and
# 1,001-1,100 against 1,259-1,324 (OpenInference), deriving as fast (mean ratio 0.99 and
# 1.00; single pairs 0.79-1.21x). A crash replays at most this much log on the next open; a
# clean stop folds it in (Store.close).
CHECKPOINT_THRESHOLD = "32MB"


def writer_config(memory_limit: int | None = None) -> dict[str, str]:
    """DuckDB's settings for the store's writer. ``memory_limit`` (bytes; None: DuckDB's
    default, 80% of the machine's memory) caps DuckDB's cache. Blocks written since the last
    checkpoint must stay in that memory, so under a limit the write-ahead log is folded in
    once it reaches a quarter of it (held to 128 MB with the log at 256 MB, DuckDB could not
    commit after a few hundred OpenInference requests; with the log at 32 MB it took 20,000)."""
    if memory_limit is None:
        return {"checkpoint_threshold": CHECKPOINT_THRESHOLD}
    log_bytes = min(parse_size(CHECKPOINT_THRESHOLD), memory_limit // 4)
    return {"memory_limit": f"{memory_limit}B", "checkpoint_threshold": f"{log_bytes}B"}


def connect(path: str | Path, read_only: bool = False,
            memory_limit: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, or raise a StoreError that says what is wrong with it.
    ``memory_limit``: see ``writer_config`` (a read-only client keeps DuckDB's default)."""
    path = Path(path)
    _check_header(path)
    try:
        return duckdb.connect(str(path), read_only=read_only,
                              config={} if read_only else writer_config(memory_limit))
    except duckdb.Error as e:
        message = str(e)
        if isinstance(e, duckdb.IOException) and "lock" in message.lower():
            pid = _LOCK_PID.search(message)
            holder = f" (pid {pid[1]})" if pid else ""
            raise DatabaseBusy(
                f"{path} is held by another process{holder}, most likely a running midtrace "
                "collector; stop it, or read through it with --url") from e
        raise describe(path, e) from e


def _check_header(path: Path) -> None:
    # A file that is not DuckDB's is refused before DuckDB sees it: DuckDB would try to load
    # an extension for some formats (SQLite), from the network if need be.
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE))
    except FileNotFoundError:
        return  # a new store
    except IsADirectoryError:
        raise StoreError(f"{path} is a directory; name a DuckDB file, e.g. {path / 'traces.duckdb'}") from None
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
    if head[_MAGIC_AT:_MAGIC_AT + len(_MAGIC)] == _MAGIC:
        return
    what = ("is empty" if not head else
            "is a SQLite database" if head == _SQLITE else "is not a DuckDB database file")
    raise StoreError(f"{path} {what}, not a midtrace store; name a store midtrace wrote, or a "
                     "path that does not exist yet for a new one")


def describe(path: str | Path | None, error: duckdb.Error) -> StoreError:
    """A DuckDB error met while using the file at ``path``, as one line saying what to do."""
    return known_cause(path, error) or StoreError(
        f"cannot use {path or 'the store'}: {first_line(error)}")


def known_cause(path: str | Path | None, error: duckdb.Error) -> StoreError | None:
    """What is wrong with the file when ``error`` shows it (a damaged block, a newer DuckDB's
    format), as one line saying what to do; None when the error does not say."""
    where = str(path) if path is not None else "the store"
    reason = first_line(error)
    if "No space left" in str(error):
        return StoreError(f"{where} cannot be written: the disk is full ({reason}); free some "
                          "space and run the command again")
    if _DAMAGE.search(str(error)):
        return StoreError(f"{where} is damaged ({reason}); {RESTORE}")
    if isinstance(error, duckdb.IOException) and _NEWER_DUCKDB.search(str(error)):
        return StoreError(f"{where} was written by a newer DuckDB than this midtrace uses "
                          f"({reason}); upgrade midtrace to open it")
    return None


def is_fatal(error: BaseException) -> bool:
    """Whether nothing works on the connection until the store is reopened: DuckDB
    invalidated the database (e.g. a checkpoint failed on a full disk), or ran out of memory.
    Out of memory, DuckDB's cache is full of blocks it cannot evict and a rollback that needs
    memory fails too, leaving a transaction nothing ends ("Current transaction is aborted"):
    a new instance starts with an empty cache."""
    return (isinstance(error, (duckdb.FatalException, duckdb.OutOfMemoryException))
            or _REOPEN.search(str(error)) is not None)


def committed_anyway(error: BaseException) -> bool:
    """Whether a COMMIT that raised was durable all the same: DuckDB's automatic checkpoint
    after it failed (e.g. a full disk), which invalidates the database but keeps what the
    write-ahead log holds, the commit included."""
    return is_fatal(error) and "COMMIT succeeded and is durable" in str(error)


class CommittedThenInvalidated(duckdb.FatalException):
    """A COMMIT that held, after which DuckDB's automatic checkpoint failed and invalidated
    the database (``committed_anyway``). ``result`` is what the committed work returned, set
    by the code that did it; the store must be reopened before it writes again."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.result: Any = None


# What DuckDB says when it must be reopened, also where it wraps the cause in another error
# ("TransactionContext Error: Failed to commit: failed to pin block of size 1.3 MiB").
_REOPEN = re.compile(r"invalidated|Current transaction is aborted|failed to pin block|"
                     r"could not allocate block|failed to allocate data")


def is_storage_error(error: BaseException) -> bool:
    """Whether a write failed for want of storage (a full disk, memory, an invalidated
    database), not for what it was writing: the same write may succeed later."""
    text = str(error)
    return (is_fatal(error) or isinstance(error, duckdb.IOException)
            or "No space left" in text or "Could not write file" in text)


def is_unreachable(error: BaseException) -> bool:
    """Whether a shared store's statement failed for want of the server (a connection refused
    or cut, a timeout), not because of what it said: the same statement may succeed later."""
    try:
        from clickhouse_connect.driver.exceptions import OperationalError
    except ImportError:
        return False
    return isinstance(error, OperationalError)


def first_line(error: BaseException) -> str:
    """The first line of an error's message (DuckDB adds hints and links on later lines)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
