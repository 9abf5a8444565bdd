"""Where a derive worker process starts (collector/storage/derive.py, DerivePool).

A worker builds Arrow tables from Python values and needs nothing from pandas, which pyarrow
would import as soon as it converts any (about 48 MB of memory in every worker). So before
the worker imports anything else, pandas is kept out of it (collector/keep_out.py). This
module imports nothing but the standard library, so that nothing reaches pandas first.
"""

from __future__ import annotations

from multiprocessing.connection import Connection

from midtrace.collector.keep_out import keep_out


def serve(conn: Connection) -> None:
    """A worker's life (derive._serve), once pandas is kept out of it."""
    keep_out()
    from midtrace.collector.storage.derive import _serve

    _serve(conn)
