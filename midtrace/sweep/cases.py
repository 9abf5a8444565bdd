"""The cases file: one JSON object per line, each a question with its decisive evidence.

```
{"id": "refund-window", "question": "...", "answers": ["14 days"],
 "decisive": [{"id": "policy#3", "text": "...", "source": "refund-policy"}],
 "distractors": [{"id": "faq#9", "text": "..."}, ...],
 "constraints": ["receipt"], "metadata": {"team": "billing"}}
```

A line that cannot be used is reported with its number and the reason; the other lines
still run. docs/sweep.md is the user-facing description of every field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Role = Literal["decisive", "distractor"]

DECISIVE_LABELS = ("direct_answer", "exception_constraint")
DISTRACTOR_LABELS = ("irrelevant", "supporting_background", "conflicting")
CASE_FIELDS = ("id", "question", "answers", "decisive", "distractors", "constraints", "metadata")
CHUNK_FIELDS = ("id", "text", "source", "source_position", "title", "label")


@dataclass(frozen=True)
class CaseChunk:
    """One chunk of a case, decisive or a distractor."""

    id: str
    text: str
    role: Role
    label: str
    source: str | None = None
    source_position: int | None = None
    title: str | None = None


@dataclass(frozen=True)
class Case:
    """One question with the evidence that answers it and the near-misses around it."""

    id: str
    question: str
    answers: tuple[str, ...]
    decisive: tuple[CaseChunk, ...]
    distractors: tuple[CaseChunk, ...]
    constraints: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0

    @property
    def k(self) -> int:
        """Chunks in the prompt when the decisive evidence is present."""
        return len(self.decisive) + len(self.distractors)


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class CaseFile:
    cases: list[Case] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)


class CaseError(ValueError):
    """One line of the cases file cannot be used; the message says why."""


def load_cases(path: Path) -> CaseFile:
    """Read ``path``; unusable lines go to ``.bad`` with their 1-based line number."""
    with open(path, encoding="utf-8") as f:
        return parse_lines(f)


def parse_lines(lines: Iterable[str]) -> CaseFile:
    out = CaseFile()
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            out.bad.append(BadLine(number, f"not JSON: {e.msg} at column {e.colno}"))
            continue
        try:
            case = case_from_json(obj, number)
        except CaseError as e:
            out.bad.append(BadLine(number, str(e)))
            continue
        if case.id in seen:
            out.bad.append(BadLine(number, f"case id {case.id!r} already used on line {seen[case.id]}"))
            continue
        seen[case.id] = number
        out.cases.append(case)
    return out


def case_from_json(obj: Any, line: int = 0) -> Case:
    if not isinstance(obj, dict):
        raise CaseError("a case must be a JSON object")
    unknown = sorted(set(obj) - set(CASE_FIELDS))
    if unknown:
        raise CaseError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(CASE_FIELDS)}")
    case_id = _text(obj, "id")
    question = _text(obj, "question")
    answers = _strings(obj, "answers", required=True)
    decisive_raw = obj.get("decisive")
    if not isinstance(decisive_raw, list) or not decisive_raw:
        raise CaseError("decisive must be a non-empty list of chunks")
    distractors_raw = obj.get("distractors", [])
    if not isinstance(distractors_raw, list):
        raise CaseError("distractors must be a list of chunks")
    decisive = tuple(_chunk(c, "decisive", i) for i, c in enumerate(decisive_raw))
    distractors = tuple(_chunk(c, "distractor", i) for i, c in enumerate(distractors_raw))
    ids = [c.id for c in decisive + distractors]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CaseError(f"chunk id(s) used twice in the case: {', '.join(dupes)}")
    metadata = obj.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CaseError("metadata must be a JSON object")
    return Case(id=case_id, question=question, answers=answers, decisive=decisive,
                distractors=distractors, constraints=_strings(obj, "constraints"),
                metadata=metadata, line=line)


def _text(obj: Mapping[str, Any], key: str, where: str = "") -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CaseError(f"{where}{key} must be a non-empty string")
    return value


def _strings(obj: Mapping[str, Any], key: str, required: bool = False) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None and not required:
        return ()
    if (not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value)
            or (required and not value)):
        need = "a non-empty list" if required else "a list"
        raise CaseError(f"{key} must be {need} of non-empty strings")
    return tuple(value)


def _chunk(obj: Any, role: Role, index: int) -> CaseChunk:
    where = f"{role} {index + 1}: "
    group = "decisive" if role == "decisive" else "distractors"
    if not isinstance(obj, dict):
        raise CaseError(f"{where}each entry of {group} must be a JSON object")
    unknown = sorted(set(obj) - set(CHUNK_FIELDS))
    if unknown:
        raise CaseError(f"{where}unknown field(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(CHUNK_FIELDS)}")
    allowed = DECISIVE_LABELS if role == "decisive" else DISTRACTOR_LABELS
    label = obj.get("label", allowed[0])
    if label not in allowed:
        raise CaseError(f"{where}label {label!r} is not one of {', '.join(allowed)}")
    position = obj.get("source_position")
    if position is not None and (not isinstance(position, int) or isinstance(position, bool)
                                 or position < 0):
        raise CaseError(f"{where}source_position must be a non-negative integer")
    for key in ("source", "title"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise CaseError(f"{where}{key} must be a string")
    return CaseChunk(id=_text(obj, "id", where), text=_text(obj, "text", where), role=role,
                     label=label, source=obj.get("source") or None, source_position=position,
                     title=obj.get("title") or None)
