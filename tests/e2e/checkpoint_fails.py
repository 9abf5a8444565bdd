"""Run by tests/e2e/test_disk_full.py inside a mount namespace of its own: commit to a store
on a small tmpfs until DuckDB's automatic checkpoint after a commit fails for want of space,
free the space, commit once more, and print (JSON) what each caller was answered and what
the store holds.

One part commits at a time, so the commit whose checkpoint fails is always one of its own:
``appender``, exports appended to the intake log (the writer is not started); ``writer``,
spans written by the writer thread (no appender)."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from midtrace.collector.storage.appender import Appender, Freshness
from midtrace.collector.storage.intake_log import IntakeLog
from midtrace.collector.storage.raw_export import RawExport, as_received
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.storage.writer import Writer
from midtrace.schemas.span import SpanRecord

ROOM = 6 << 20  # what the log needs to reach the threshold, not what a checkpoint then writes


def answer(call: Callable[[], object]) -> object:
    try:
        return call()
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def appender_run(folder: Path, store: Store) -> dict[str, object]:
    appender = Appender(IntakeLog(store.conn), Writer(store), Freshness()).start()
    answers: list[list[object]] = []

    def send() -> None:
        body = os.urandom(256 << 10)  # incompressible: a checkpoint writes all of it
        export = RawExport(body, "application/x-protobuf", None)
        answers.append([answer(lambda: appender.submit(export, [], 1).result(30)),
                        body[:16].hex()])

    fill(folder)
    while len(answers) < 40 and appender.unwritable is None:
        send()
    os.remove(folder / "filler")
    deadline = time.monotonic() + 30
    while appender.reopens == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    send()
    held = {as_received(e.export).body[:16].hex(): e.export_id for e in appender.log.pending()}
    return {"answers": answers, "held": held, "reopens": appender.reopens}


def writer_run(folder: Path, store: Store) -> dict[str, object]:
    # DuckDB writes a large commit that will checkpoint straight into the file, skipping the
    # log; if that checkpoint fails the commit fails, which the writer handles as any failed
    # write. Here every commit goes through the log first, as small ones do.
    store.conn.execute("SET auto_checkpoint_skip_wal_threshold = 1000000000")
    fatal: list[BaseException] = []
    writer = Writer(store, on_fatal=fatal.append).start()
    answers: list[list[object]] = []

    def send() -> None:
        trace_id = os.urandom(16).hex()
        text = base64.b64encode(os.urandom(192 << 10)).decode()  # a checkpoint writes all of it
        span = SpanRecord(trace_id=trace_id, span_id=os.urandom(8).hex(), name="s", start_ns=1,
                          end_ns=2, attributes={"note": text})
        stats = answer(lambda: writer.submit(WriteJob(spans=[span])).result(30))
        answers.append([stats if isinstance(stats, str) else stats.spans, trace_id])

    fill(folder)
    while len(answers) < 40 and not fatal:
        send()
    os.remove(folder / "filler")
    store.reopen()  # what the collector's appender does when the writer reports it
    send()
    held = [row[0] for row in store.conn.execute("SELECT DISTINCT trace_id FROM spans").fetchall()]
    return {"answers": answers, "held": {t: 1 for t in held}, "reopens": len(fatal)}


def fill(folder: Path) -> None:
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * (shutil.disk_usage(folder).free - ROOM))


def main(folder: Path, part: str) -> None:
    logging.basicConfig(level=logging.WARNING)
    store = Store.open(folder / "store.duckdb")
    store.conn.execute("SET checkpoint_threshold = '4MiB'")
    store.conn.execute("CHECKPOINT")
    run = appender_run if part == "appender" else writer_run
    print(json.dumps(run(folder, store)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
