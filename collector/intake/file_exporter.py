"""An OpenTelemetry SDK span exporter that appends OTLP/JSON lines to a file.

Each ``export`` call writes one ExportTraceServiceRequest as one line, encoded by the SDK's
own OTLP encoder with ids in hex: the format `midtrace ingest` reads, and the one OTel's
file exporter writes. A path ending in ``.gz`` is written gzip-compressed with a zero mtime,
so the same spans give the same bytes.
"""

from __future__ import annotations

import gzip
import io
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from midtrace.collector.intake.otlp import encode_sdk_spans, request_to_json


class _GzipText(io.TextIOWrapper):
    """Text over gzip over a file, closing all three: GzipFile leaves a passed file open."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        super().__init__(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0),
                         encoding="utf-8", newline="\n")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_text_for_write(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return _GzipText(open(path, "wb"))
    return open(path, "w", encoding="utf-8", newline="\n")


class OtlpJsonFileExporter(SpanExporter):
    """Write each exported batch as one OTLP/JSON line to ``path`` (truncated on open)."""

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._file = open_text_for_write(self._path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = request_to_json(encode_sdk_spans(spans))
        with self._lock:
            self._file.write(line + "\n")
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            self._file.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
