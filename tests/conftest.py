from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import Proc, start_collector


@pytest.fixture(autouse=True)
def keep_main_module() -> Iterator[None]:
    """Streamlit's AppTest leaves the app script in sys.modules["__main__"]; a process pool
    started with spawn afterwards (the collector's derive workers) would run that script in
    each worker. Put the test runner's own back after every test."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def chdb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one chdb path of this test process: chdb's embedded server opens one path per
    process, so every test module that runs ClickHouse works in databases of its own there
    (tests/chdb_databases.py)."""
    return tmp_path_factory.mktemp("chdb") / "chdb"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "traces.duckdb"


@pytest.fixture
def collector(tmp_path: Path, db_path: Path) -> Iterator[Proc]:
    """A real collector process on a free loopback port, writing ``db_path``."""
    proc = start_collector(db_path, tmp_path / "collector.log")
    yield proc
    proc.stop()
