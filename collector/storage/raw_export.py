"""One export as received, the unit the intake log keeps (collector/storage/intake_log.py)
and a derive worker reads (collector/storage/derive.py). A module of its own so that a derive
worker, which never opens the database, does not import DuckDB to read one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RawExport:
    """One export as received: its body (still gzipped if it came so) and how to read it."""

    body: bytes
    content_type: str
    content_encoding: str | None = None
