"""Time finding the chunks an answer follows (collector/normalize/answer_sources.py), the
part of derivation it adds to every request.

    python bench/attribution.py [--rounds 5]

Requests: every trace of the sample data (midtrace/demo.py, sample_files: about 4,900
support requests, 13 chunks and 2,300 characters of chunk text each, and the LangChain app's
traces), normalized once before timing. Reported, best of ROUNDS rounds over all of them
(the three measured in turn within each round, CPU time of this process, so that waiting for
a core on a shared machine is not counted): the matcher alone per request, and
Rows.add_request (the Arrow rows derivation builds) with it and without it, with the load
average beside the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from midtrace.collector.intake.ingest import IngestReport, jobs_of_file  # noqa: E402
from midtrace.collector.normalize.answer_sources import answer_sources  # noqa: E402
from midtrace.collector.normalize.pipeline import normalize_trace  # noqa: E402
from midtrace.collector.storage import rows as rows_module  # noqa: E402
from midtrace.demo import sample_files  # noqa: E402
from midtrace.schemas.model import RagRequest  # noqa: E402


def sample_requests() -> list[RagRequest]:
    by_trace: dict[str, dict[str, object]] = defaultdict(dict)
    for path in sample_files():
        if "outcomes" in path.name:
            continue
        for job in jobs_of_file(path, IngestReport()):
            for s in job.spans:
                by_trace[s.trace_id][s.span_id] = s
    out = []
    for spans in by_trace.values():
        request = normalize_trace(sorted(spans.values(), key=lambda s: (s.start_ns, s.span_id)))  # type: ignore[attr-defined]
        if request is not None:
            out.append(request)
    return out


def timed(run: Callable[[], None]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    requests = sample_requests()
    n = len(requests)
    followed = sum(1 for r in requests if answer_sources(r.record))
    chunks = sum(len(r.record.chunks) for r in requests) / n
    print(f"{n} requests, {chunks:.1f} chunks each; the answer follows a chunk in {followed}")

    def matcher() -> None:
        for r in requests:
            answer_sources(r.record)

    def add_rows() -> None:
        rows = rows_module.Rows()
        for i, r in enumerate(requests):
            rows.add_request(i, r)
        rows.tables()

    def add_rows_without() -> None:
        with mock.patch.object(rows_module, "answer_sources", lambda record: []):
            add_rows()

    runs = {"answer_sources alone": matcher, "Rows.add_request with it": add_rows,
            "Rows.add_request without it": add_rows_without}
    times: dict[str, list[float]] = {name: [] for name in runs}
    before = load()
    for _ in range(args.rounds):
        for name, run in runs.items():
            times[name].append(timed(run))
    us = {name: min(t) / n * 1e6 for name, t in times.items()}
    for name, value in us.items():
        print(f"{name + ':':29s}{value:7.1f} µs/request")
    added = us["Rows.add_request with it"] - us["Rows.add_request without it"]
    print(f"{'added by attribution:':29s}{added:7.1f} µs/request")
    print(f"{before} before, {load()} after ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
