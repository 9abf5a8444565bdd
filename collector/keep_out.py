"""Keeping a package out of a process that needs nothing from it.

pyarrow imports pandas as soon as it converts any Python values to or from Arrow, though it
converts them without it just as well (tz-aware timestamps included), and pandas costs a
process about 33-48 MB of memory. A derive worker (collector/storage/worker.py) and
the collector process on a DuckDB store (midtrace/commands/serving.py) need nothing from
pandas, so they keep it out before anything reaches it. Not a chdb store's collector: chdb
hands over Arrow tables through pandas. This module imports nothing but the standard
library, so that importing it reaches nothing first.
"""

from __future__ import annotations

import importlib.abc
import sys

PANDAS = ("pandas",)


class KeepOut(importlib.abc.MetaPathFinder):
    """Refuses to import the packages named (and their modules) as if they were not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (kept out of this "
                                      "midtrace process)", name=fullname)
        return None


def keep_out(names: tuple[str, ...] = PANDAS) -> None:
    """From now on this process imports none of ``names``. A package already imported is
    left alone, and so are its modules not yet imported: keeping it out would save nothing
    and break it (a command run inside a process that uses pandas already, as in tests)."""
    names = tuple(n for n in names if n not in sys.modules)
    if names and not any(isinstance(f, KeepOut) and f.names == names for f in sys.meta_path):
        sys.meta_path.insert(0, KeepOut(names))
