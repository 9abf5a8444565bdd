"""Which trace ids may already have spans in the database, without asking it.

A write needs the stored spans of a trace only when some are stored already (a trace
split over exports, a late span, a retry). Almost every trace in production traffic is
new, so the store keeps the first 64 bits of every stored trace id in memory (8 bytes a
trace: 10 million traces take 80 MB) and reads spans back only for traces that may be
stored. A false positive costs one read; there are no false negatives while this process
is the only writer (docs/architecture.md: one writer holds the file).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MERGE_AT = 50_000


def key(trace_id: str) -> int:
    return int(trace_id[:16], 16)


class KnownTraces:
    def __init__(self, keys: np.ndarray | None = None) -> None:
        self._sorted = np.unique(keys.astype(np.uint64)) if keys is not None else np.empty(0, np.uint64)
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def may_contain(self, trace_id: str) -> bool:
        k = key(trace_id)
        if k in self._recent:
            return True
        i = int(np.searchsorted(self._sorted, np.uint64(k)))
        return i < len(self._sorted) and int(self._sorted[i]) == k

    def add(self, trace_ids: Iterable[str]) -> None:
        self._recent.update(key(t) for t in trace_ids)
        if len(self._recent) >= MERGE_AT:
            merged = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
            self._sorted = np.union1d(self._sorted, merged)
            self._recent.clear()
