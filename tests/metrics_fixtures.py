"""Small hand-built requests for the metric tests, and the arithmetic they share."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord
from tests.procs import Proc, start_collector

Z = 1.959964


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval, written out: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre = p + Z * Z / (2 * n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


def ns(day: str) -> int:
    """Nanoseconds since the epoch at noon UTC of ``day`` (YYYY-MM-DD)."""
    return int(datetime.fromisoformat(day + "T12:00:00+00:00").timestamp() * 1e9)


def prompt(*chunk_ids: str, spans: Sequence[tuple[int, int]] | None = None) -> tuple[Placement, ...]:
    """Placements in the order given; with ``spans``, each one's [token_start, token_end)."""
    return tuple(
        Placement(cid, i, *(spans[i] if spans else (None, None)))
        for i, cid in enumerate(chunk_ids))


def record(chunks: Sequence[Chunk], placed: Sequence[Placement] = (), *,
           outcome: Outcome | None = None, **fields: Any) -> RagRecord:
    return RagRecord(question=fields.pop("question", "How long is the refund window?"),
                     chunks=tuple(chunks), placements=tuple(placed), outcome=outcome, **fields)


def post_outcomes(url: str, *outcomes: dict[str, Any]) -> None:
    response = httpx.post(url + "/v1/outcomes", json={"outcomes": list(outcomes)}, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == len(outcomes)


@pytest.fixture(scope="module")
def module_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """One real collector for a whole test module (starting one per test is slow)."""
    folder: Path = tmp_path_factory.mktemp("collector")
    proc = start_collector(folder / "traces.duckdb", folder / "collector.log")
    proc.db_path = folder / "traces.duckdb"  # type: ignore[attr-defined]
    yield proc
    proc.stop()


def utc(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)
