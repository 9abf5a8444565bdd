"""`midtrace demo`: the bundled sample traces in a fresh store, collector and dashboard up.

The samples go in through the same ingest path as any OTLP/JSON file, then `serve` starts
the collector and the dashboard on that store: a DuckDB file, or a ClickHouse store.

``python -m midtrace.demo STORE [--no-text]`` loads the samples into a ClickHouse store in a
process of its own: `midtrace demo` runs it so for a chdb folder, which only one process can
hold at a time, and that process must be the collector's.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from midtrace.collector.intake.ingest import IngestReport, ingest_files
from midtrace.collector.settings import ClickHouseURL, SettingsError, parse_store
from midtrace.collector.storage.database import StoreError

DEFAULT_DB = Path(".midtrace") / "demo.duckdb"
# Tables every midtrace store on ClickHouse has: a database holding one is never the demo's
# to fill (the demo drops nothing on a server).
CLICKHOUSE_MARKS = ("schema_migrations", "spans", "requests_versions", "requests")


class DemoError(Exception):
    """The demo cannot start as asked; the message says why and what to do. (A store that
    cannot be opened or written raises StoreError instead.)"""


def sample_files() -> list[Path]:
    """Trace files first, then outcome files (an outcome may name a trace loaded before it)."""
    folder = Path(str(resources.files("midtrace.sample_traces")))
    traces = sorted(folder.glob("*.jsonl.gz")) + sorted(folder.glob("*.jsonl"))
    outcomes = sorted(folder.glob("*outcomes*.json"))
    if not traces:
        raise DemoError(f"no sample traces in {folder}")
    return traces + outcomes


def fresh_database(db: Path | ClickHouseURL, owned: bool) -> None:
    """Make room for a fresh demo store at ``db``.

    The demo's own default file is replaced; a file or chdb folder the user named is never
    deleted, and a ClickHouse server's database that already holds midtrace's tables is
    refused, never dropped.
    """
    if isinstance(db, ClickHouseURL) and db.scheme != "chdb":
        _empty_database(db)
        return
    where = db.path if isinstance(db, ClickHouseURL) else db
    try:
        if isinstance(db, ClickHouseURL):
            _fresh_folder(db, owned)
        else:
            _fresh_file(db, owned)
    except OSError as e:  # a parent that is a file, a folder it may not write
        why = f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)
        raise DemoError(f"cannot make room for the demo's store at {where} ({why}); name a "
                        "place you can write with --store") from None


def _fresh_file(db: Path, owned: bool) -> None:
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        return
    if not owned:
        raise DemoError(f"{db} already exists; the demo builds a fresh database, so name a "
                        "new file with --store (or delete this one)")
    for path in (db, db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)


def _fresh_folder(url: ClickHouseURL, owned: bool) -> None:
    assert url.path is not None
    if url.path.exists():
        if not owned:
            raise DemoError(f"{url.path} already exists; the demo builds a fresh store, so name "
                            "a new folder with --store chdb:///new/folder (or delete this one)")
        shutil.rmtree(url.path)
    url.path.parent.mkdir(parents=True, exist_ok=True)


def _empty_database(url: ClickHouseURL) -> None:
    from midtrace.collector.storage import clickhouse
    from midtrace.sql import sqlfiles

    conn = clickhouse.connect(url)
    try:
        found = conn.query(sqlfiles.query("store_tables", engine=clickhouse.ENGINE))
        tables = set(found.column(0).to_pylist())
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise StoreError(f"cannot read {url}: {first}") from None
    finally:
        conn.close()
    held = [name for name in CLICKHOUSE_MARKS if name in tables]
    if held:
        raise DemoError(f"{url} already holds a midtrace store (its table {held[0]}); the "
                        "demo builds a fresh one and never drops a database, so name a new, "
                        "empty database in --store (CREATE DATABASE on the server)")


def load_samples(db: Path | ClickHouseURL, keep_text: bool = True,
                 progress: Callable[[int], None] | None = None) -> IngestReport:
    """Ingest the sample files into the store ``db`` (made fresh by fresh_database);
    ``progress(1)`` as each file is done. A chdb folder is loaded in a child process, so
    that this one never holds it."""
    if isinstance(db, ClickHouseURL) and db.scheme == "chdb":
        return _load_in_child(db, keep_text, progress)
    return _load(db, keep_text, progress)


def _load(db: Path | ClickHouseURL, keep_text: bool,
          progress: Callable[[int], None] | None) -> IngestReport:
    from midtrace.collector.storage.store import open_writable

    store = open_writable(db, keep_text=keep_text)
    try:
        return ingest_files(store, sample_files(), progress=progress)
    finally:
        store.close()


def _load_in_child(db: ClickHouseURL, keep_text: bool,
                   progress: Callable[[int], None] | None) -> IngestReport:
    """The child prints a line per file loaded, then the report as JSON."""
    argv = [sys.executable, "-m", "midtrace.demo", str(db)] + ([] if keep_text else ["--no-text"])
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                 stdin=subprocess.DEVNULL)
        assert child.stdout is not None
        last = ""
        for line in child.stdout:
            last = line
            if line.strip() == "file" and progress:
                progress(1)
        child.wait()
        log.seek(0)
        errors = log.read()
    if child.returncode != 0 or not last.startswith("{"):
        lines = errors.strip().splitlines()
        raise StoreError(lines[-1] if lines else
                         f"loading the samples into {db} failed (exit code {child.returncode})")
    return IngestReport(**json.loads(last))


def main(argv: list[str]) -> int:
    """Load the samples into the ClickHouse store ``argv[0]``; a line per file, the report as
    JSON last; a failure as one line on stderr, exit 3."""
    try:
        db = parse_store(argv[0])
        if not isinstance(db, ClickHouseURL):
            raise DemoError(f"{argv[0]} is not a ClickHouse store")
        report = _load(db, "--no-text" not in argv[1:], lambda n: print("file", flush=True))
    except (DemoError, SettingsError, StoreError) as e:
        print(e, file=sys.stderr)
        return 3
    print(json.dumps(dataclasses.asdict(report)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
