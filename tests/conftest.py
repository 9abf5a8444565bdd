from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import Proc, start_collector


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "traces.duckdb"


@pytest.fixture
def collector(tmp_path: Path, db_path: Path) -> Iterator[Proc]:
    """A real collector process on a free loopback port, writing ``db_path``."""
    proc = start_collector(db_path, tmp_path / "collector.log")
    yield proc
    proc.stop()
