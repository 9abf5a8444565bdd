"""What the runner keeps of one recorded call: enough for the summary, nothing heavier."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

TrialKey = tuple[str, str, str, int]  # case id, condition, strategy, repeat

# Position bands by relative position of a chunk's midpoint (docs/architecture.md, "Position band").
BAND_EARLY_END = 1 / 3
BAND_LATE_START = 2 / 3


def band(midpoint: float, length: int) -> str:
    x = midpoint / length if length else 0.0
    return "early" if x < BAND_EARLY_END else "late" if x >= BAND_LATE_START else "middle"


def trace_id_of(experiment: str, key: TrialKey) -> str:
    """The trial's trace id, derived from its identity: a resent trial lands on the same trace."""
    digest = hashlib.sha256("\x00".join([experiment, *map(str, key)]).encode("utf-8")).hexdigest()
    return digest[:32] if int(digest[:32], 16) else "0" * 31 + "1"


@dataclass(frozen=True)
class TrialResult:
    case: str
    condition: str
    strategy: str
    repeat: int
    trace_id: str
    k: int
    slots: tuple[int, ...]   # 1-based prompt slots of the decisive chunks, in prompt order
    bands: tuple[str, ...]   # their position bands, same order
    correct: bool
    matched: bool
    required: int
    recalled: int
    cited_decisive: bool | None  # None when no decisive chunk was in the prompt
    answer: str              # normalised answer, for consistency across placements
    prompt_tokens: int
    latency_ms: float
    attempts: int

    @property
    def key(self) -> TrialKey:
        return (self.case, self.condition, self.strategy, self.repeat)

    @property
    def slot(self) -> int | None:
        """The request's decisive position: the first decisive chunk in prompt order."""
        return self.slots[0] if self.slots else None

    @property
    def buried(self) -> bool | None:
        """Every decisive occurrence in the middle band (None when none is in the prompt)."""
        return all(b == "middle" for b in self.bands) if self.bands else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TrialResult:
        values = dict(obj)
        values["slots"] = tuple(values.get("slots") or ())
        values["bands"] = tuple(values.get("bands") or ())
        return cls(**values)
