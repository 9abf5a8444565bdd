"""One export as received, the unit the intake log keeps (collector/storage/intake_log.py)
and a derive worker reads (collector/storage/derive.py). A module of its own so that a derive
worker, which never opens the database, does not import DuckDB to read one.

An export that came uncompressed is kept zstd-compressed (``compact``) from the moment it is
appended until a worker reads it (``as_received``): OTLP bodies repeat their chunk texts and
keys, so an OpenInference export takes a tenth of its bytes, in DuckDB's memory until the next
checkpoint, in its write-ahead log, in the writer's backlog and on the pipe to a worker.
A ``--no-text`` export holds no text and is kept as it is.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pyarrow as pa

from midtrace.collector.receive.bodies import REDACTED_PROTOBUF

# The Content-Encoding the intake log records for a body it compressed: the body's size as
# received (8 bytes, little-endian), then one zstd frame. Never accepted from a client.
STORED_ZSTD = "x-midtrace-zstd"
COMPACT_MIN_BYTES = 1024  # smaller bodies are kept as they came: there is little to win
_SIZE_BYTES = 8
_codecs = threading.local()  # one codec per thread: the appender's, the writer's, recovery's


def _zstd() -> pa.Codec:
    codec = getattr(_codecs, "zstd", None)
    if codec is None:  # level 1: about 30 µs a request, a tenth of the bytes (OpenInference)
        codec = _codecs.zstd = pa.Codec("zstd", compression_level=1)
    return codec


@dataclass(frozen=True)
class RawExport:
    """One export as received: its body (still gzipped if it came so, zstd-compressed by
    ``compact`` if it came uncompressed) and how to read it.

    ``checked``: intake's checks read this very body and refused none of its spans, so a
    worker takes them all without checking them again. Only in memory, on the way from
    intake to a worker: an entry read back from the intake log (after a crash) is checked
    again."""

    body: bytes
    content_type: str
    content_encoding: str | None = None
    checked: bool = False

    @property
    def size(self) -> int:
        """Bytes as received (what the writer's backlog counts)."""
        if self.content_encoding == STORED_ZSTD:
            return int.from_bytes(self.body[:_SIZE_BYTES], "little")
        return len(self.body)


def compact(export: RawExport) -> RawExport:
    """The export as the intake log keeps it: a body that came uncompressed, zstd-compressed;
    anything else (a gzipped body, a small one, a ``--no-text`` one) as it is. Releases the
    GIL while it compresses."""
    if (export.content_encoding not in (None, "", "identity")
            or len(export.body) < COMPACT_MIN_BYTES or export.content_type == REDACTED_PROTOBUF):
        return export
    packed = _zstd().compress(export.body, asbytes=True)
    return RawExport(len(export.body).to_bytes(_SIZE_BYTES, "little") + packed,
                     export.content_type, STORED_ZSTD, export.checked)


def as_received(export: RawExport) -> RawExport:
    """The export as it came: undoes ``compact``."""
    if export.content_encoding != STORED_ZSTD:
        return export
    body = _zstd().decompress(memoryview(export.body)[_SIZE_BYTES:], decompressed_size=export.size,
                              asbytes=True)
    return RawExport(body, export.content_type, None, export.checked)
