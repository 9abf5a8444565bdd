"""Run by tests/e2e/test_disk_full.py inside a mount namespace of its own: append exports to
a store on a small tmpfs until DuckDB's automatic checkpoint after a commit fails for want of
space, free the space, append once more, and print (JSON) what each caller was answered and
which exports the intake log holds.

Only the intake log commits here (the writer is not started), so the commit whose checkpoint
fails is always an append."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from midtrace.collector.storage.appender import Appender, Freshness
from midtrace.collector.storage.intake_log import IntakeLog
from midtrace.collector.storage.raw_export import RawExport
from midtrace.collector.storage.store import Store
from midtrace.collector.storage.writer import Writer

ROOM = 6 << 20  # what the log needs to reach the threshold, not what a checkpoint then writes


def send(appender: Appender, answers: list[list[object]]) -> None:
    body = os.urandom(256 << 10)  # incompressible: a checkpoint writes all of it
    try:
        answer: object = appender.submit(RawExport(body, "application/x-protobuf", None),
                                         [], 1).result(30)
    except Exception as e:
        answer = f"{type(e).__name__}: {e}"
    answers.append([answer, body[:16].hex()])


def main(folder: Path) -> None:
    logging.basicConfig(level=logging.WARNING)
    store = Store.open(folder / "store.duckdb")
    store.conn.execute("SET checkpoint_threshold = '4MiB'")
    store.conn.execute("CHECKPOINT")
    appender = Appender(IntakeLog(store.conn), Writer(store), Freshness()).start()
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * (shutil.disk_usage(folder).free - ROOM))
    answers: list[list[object]] = []
    while len(answers) < 40 and appender.unwritable is None:
        send(appender, answers)
    os.remove(folder / "filler")
    deadline = time.monotonic() + 30
    while appender.reopens == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    send(appender, answers)
    held = {e.export.body[:16].hex(): e.export_id for e in appender.log.pending()}
    print(json.dumps({"answers": answers, "held": held, "reopens": appender.reopens}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
