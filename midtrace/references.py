"""Grading against reference answers: no model, the same answer twice gives the same grade.

A references file holds one JSON object a line (docs/grading.md):

```
{"question": "How long is the refund window?", "answers": ["14 days", "two weeks"],
 "required_constraints": ["receipt"], "in_corpus": true}
```

A sweep cases file (midtrace/sweep/cases.py) is read too: its `answers`, and its
`constraints` as required constraints. A request matches the line whose question equals its
own after Unicode NFC, case folding and whitespace collapsing (:func:`question_key`). Its
grade (:func:`grade_answer`) uses midtrace.schemas.answers, the match the sweep grades with.
:func:`grade_pages` runs the grading over pages of requests and hands the outcomes, in the
``/v1/outcomes`` body format, to a writer: the command decides where they go.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from midtrace.schemas.answers import (
    contains_answer, normalize_answer, normalized_answers, recalled_constraints)
from midtrace.sweep.cases import CASE_FIELDS, CaseError, case_from_json

REFERENCE_FIELDS = ("question", "answers", "required_constraints", "in_corpus")
# The decisive chunk id of a request graded against references whose answer is in none of its
# chunks although the line says the corpus holds it: a decisive chunk that was never
# retrieved, so the request classifies as `missing` (docs/grading.md, "Decisive chunks").
NOT_RETRIEVED = "(not retrieved)"
GRADER = "references"


@dataclass(frozen=True)
class Reference:
    line: int
    question: str
    answers: tuple[str, ...]
    required_constraints: tuple[str, ...] = ()
    in_corpus: bool = True


@dataclass
class ReferenceFile:
    references: list[Reference] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # "line N: what is wrong"

    def by_question(self) -> dict[str, Reference]:
        return {question_key(r.question): r for r in self.references}


def question_key(question: str) -> str:
    """What two questions must share to match: NFC, case folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFC", question).casefold().split())


def load_references(path: Path) -> ReferenceFile:
    with open(path, encoding="utf-8") as f:
        return parse_references(f)


def parse_references(lines: Iterable[str]) -> ReferenceFile:
    """Read reference lines; each unusable one is listed in ``.bad`` with its 1-based number.
    Blank lines and lines starting with ``//`` are skipped, as in a cases file."""
    out = ReferenceFile()
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            ref = reference_from_json(json.loads(line), number)
        except json.JSONDecodeError as e:
            out.bad.append(f"line {number}: not JSON: {e.msg} at column {e.colno}")
            continue
        except ValueError as e:
            out.bad.append(f"line {number}: {e}")
            continue
        key = question_key(ref.question)
        if key in seen:
            out.bad.append(f"line {number}: the same question as line {seen[key]}")
            continue
        seen[key] = number
        out.references.append(ref)
    return out


