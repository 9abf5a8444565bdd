"""A chdb session in a database of its own, on the one chdb path of the test process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chdb import session as chdb_session


def session_in(path: Path, database: str) -> Any:
    """A new chdb session on ``path`` using ``database``, created empty (dropped first if a
    test made it before)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", database):
        raise ValueError(f"not a database name: {database!r}")
    session = chdb_session.Session(str(path))
    session.query(f"DROP DATABASE IF EXISTS {database}")
    session.query(f"CREATE DATABASE {database}")
    session.query(f"USE {database}")
    return session
