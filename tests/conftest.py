from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import file_times
from tests.procs import Proc, start_collector


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files first (tests/file_times.py): with files run side by side, a long
    file taken last would set the end of the run."""
    order = file_times.longest_first([item.nodeid for item in items], file_times.load())
    items[:] = [items[i] for i in order]


@pytest.fixture(autouse=True)
def keep_main_module() -> Iterator[None]:
    """Streamlit's AppTest leaves the app script in sys.modules["__main__"]; a process pool
    started with spawn afterwards (the collector's derive workers) would run that script in
    each worker. Put the test runner's own back after every test."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "traces.duckdb"


@pytest.fixture
def collector(tmp_path: Path, db_path: Path) -> Iterator[Proc]:
    """A real collector process on a free loopback port, writing ``db_path``."""
    proc = start_collector(db_path, tmp_path / "collector.log")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def chdb_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one chdb folder of this test process: chdb opens a single folder per process, so
    every ClickHouse test in the process shares it and keeps apart by database
    (``chdb_database``)."""
    return tmp_path_factory.mktemp("chdb") / "store"


@pytest.fixture
def chdb_database(chdb_folder: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A ClickHouseURL of a new, empty database in this process's chdb folder."""
    import dataclasses
    import re

    from midtrace.collector.settings import ClickHouseURL

    name = "t_" + re.sub(r"\W", "_", request.node.name)[:80]
    return dataclasses.replace(ClickHouseURL("chdb", path=chdb_folder), database=name)


@pytest.fixture(scope="session")
def sample_stores(chdb_folder: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The bundled sample traces in a DuckDB file and in the default database of this
    process's chdb folder (tests/clickhouse_samples.py), the one ``--store chdb://<folder>``
    names: (DuckDB path, ClickHouseURL)."""
    from midtrace.collector.settings import ClickHouseURL
    from tests.clickhouse_samples import load_samples
    from tests.sample_db import samples_duckdb

    work = tmp_path_factory.mktemp("samples")
    db = samples_duckdb(tmp_path_factory, work / "samples.duckdb")
    url = ClickHouseURL("chdb", path=chdb_folder)
    load_samples(db, url, work)
    return db, url
