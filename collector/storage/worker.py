"""Where a derive worker process starts (collector/storage/derive.py, DerivePool).

A worker builds Arrow tables from Python values, and pyarrow imports pandas as soon as it
converts any (about 48 MB of memory in every worker) although it needs it for nothing a
worker does. So before the worker imports anything else, pandas is kept out of it: pyarrow
then converts without it (tz-aware timestamps included). This module imports nothing but the
standard library, so that nothing reaches pandas first.
"""

from __future__ import annotations

import importlib.abc
import sys
from multiprocessing.connection import Connection

KEPT_OUT = ("pandas",)


class KeepOut(importlib.abc.MetaPathFinder):
    """Refuses to import the packages named (and their modules) as if they were not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (kept out of derive "
                                      "workers)", name=fullname)
        return None


def serve(conn: Connection) -> None:
    """A worker's life (derive._serve), once pandas is kept out of it."""
    sys.meta_path.insert(0, KeepOut(KEPT_OUT))
    from midtrace.collector.storage.derive import _serve

    _serve(conn)
