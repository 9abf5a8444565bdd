"""Grade an answer the way "Lost in the Middle" does, plus constraints and citations.

Normalisation (SQuAD's, used by the paper's evaluation): lower case, punctuation removed,
the articles a/an/the removed, whitespace collapsed. An answer is a best-subspan exact match
when some normalised expected answer is contained in the normalised prediction.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_CITATION = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")


def normalize(text: str) -> str:
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def without_citations(text: str) -> str:
    """The answer with its citation markers removed (for comparing answers across layouts)."""
    return _CITATION.sub(" ", text)


def best_subspan_match(prediction: str, answers: Sequence[str]) -> bool:
    pred = normalize(prediction)
    return any(normalize(a) in pred for a in answers if normalize(a))


def recalled_constraints(prediction: str, constraints: Sequence[str]) -> tuple[str, ...]:
    pred = normalize(prediction)
    return tuple(c for c in constraints if normalize(c) and normalize(c) in pred)


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
