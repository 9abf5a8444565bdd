"""Generate midtrace's sample traces. Everything these files contain is SYNTHETIC.

No real user, company or model call is behind them: a fixed seed drives a simulation of a
support assistant ("Fieldnote", a fictional SaaS) and of a position sweep, and the requests
are written through the same public path an app uses, the OpenTelemetry SDK with
``midtrace.schemas.encode.record_request`` on the answering span, exported by
``midtrace.collector.intake.file_exporter.OtlpJsonFileExporter``. Every resource carries
``midtrace.sample="synthetic"``. Same seed, same bytes.

    python -m midtrace.sample_traces.generate [--out DIR] [--seed N] [--requests N] [--sweep-cases N]

The simulated model answers by a U-shaped position curve (``UCurve`` in simulate.py):
P(correct | decisive chunk at relative position x) is ``start`` at x=0, ``middle`` at x=0.5
and ``end`` at x=1, quadratic in between; ``no_evidence`` when no decisive chunk reached the
prompt. Its parameters, per model, are below.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any


from midtrace.sample_traces.simulate import Template, UCurve

# --- simulation parameters ---------------------------------------------------------------

CURVES: dict[str, UCurve] = {
    "gpt-4.1-mini": UCurve(start=0.90, middle=0.52, end=0.84, no_evidence=0.22),
    "claude-sonnet-4": UCurve(start=0.93, middle=0.60, end=0.89, no_evidence=0.25),
}
TEMPLATES: dict[str, Template] = {
    # v1: a short system prompt, 6-10 chunks, then the question and the answer format.
    "support-v1": Template("support-v1", "1.3", preamble_tokens=170, tail_tokens=120,
                           min_chunks=6, max_chunks=10),
    # v2 (from week 3): a long preamble (tone guide, policy summary) and a long answer schema
    # with a worked example after the evidence, and more chunks. The evidence block now sits
    # in the middle third of the prompt, so decisive chunks are buried more often.
    "support-v2": Template("support-v2", "2.0", preamble_tokens=720, tail_tokens=520,
                           min_chunks=8, max_chunks=10),
}
DEFAULT_SEED = 1026
DEFAULT_REQUESTS = 3000
SUPPORT_SERVICE = "support-assistant"
SWEEP_SERVICE = "support-assistant-sweep"
OUTCOMES_FILE = "support_outcomes.json"
MANIFEST_FILE = "manifest.json"
TAXONOMY = ("answered", "missing", "dropped", "buried", "unused", "unlabeled", "ungraded")

# -------------------------------------------------------------------------------------------

from midtrace.sample_traces import support, sweep
from midtrace.sample_traces.emit import FileJob, write_trace_file
from midtrace.sample_traces.simulate import outcome_json


def generate(out: Path, seed: int = DEFAULT_SEED, requests: int = DEFAULT_REQUESTS,
             sweep_cases: int | None = None, jobs: int = 1) -> dict[str, Any]:
    """Write every sample file into ``out`` and return the manifest (also written there)."""
    out.mkdir(parents=True, exist_ok=True)
    ctx = support.Context(seed=seed, curves=CURVES, templates=TEMPLATES)
    support_requests = support.build(ctx, requests)
    support_files: list[FileJob] = []
    for week in range(support.WEEKS):
        monday = (support.START + timedelta(days=7 * week)).date().isoformat()
        name = f"support_{monday}.jsonl.gz"
        batch = tuple(r for r in support_requests if f"week{week + 1}" in r.tags)
        support_files.append(FileJob(out / name, SUPPORT_SERVICE, f"{seed}:{name}", batch))
    by_strategy = sweep.build(seed, CURVES, tuple(CURVES), sweep_cases)
    sweep_files = [FileJob(out / f"sweep_{strategy}.jsonl.gz", SWEEP_SERVICE,
                           f"{seed}:sweep_{strategy}", tuple(reqs))
                   for strategy, reqs in by_strategy.items()]
    trace_ids = _write_all(support_files + sweep_files, jobs)

    late: list[dict[str, Any]] = []
    incidents: dict[str, str] = {}
    for job, ids in zip(support_files, trace_ids):
        for trace_id, req in zip(ids, job.requests):
            late += [outcome_json(trace_id, o) for o in req.late]
            incidents.update({t.split(":", 1)[1]: trace_id for t in req.tags
                              if t.startswith("incident:")})
    late.sort(key=lambda o: (str(o.get("time", "")), str(o["trace_id"])))
    _write_outcomes(out / OUTCOMES_FILE, late)
    sweep_requests = [r for reqs in by_strategy.values() for r in reqs]
    manifest: dict[str, Any] = {
        "synthetic": True,
        "note": "Synthetic data made by sample_traces/generate.py; no real users or model calls.",
        "seed": seed,
        "support": {
            "service": SUPPORT_SERVICE,
            "requests": len(support_requests),
            "files": {job.path.name: len(job.requests) for job in support_files},
            "outcomes_on_span": sum(1 for r in support_requests if r.record.outcome is not None),
            "late_outcomes": len(late),
            "superseding": sum(1 for r in support_requests
                               if r.record.outcome is not None and r.late),
            "taxonomy": _counts(r.taxonomy for r in support_requests),
            "incidents": dict(sorted(incidents.items())),
        },
        "sweep": {
            "service": SWEEP_SERVICE,
            "experiment_id": sweep.EXPERIMENT_ID,
            "cases": len(sweep.cases(seed, sweep_cases)),
            "strategies": list(sweep.STRATEGIES),
            "models": list(CURVES),
            "conditions": list(sweep.CONDITIONS),
            "requests": len(sweep_requests),
            "files": {job.path.name: len(job.requests) for job in sweep_files},
            "taxonomy": _counts(r.taxonomy for r in sweep_requests),
        },
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _write_all(files: list[FileJob], jobs: int) -> list[list[str]]:
    """Write the files, in parallel when jobs > 1; each file's bytes depend only on its job."""
    if jobs <= 1 or len(files) == 1:
        return [write_trace_file(f) for f in files]
    with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
        return list(pool.map(write_trace_file, files))


def _counts(classes: Any) -> dict[str, int]:
    c = Counter(classes)
    return {k: c.get(k, 0) for k in TAXONOMY}


def _write_outcomes(path: Path, outcomes: list[dict[str, Any]]) -> None:
    """The body of ``POST /v1/outcomes``, one outcome per line so diffs stay readable."""
    lines = ",\n".join("  " + json.dumps(o, ensure_ascii=False) for o in outcomes)
    path.write_text('{"outcomes": [\n' + lines + "\n]}\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate midtrace's synthetic sample traces.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="directory to write into (default: next to this script)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="PRNG seed")
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS,
                        help="support requests before the planted incidents")
    parser.add_argument("--sweep-cases", type=int, default=None,
                        help="limit the sweep to the first N cases (default: all)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="files written in parallel (the output does not depend on it)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    manifest = generate(args.out, args.seed, args.requests, args.sweep_cases, args.jobs)
    took = time.perf_counter() - began
    for part in ("support", "sweep"):
        for name, count in manifest[part]["files"].items():
            size = (args.out / name).stat().st_size
            print(f"{name:40s} {count:5d} requests {size / 1024:8.1f} KiB")
    print(f"{OUTCOMES_FILE:40s} {manifest['support']['late_outcomes']:5d} outcomes")
    print(f"support taxonomy: {manifest['support']['taxonomy']}")
    print(f"generated in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
