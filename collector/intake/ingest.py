"""Offline ingest: OTLP/JSON files (as OTel's file exporter writes them) and outcome files,
through the same checks, normalizer and store as the running collector."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from midtrace.collector.receive.bodies import BadInput, check_spans, parse_outcomes
from midtrace.collector.storage.store import Store, WriteJob
from midtrace.collector.intake.otlp import PayloadError, iter_json_docs, json_spans
from midtrace.jsonl import BYTES_LINE_END

BATCH_SPANS = 5_000


@dataclass
class IngestReport:
    files: int = 0
    spans: int = 0
    requests: int = 0
    outcomes: int = 0
    refused: list[str] = field(default_factory=list)


class UnreadableFile(Exception):
    """A whole file cannot be read (a damaged gzip stream): refused, the other files kept."""


def read_text(path: Path) -> tuple[str, list[str]]:
    """The file's text (gunzipped, without a byte order mark) and why lines of it were left
    out: a line that is not UTF-8 is refused and left empty, the lines around it kept."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            raise UnreadableFile(f"not a readable gzip file: {e or type(e).__name__}") from e
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        pass
    lines, refused = [], []
    for number, line in enumerate(BYTES_LINE_END.split(data), start=1):
        try:
            lines.append(line.decode("utf-8-sig" if number == 1 else "utf-8"))
        except UnicodeDecodeError as e:
            lines.append("")
            refused.append(f"line {number}: not UTF-8 text (byte 0x{line[e.start]:02x} at "
                           f"column {e.start + 1})")
    return "\n".join(lines), refused


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
    try:
        text, unreadable = read_text(path)
    except UnreadableFile as e:
        report.refused.append(f"{path}: {e}")
        return
    report.refused += [f"{path}: {why}" for why in unreadable]
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
