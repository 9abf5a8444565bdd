"""Offline ingest: OTLP/JSON files (as OTel's file exporter writes them) and outcome files,
through the same checks, normalizer and store as the running collector."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from midtrace.collector.receive.bodies import BadInput, check_spans, parse_outcomes
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.intake.otlp import PayloadError, iter_json_docs, json_spans

BATCH_SPANS = 5_000


@dataclass
class IngestReport:
    files: int = 0
    spans: int = 0
    requests: int = 0
    outcomes: int = 0
    refused: list[str] = field(default_factory=list)


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def _is_outcomes_file(text: str) -> bool:
    head = text.lstrip()[:200]
    if not head.startswith("{"):
        return False
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "outcomes" in obj


def jobs_of_file(path: Path, report: IngestReport) -> Iterator[WriteJob]:
    """Write jobs of one file; what cannot be read is added to ``report.refused``."""
    text = read_text(path)
    if _is_outcomes_file(text):
        try:
            check = parse_outcomes(text.encode("utf-8"))
        except BadInput as e:
            report.refused.append(f"{path}: {e.message}")
            return
        report.refused += [f"{path}: outcome {err['index']}: {err['error']}" for err in check.errors]
        report.outcomes += len(check.accepted)
        yield WriteJob(outcomes=check.accepted)
        return
    for number, doc in iter_json_docs(text):
        if isinstance(doc, PayloadError):
            report.refused.append(f"{path}: {doc}")
            continue
        try:
            check = check_spans(list(json_spans(doc)))
        except PayloadError as e:
            report.refused.append(f"{path}:{number}: {e}")
            continue
        report.refused += [f"{path}:{number}: {msg}" for msg in check.rejected]
        report.spans += len(check.accepted)
        yield WriteJob(spans=check.accepted)


def ingest_files(store: Store, paths: Sequence[Path],
                 progress: Callable[[int], None] | None = None) -> IngestReport:
    """Load files into ``store`` in batches; ``progress(n)`` is called as each file is done."""
    report = IngestReport()
    for path in paths:
        pending: list[WriteJob] = []
        n = 0
        for job in jobs_of_file(path, report):
            pending.append(job)
            n += len(job.spans)
            if n >= BATCH_SPANS:
                report.requests += store.write(pending).requests
                pending, n = [], 0
        if pending:
            report.requests += store.write(pending).requests
        report.files += 1
        if progress:
            progress(1)
    return report
