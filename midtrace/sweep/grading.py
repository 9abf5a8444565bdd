"""Grade an answer the way "Lost in the Middle" does, plus constraints and citations.

The match and the constraint recall are midtrace.schemas.answers's (the one definition,
shared with `midtrace grade --references`): an answer is a best-subspan exact match when
some normalised expected answer is contained in the normalised prediction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from midtrace.schemas.answers import best_subspan_match, recalled_constraints
from midtrace.schemas.answers import normalize_answer as normalize

__all__ = ["Grade", "best_subspan_match", "cited_documents", "grade", "normalize",
           "recalled_constraints", "without_citations"]

_CITATION = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")


def without_citations(text: str) -> str:
    """The answer with its citation markers removed (for comparing answers across layouts)."""
    return _CITATION.sub(" ", text)


def cited_documents(answer: str, k: int) -> tuple[int, ...]:
    """1-based document numbers the answer cites (``[3]``, ``Document [3]``, ``[1, 4]``)."""
    seen: dict[int, None] = {}
    for m in _CITATION.finditer(answer):
        for part in re.split(r"[,;]", m.group(1)):
            n = int(part)
            if 1 <= n <= k:
                seen[n] = None
    return tuple(seen)


@dataclass(frozen=True)
class Grade:
    matched: bool
    recalled: tuple[str, ...]
    required: tuple[str, ...]
    cited: tuple[int, ...]

    @property
    def correct(self) -> bool:
        """Matched an expected answer and mentioned every required constraint."""
        return self.matched and len(self.recalled) == len(self.required)


def grade(answer: str, answers: Sequence[str], constraints: Sequence[str], k: int) -> Grade:
    return Grade(matched=best_subspan_match(answer, answers),
                 recalled=recalled_constraints(answer, constraints),
                 required=tuple(constraints), cited=cited_documents(answer, k))
