"""The bundled sample traces ingested once per test run by the CLI, copied for each reader.

Several test modules read the same DuckDB file of every sample (the reports, the chunk scan,
both engines side by side), and an ingest of them all takes 15-20 s. The first module to ask
builds it under a lock in the run's temporary folder, which the test processes share; each
caller gets a copy of its own, so nothing one test writes reaches another.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from tests.clickhouse_samples import ingest_samples


def _run_folder(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this test run: the parent of a test process's own under
    pytest-xdist, the process's own otherwise."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def samples_duckdb(factory: pytest.TempPathFactory, dest: Path) -> Path:
    """A copy at ``dest`` of the DuckDB file holding every sample ingested through the CLI
    (tests/clickhouse_samples.py: ``ingest_samples``)."""
    shared = _run_folder(factory) / "samples-ingested-once"
    shared.mkdir(exist_ok=True)
    built = shared / "samples.duckdb"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            building = shared / "building.duckdb"
            for stale in (building, building.with_name(building.name + ".wal")):
                stale.unlink(missing_ok=True)
            ingest_samples(building)
            # a clean close folds the write-ahead log into the file: the file alone is whole
            assert not building.with_name(building.name + ".wal").exists()
            building.rename(built)
    shutil.copyfile(built, dest)
    return dest
