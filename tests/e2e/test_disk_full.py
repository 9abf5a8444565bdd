"""A full disk: the collector answers 503 (retry) while it cannot write, says so on /healthz,
and writes again, losing nothing it acknowledged, once space returns.

The collector runs in a mount namespace of its own (``unshare -m``) on a small tmpfs; the
test fills and frees that tmpfs through /proc/<pid>/root."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from midtrace.collector.intake import otlp
from tests.e2e.test_grpc_overload import batch_of_spans

PROTOBUF = "application/x-protobuf"


def can_mount_tmpfs(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    target = tmp_path / "probe"
    target.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs -o size=1m tmpfs {target}"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.parametrize(("room_mb", "options"), [(3, ()), (24, ("--memory-limit", "64MiB"))],
                         ids=["full-while-appending", "full-at-checkpoint"])
def test_a_full_disk_is_a_503_and_the_collector_writes_again_when_space_returns(
        tmp_path: Path, room_mb: int, options: tuple[str, ...]) -> None:
    """With little room the appends fail; with more the WAL reaches DuckDB's automatic
    checkpoint first (at 16 MiB: a quarter of the memory limit; at the default 256 MB it would
    not fit), the checkpoint fails and DuckDB invalidates the database, which the collector
    then reopens."""
    if not can_mount_tmpfs(tmp_path):
        pytest.skip("mounting a tmpfs in a mount namespace of its own is not permitted here")
    mnt = tmp_path / "small"
    mnt.mkdir()
    command = (f"mount -t tmpfs -o size=64m tmpfs {mnt} && exec {sys.executable} -m midtrace "
               f"collector --db {mnt}/full.duckdb --http-port 0 --grpc-port 0 {' '.join(options)}")
    log = open(tmp_path / "log", "w")
    proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", command],
                            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"listening on (http://\S+)", line)
        assert url, line + (tmp_path / "log").read_text()
        inside = Path(f"/proc/{proc.pid}/root") / str(mnt).lstrip("/")
        free = shutil.disk_usage(inside).free
        with open(inside / "filler", "wb") as f:
            f.write(b"\0" * (free - room_mb * 1024 * 1024))
        acked, statuses = 0, []
        with httpx.Client(base_url=url[1], timeout=30) as http:
            for i in range(1000):
                body = otlp.encode_sdk_spans(batch_of_spans(20, f"full{i}-")).SerializeToString()
                answer = http.post("/v1/traces", content=body, headers={"content-type": PROTOBUF})
                statuses.append(answer.status_code)
                if answer.status_code == 200:
                    acked += 20
                else:
                    assert answer.status_code == 503, answer.text
                    assert answer.headers.get("retry-after")
                    break
            assert statuses[-1] == 503, "the disk never filled: the test proves nothing"
            health = http.get("/healthz")
            assert health.status_code == 503
            assert "cannot write" in health.json()["reason"]
            os.remove(inside / "filler")
            deadline = time.monotonic() + 60
            while True:  # an exporter retrying its refused batch
                answer = http.post("/v1/traces", content=body, headers={"content-type": PROTOBUF})
                if answer.status_code == 200:
                    acked += 20
                    break
                assert answer.status_code == 503, answer.text
                assert time.monotonic() < deadline, "the collector never wrote again"
                time.sleep(0.5)
            total = http.get("/api/v1/requests", params={"fresh": "1", "limit": "1"}).json()["total"]
            health = http.get("/healthz").json()
            assert health["status"] == "ready"
        assert total == acked
        if options:  # the checkpoint failed, not an append: DuckDB invalidated the database
            assert health["store_reopens"] >= 1, health
    finally:
        proc.terminate()
        assert proc.wait(60) == 0, (tmp_path / "log").read_text()
        log.close()
    assert "Traceback" not in (tmp_path / "log").read_text()


@pytest.mark.parametrize("part", ["appender", "writer"])
def test_a_commit_whose_checkpoint_fails_is_answered_as_done_since_it_is_durable(
        tmp_path: Path, part: str) -> None:
    """DuckDB says "Transaction COMMIT succeeded and is durable, but the autocheckpoint
    failed" and invalidates the database. What was committed is kept, so its caller is told
    it is done: an export appended to the intake log is acknowledged with its export id (a
    503 would have the exporter send it again), and spans the writer stored are counted
    stored, not failed nor derived again. The store is reopened once (by the appender, or as
    the writer asks), and it holds exactly what was answered as done."""
    if not can_mount_tmpfs(tmp_path):
        pytest.skip("mounting a tmpfs in a mount namespace of its own is not permitted here")
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = Path(__file__).with_name("checkpoint_fails.py")
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          f"mount -t tmpfs -o size=64m tmpfs {mnt} && "
                          f"exec {sys.executable} {script} {mnt} {part}"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "autocheckpoint failed" in run.stderr, "no checkpoint failed: the test proves nothing"
    result = json.loads(run.stdout)
    answers = result["answers"]
    done = {key: answer for answer, key in answers if isinstance(answer, int)}
    refused = [answer for answer, _ in answers if not isinstance(answer, int)]
    assert set(result["held"]) == set(done), refused
    assert result["reopens"] == 1
    assert isinstance(answers[-1][0], int), "nothing was committed after the reopen"
