"""A bounded memo of text -> hash, for the texts that come back (popular chunks).

Hashing a chunk's text costs microseconds (content_hash also NFC-normalizes it) and the same
chunk arrives with many requests, so its hash is kept. The memo is bounded by the characters
it holds, not by its entries: a prompt of 36,000 characters, unique to its request, would
otherwise make 200,000 entries several gigabytes. Texts longer than ``MAX_TEXT_CHARS`` are
hashed every time and never kept.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_TEXT_CHARS = 8_192
BUDGET_CHARS = 16_000_000  # per memo; cleared when full (about 16-64 MB of text)


class TextHashes:
    def __init__(self, hash_text: Callable[[str], str], budget_chars: int = BUDGET_CHARS) -> None:
        self._hash = hash_text
        self._memo: dict[str, str] = {}
        self._chars = 0
        self.budget_chars = budget_chars

    def __call__(self, text: str) -> str:
        h = self._memo.get(text)
        if h is not None:
            return h
        h = self._hash(text)
        n = len(text)
        if n <= MAX_TEXT_CHARS:
            if self._chars + n > self.budget_chars:
                self.clear()
            self._memo[text] = h
            self._chars += n
        return h

    def clear(self) -> None:
        self._memo.clear()
        self._chars = 0
