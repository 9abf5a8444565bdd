"""Whether an answer holds an accepted answer: the metric of "Lost in the Middle".

Liu et al. (2023) grade an answer correct when some accepted answer, normalised as SQuAD's
evaluation does (lower case, punctuation removed, the articles a/an/the removed, whitespace
collapsed), is a substring of the normalised model answer: the *best-subspan exact match*.
midtrace's sweep grades its calls with it and `midtrace grade --references` grades traffic
with it (docs/grading.md); both call the functions here.

Beyond SQuAD's ASCII rules, so that text copied from documents matches text typed in a
references file: the text is NFKC-normalised first (full-width digits, ligatures and
non-breaking spaces become their plain forms), case is folded (``ß`` matches ``ss``), and
Unicode punctuation (curly quotes, dashes, ``¿``) is removed as ASCII punctuation is.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or (ch > "\x7f" and unicodedata.category(ch).startswith("P"))


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation, Unicode-aware (module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        text = text.translate(_ASCII_TABLE)
    else:
        text = "".join(ch for ch in text if not _is_punct(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


_ASCII_TABLE = str.maketrans("", "", string.punctuation)


def normalized_answers(answers: Iterable[str]) -> tuple[str, ...]:
    """The accepted answers normalised, empty ones (``"the"``, ``"?"``) left out: an empty
    string is a substring of everything and would match any answer."""
    out = (normalize_answer(a) for a in answers)
    return tuple(dict.fromkeys(a for a in out if a))


def contains_answer(normalized_text: str, normalized: Sequence[str]) -> bool:
    """Some of the ``normalized`` answers is a substring of ``normalized_text``."""
    return any(a in normalized_text for a in normalized)


def best_subspan_match(prediction: str, answers: Sequence[str]) -> bool:
    """Best-subspan exact match: some accepted answer, normalised, is contained in the
    normalised prediction."""
    return contains_answer(normalize_answer(prediction), normalized_answers(answers))


def recalled_constraints(prediction: str, constraints: Sequence[str]) -> tuple[str, ...]:
    """The constraints whose normalised text is contained in the normalised prediction, in
    their given order."""
    pred = normalize_answer(prediction)
    out = []
    for c in constraints:
        norm = normalize_answer(c)
        if norm and norm in pred:
            out.append(c)
    return tuple(out)
