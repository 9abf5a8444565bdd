"""A ClickHouse database of its own on the one chdb folder of the test process."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from midtrace.collector.settings import ClickHouseURL
from midtrace.collector.storage import clickhouse


def database_url(folder: Path, database: str) -> ClickHouseURL:
    """The URL of ``database`` in the chdb folder ``folder``, created empty (dropped first if a
    test made it before)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", database):
        raise ValueError(f"not a database name: {database!r}")
    url = ClickHouseURL("chdb", path=folder)
    default = clickhouse.connect(url)
    default.command(f"DROP DATABASE IF EXISTS {database}")
    default.command(f"CREATE DATABASE {database}")
    return dataclasses.replace(url, database=database)


def connection_in(folder: Path, database: str) -> clickhouse.Connection:
    """A connection to ``database`` in the chdb folder ``folder``, created empty."""
    return clickhouse.connect(database_url(folder, database))
