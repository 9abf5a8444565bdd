"""`midtrace demo`: the bundled sample traces in a fresh database, collector and dashboard up.

The samples go in through the same ingest path as any OTLP/JSON file, then `serve` starts
the collector and the dashboard on that database.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from midtrace.collector.intake.ingest import IngestReport, ingest_files
from midtrace.collector.storage.store import Store

DEFAULT_DB = Path(".midtrace") / "demo.duckdb"


class DemoError(Exception):
    """The demo cannot start; the message says why and what to do."""


def sample_files() -> list[Path]:
    """Trace files first, then outcome files (an outcome may name a trace loaded before it)."""
    folder = Path(str(resources.files("midtrace.sample_traces")))
    traces = sorted(folder.glob("*.jsonl.gz")) + sorted(folder.glob("*.jsonl"))
    outcomes = sorted(folder.glob("*outcomes*.json"))
    if not traces:
        raise DemoError(f"no sample traces in {folder}")
    return traces + outcomes


def fresh_database(db: Path, owned: bool) -> None:
    """Make room for a fresh demo database at ``db``.

    The demo's own default file is replaced; a file the user named is never deleted.
    """
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        return
    if not owned:
        raise DemoError(f"{db} already exists; the demo builds a fresh database, so name a "
                        "new file with --db (or delete this one)")
    for path in (db, db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)


def load_samples(db: Path, keep_text: bool = True,
                 progress: Callable[[int], None] | None = None) -> IngestReport:
    store = Store.open(db, keep_text=keep_text)
    try:
        return ingest_files(store, sample_files(), progress=progress)
    finally:
        store.close()
