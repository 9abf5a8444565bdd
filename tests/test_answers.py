"""The best-subspan exact match (schemas/answers.py): the one answer metric."""

from __future__ import annotations

import pytest

from midtrace.schemas.answers import (
    best_subspan_match, normalize_answer, normalized_answers, recalled_constraints)


@pytest.mark.parametrize("text, expected", [
    ("The  Answer: A   14-Day window!", "answer 14day window"),
    ("An apple, the pear and a plum.", "apple pear and plum"),
    ("Theater anthem", "theater anthem"),          # articles only as whole words
    ("“Fourteen” days — net", "fourteen days net"),  # Unicode quotes and dashes
    ("STRASSE and Straße", "strasse and strasse"),   # case folded
    ("１４ days", "14 days"),                         # full-width digits (NFKC)
    ("14\u00a0days", "14 days"),                      # a non-breaking space
    ("¿Qué día? Café.", "qué día café"),            # accents kept, punctuation gone
    ("", ""),
])
def test_normalization(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_best_subspan_match() -> None:
    assert best_subspan_match("It is the Eiffel Tower, in Paris.", ["eiffel tower"])
    assert best_subspan_match("30 days; actually 14 days", ["14 days", "two weeks"])
    assert best_subspan_match("Returns within «14 days».", ["14 Days"])
    assert not best_subspan_match("30 days", ["14 days"])
    assert not best_subspan_match("1400 days", ["14 days"])
    # an answer that normalises to nothing would match everything: it is left out
    assert not best_subspan_match("anything", ["the", "?!"])
    assert normalized_answers(["The 14 days", "14 days", "an"]) == ("14 days",)


def test_recalled_constraints_keep_their_order() -> None:
    answer = "Refunds need a Receipt and the original packaging."
    assert recalled_constraints(answer, ["original packaging", "receipt", "a signature"]) == (
        "original packaging", "receipt")
    assert recalled_constraints(answer, []) == ()
