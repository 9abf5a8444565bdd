"""The policy documents and questions the LlamaIndex and Haystack sample apps retrieve from.

Three documents carry the fact that answers their questions behind a ``KEYFACT ANSWER:``
marker, which the local stand-in LLM (tests/fake_llm.py) reports with a citation when it
reads the document's slot. Each document is one line, as the stand-in reads a document
to the end of its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

POLICIES: tuple[tuple[str, str, str], ...] = (  # (id, source, text)
    ("returns", "policies/returns.md",
     "KEYFACT ANSWER: 14 days. Customers may return unused items within 14 days of delivery "
     "for a full refund; items must be in their original packaging."),
    ("returns-2019", "policies/returns-2019.md",
     "Customers may return items within 30 days of purchase. This returns policy was "
     "replaced in 2021 and is kept for orders placed before then."),
    ("refund-timing", "policies/refund-timing.md",
     "KEYFACT ANSWER: 5 business days. Refunds are issued to the original payment method "
     "within 5 business days after the returned item is received."),
    ("exchanges", "policies/exchanges.md",
     "Exchanges for a different size or colour are free within 14 days of delivery, subject "
     "to stock; an exchange is not a refund."),
    ("shipping", "policies/shipping.md",
     "KEYFACT ANSWER: 3 to 5 business days. Standard shipping takes 3 to 5 business days; "
     "express shipping takes 1 business day when ordered before noon."),
    ("shipping-costs", "policies/shipping-costs.md",
     "Standard shipping is free for orders over 50 euros, otherwise it costs 4.95 euros; "
     "return shipping labels cost 3 euros."),
    ("damaged", "policies/damaged.md",
     "Report items that arrive damaged within 48 hours of delivery with a photo; we send a "
     "replacement or refund the item at no cost."),
    ("final-sale", "policies/final-sale.md",
     "Items marked final sale cannot be returned or exchanged for a refund, except when "
     "they arrive damaged."),
    ("gift-cards", "policies/gift-cards.md",
     "Gift cards are valid for three years from purchase and cannot be returned or "
     "exchanged for cash."),
    ("warranty", "policies/warranty.md",
     "Electronics carry a two-year warranty covering manufacturing defects, not accidental "
     "damage; warranty claims are not returns."),
)

TEXT = {pid: text for pid, _, text in POLICIES}
SOURCE = {pid: source for pid, source, _ in POLICIES}


@dataclass(frozen=True)
class Question:
    text: str
    evidence: str  # the id of the policy that answers it


QUESTIONS: tuple[Question, ...] = (
    Question("How many days do I have to return an item for a refund?", "returns"),
    Question("How long until my refund reaches my payment method after a return?",
             "refund-timing"),
    Question("How many business days does standard shipping take?", "shipping"),
    Question("Can I return a damaged final sale item for a refund?", "final-sale"),
    Question("Do I pay for return shipping on an exchange?", "exchanges"),
)

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "and", "for", "can", "how", "does", "many", "long", "until", "are", "not"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


def keyword_scores(question: str) -> list[tuple[str, float]]:
    """``(id, score)`` of every policy sharing a word with the question, best first (ties:
    corpus order); the score is the share of the question's words the policy contains."""
    q = words(question)
    scored = [(pid, round(len(q & words(text)) / max(len(q), 1), 4))
              for pid, _, text in POLICIES]
    ranked = sorted(enumerate(scored), key=lambda item: (-item[1][1], item[0]))
    return [pair for _, pair in ranked if pair[1] > 0]
