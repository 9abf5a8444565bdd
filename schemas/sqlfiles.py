"""The SQL of midtrace, kept in .sql files beside this module: migrations and metric views."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_MIGRATION = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class SqlFile:
    version: int
    name: str
    sql: str


def _folder(name: str) -> list[SqlFile]:
    files = []
    for entry in resources.files("midtrace.schemas").joinpath("sql", name).iterdir():
        match = re.match(r"^(\d+)_([a-z0-9_]+)\.sql$", entry.name)
        if match:
            files.append(SqlFile(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(files, key=lambda f: f.version)


def migrations() -> list[SqlFile]:
    """Numbered table migrations, in the order they must be applied."""
    return _folder("migrations")


def views() -> list[SqlFile]:
    """Metric view definitions (CREATE OR REPLACE VIEW), in dependency order."""
    return _folder("views")


@lru_cache(maxsize=None)
def query(name: str) -> str:
    """A named query from schemas/sql/queries/."""
    return resources.files("midtrace.schemas").joinpath("sql", "queries", f"{name}.sql").read_text(encoding="utf-8")
