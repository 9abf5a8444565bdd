"""The request_evidence refresh, left owed by the commits of worker-derived rows and done for
many commits at once (collector/storage/writer.py, EVIDENCE_SECONDS): the rows come out as
a refresh in every commit makes them, a stop that owed some is made good when the store
opens again, and a reader asking for fresh rows never sees a request without them."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from midtrace.collector.storage.derive import DerivePool, prepare
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.storage.writer import LINGER_SECONDS, POOL_BATCH_SPANS, Writer
from tests.test_derive_workers import as_job, sample_exports, snapshot

# request_evidence against the view it is kept equal to, both ways
DIFFERENCE = """
SELECT count(*) FROM (
    (SELECT * FROM request_evidence EXCEPT ALL SELECT * FROM request_evidence_live)
    UNION ALL
    (SELECT * FROM request_evidence_live EXCEPT ALL SELECT * FROM request_evidence))
"""


def counts(conn: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(requests, request_evidence rows)."""
    row = conn.execute("SELECT (SELECT count(*) FROM requests), "
                       "(SELECT count(*) FROM request_evidence)").fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.fixture(scope="module")
def some() -> list[list[Any]]:
    """Every sixth sample export: own conventions and each framework's, 13 in all."""
    exports = [spans for spans in sample_exports() if spans][::6]
    assert len(exports) >= 12
    return exports


def test_evidence_refreshed_later_is_what_a_refresh_in_each_commit_computes(
        tmp_path: Path, some: list[list[Any]]) -> None:
    groups = [prepare(spans, True) for spans in some]
    at_once = tmp_path / "at_once.duckdb"
    store = Store.open(at_once)
    for group in groups:
        store.apply([(group, [WriteJob()])])
    store.close()

    later = tmp_path / "later.duckdb"
    store = Store.open(later)
    for group in groups:
        store.apply([(group, [WriteJob()])], defer_evidence=True)
    requests, evidence = counts(store.conn)
    assert requests > 20 and evidence == 0
    assert store.owed_evidence == requests
    assert store.refresh_owed() == requests
    assert store.owed_evidence == 0 and counts(store.conn) == (requests, requests)
    store.close()
    assert snapshot(later) == snapshot(at_once)


def test_a_store_opened_after_a_stop_that_owed_evidence_computes_it(
        tmp_path: Path, some: list[list[Any]]) -> None:
    """A collector killed between a commit and its deferred refresh leaves requests without
    request_evidence rows: the next writable open computes exactly those."""
    db = tmp_path / "killed.duckdb"
    store = Store.open(db)
    groups = [prepare(spans, True) for spans in some]
    store.apply([(groups[0], [WriteJob()])])  # refreshed in its commit
    for group in groups[1:]:
        store.apply([(group, [WriteJob()])], defer_evidence=True)
    requests, evidence = counts(store.conn)
    assert 0 < evidence < requests
    store.conn.close()  # as a kill leaves it: no refresh, no closing checkpoint

    store = Store.open(db)
    try:
        assert counts(store.conn) == (requests, requests)
        assert store.conn.execute(DIFFERENCE).fetchone() == (0,)
        assert store.owed_evidence == 0
    finally:
        store.close()


class Reports:
    """``on_derived``: what the store held each time the writer said exports were derived."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[tuple[int, int, int]] = []  # (through, requests, evidence rows)
        self.through = 0
        self.done = threading.Event()
        self.last = 0

    def __call__(self, through: int) -> None:
        requests, evidence = counts(self.store.conn)  # the writer's thread, between commits
        self.seen.append((through, requests, evidence))
        if through >= self.last:
            self.done.set()


@pytest.mark.parametrize("reader_waits", [False, True])
def test_the_writer_refreshes_evidence_for_many_commits_at_once_and_reports_after_it(
        tmp_path: Path, some: list[list[Any]], reader_waits: bool) -> None:
    """One refresh for many commits; while a reader waits for fresh rows, one after each."""
    store = Store.open(tmp_path / "writer.duckdb")
    reports = Reports(store)
    writer = Writer(store, pool=DerivePool(1), max_batch_spans=1,  # a group, and a commit, each
                    on_derived=reports)
    writer.wants_fresh = lambda: reader_waits
    writer.start()
    jobs = [as_job(spans, "raw", i) for i, spans in enumerate(some, 1)]
    reports.last = len(jobs)
    try:
        for job in jobs:  # one at a time: groups whose rows are ready together share a commit
            writer.submit(job).result(120)
        assert reports.done.wait(120), reports.seen
        c = writer.counters
        assert c.failed_jobs == 0 and c.commits == len(jobs), c
        if reader_waits:
            assert c.evidence_refreshes == c.commits, c
        else:
            assert 1 <= c.evidence_refreshes < c.commits, c
        # never told "derived" while a stored request still lacked its evidence
        assert reports.seen and all(req == ev for _, req, ev in reports.seen), reports.seen
        assert reports.seen[-1][0] == len(jobs)
    finally:
        writer.close()
    store = Store.open(tmp_path / "writer.duckdb")
    try:
        assert store.conn.execute(DIFFERENCE).fetchone() == (0,)
    finally:
        store.close()


def test_a_flush_leaves_no_evidence_owed(tmp_path: Path, some: list[list[Any]]) -> None:
    store = Store.open(tmp_path / "flush.duckdb")
    writer = Writer(store, pool=DerivePool(1), max_batch_spans=1).start()
    try:
        for i, spans in enumerate(some, 1):
            writer.submit(as_job(spans, "raw", i))
        writer.flush(120)
        requests, evidence = counts(store.conn)
        assert requests > 20 and evidence == requests and store.owed_evidence == 0
    finally:
        writer.close()


def test_exports_that_arrive_together_are_derived_as_one_group(
        tmp_path: Path, some: list[list[Any]]) -> None:
    """Below its limit a collector gets exports one at a time: those that arrive within
    LINGER_SECONDS of each other go to a worker, and into the store, together."""
    small = [spans for spans in some if len(spans) < 100][:5]
    assert len(small) == 5 and sum(map(len, small)) < POOL_BATCH_SPANS
    store = Store.open(tmp_path / "linger.duckdb")
    reports = Reports(store)
    reports.last = len(small)
    writer = Writer(store, pool=DerivePool(1), on_derived=reports).start()
    ids = itertools.count(1)
    jobs = [as_job(spans, "raw", next(ids)) for spans in small]
    try:
        for job in jobs:  # one at a time, each well within LINGER_SECONDS of the last
            writer.submit(job)
            time.sleep(LINGER_SECONDS / 20)  # not a wait for the writer: exports arrive apart
        assert reports.done.wait(60 + LINGER_SECONDS), reports.seen
        c = writer.counters
        assert c.worker_jobs + c.ahead_jobs == 5 and c.commits == 1, c
    finally:
        writer.close()