def reference_from_json(obj: Any, line: int = 0) -> Reference:
    """One line as a Reference; a ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    if set(obj) - set(REFERENCE_FIELDS) and not set(obj) - set(CASE_FIELDS):
        try:
            case = case_from_json(obj, line)
        except CaseError as e:
            raise ValueError(f"(a sweep case) {e}") from None
        return Reference(line, case.question, case.answers, case.constraints)
    unknown = sorted(set(obj) - set(REFERENCE_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; allowed: "
                         f"{', '.join(REFERENCE_FIELDS)} (or a sweep case's fields)")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    answers = _strings(obj, "answers", required=True)
    if not normalized_answers(answers):
        raise ValueError("answers must hold an answer with a letter or digit left after "
                         "normalisation (not only articles or punctuation)")
    in_corpus = obj.get("in_corpus", True)
    if not isinstance(in_corpus, bool):
        raise ValueError(f"in_corpus must be true or false, got {json.dumps(in_corpus)}")
    return Reference(line, question, answers, _strings(obj, "required_constraints"), in_corpus)


def _strings(obj: dict[str, Any], key: str, required: bool = False) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None and not required:
        return ()
    if (not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value)
            or (required and not value)):
        raise ValueError(f"{key} must be a {'non-empty ' if required else ''}list of "
                         "non-empty strings")
    return tuple(value)


@dataclass(frozen=True)
class ReferenceGrade:
    correct: bool
    decisive_chunk_ids: tuple[str, ...] | None  # None: unknown (the line is not in the corpus)
    recalled_constraints: tuple[str, ...]


def grade_answer(ref: Reference, answer: str, chunks: Sequence[tuple[str, str | None]],
                 normalize_chunk: Callable[[str], str] = normalize_answer) -> ReferenceGrade:
    """Grade one answer: correct by best-subspan match; decisive, the chunks (id, text) whose
    normalised text holds a normalised answer, else :data:`NOT_RETRIEVED` when the line says
    the corpus holds the answer, else unknown."""
    answers = normalized_answers(ref.answers)
    decisive = tuple(dict.fromkeys(
        chunk_id for chunk_id, text in chunks
        if text is not None and contains_answer(normalize_chunk(text), answers)))
    if not decisive:
        decisive = (NOT_RETRIEVED,) if ref.in_corpus else ()
    return ReferenceGrade(
        correct=contains_answer(normalize_answer(answer), answers),
        decisive_chunk_ids=decisive or None,
        recalled_constraints=recalled_constraints(answer, ref.required_constraints))


def outcome_body(trace_id: str, ref: Reference, grade: ReferenceGrade,
                 reviewer: str) -> dict[str, Any]:
    """The grade as one item of a ``/v1/outcomes`` body."""
    body: dict[str, Any] = {"trace_id": trace_id, "grader": GRADER, "reviewer": reviewer,
                            "correct": grade.correct, "score": 1.0 if grade.correct else 0.0}
    if grade.decisive_chunk_ids is not None:
        body["decisive_chunk_ids"] = list(grade.decisive_chunk_ids)
    if ref.required_constraints:
        body["required_constraints"] = list(ref.required_constraints)
        body["recalled_constraints"] = list(grade.recalled_constraints)
    return body


@dataclass
class GradeReport:
    requests: int = 0            # requests read (after the filters)
    matched: int = 0             # of those, matched to a line
    no_answer: int = 0           # matched, but no answer text stored: not graded
    graded: int = 0
    correct: int = 0
    decisive_found: int = 0      # some chunk holds an answer
    missing: int = 0             # none does, the line is in the corpus
    unknown: int = 0             # none does, the line is not in the corpus
    sent: int = 0                # outcomes handed to the writer
    lines_matched: set[int] = field(default_factory=set)


class _ChunkNormalizer:
    """normalize_answer with a bounded memory: chunks recur across requests."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        self.seen: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        found = self.seen.get(text)
        if found is None:
            if len(self.seen) >= self.size:
                self.seen.clear()
            found = self.seen[text] = normalize_answer(text)
        return found


def grade_pages(pages: Iterable[Iterable[dict[str, Any]]], refs: ReferenceFile, reviewer: str,
                write: Callable[[list[dict[str, Any]]], None],
                batch: int = 500) -> GradeReport:
    """Grade every request of ``pages`` (rows with ``trace_id``, ``question``, ``answer`` and
    ``chunks``: a list of ``{chunk_id, text}``) that matches a line; ``write`` receives the
    outcomes in batches of up to ``batch``."""
    by_key = refs.by_question()
    report = GradeReport()
    normalize_chunk = _ChunkNormalizer()
    pending: list[dict[str, Any]] = []
    for page in pages:
        for row in page:
            report.requests += 1
            question = row.get("question")
            ref = by_key.get(question_key(question)) if question else None
            if ref is None:
                continue
            report.matched += 1
            report.lines_matched.add(ref.line)
            answer = row.get("answer")
            if answer is None:
                report.no_answer += 1
                continue
            chunks = [(c["chunk_id"], c.get("text")) for c in row.get("chunks") or ()]
            grade = grade_answer(ref, answer, chunks, normalize_chunk)
            report.graded += 1
            report.correct += grade.correct
            if grade.decisive_chunk_ids is None:
                report.unknown += 1
            elif grade.decisive_chunk_ids == (NOT_RETRIEVED,):
                report.missing += 1
            else:
                report.decisive_found += 1
            pending.append(outcome_body(row["trace_id"], ref, grade, reviewer))
            if len(pending) >= batch:
                write(pending)
                report.sent += len(pending)
                pending = []
    if pending:
        write(pending)
        report.sent += len(pending)
    return report
