"""What the journal keeps of one recorded call: its identity and trace id, which say the
call is done, and its grade and layout for a reader of the journal. The summary does not
read them: it reads the database's views."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, fields
from typing import Any

TrialKey = tuple[str, str, str, int]  # case id, condition, strategy, repeat


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
    correct: bool
    matched: bool
    required: int
    recalled: int
    cited_decisive: bool | None  # None when no decisive chunk was in the prompt
    answer: str              # normalised, citation markers removed
    prompt_tokens: int
    latency_ms: float
    attempts: int

    @property
    def key(self) -> TrialKey:
        return (self.case, self.condition, self.strategy, self.repeat)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TrialResult:
        # journals written before a field was dropped still resume (``bands`` went once the
        # summary read the views)
        values = {f.name: obj[f.name] for f in fields(cls) if f.name in obj}
        values["slots"] = tuple(values.get("slots") or ())
        return cls(**values)
