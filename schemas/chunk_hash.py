"""Chunk identity when an app sends no id (docs/architecture.md, "Chunk identity").

The id is the hex sha256 of the text after Unicode NFC normalisation with every run of
whitespace collapsed to one space and the ends stripped, so the same chunk seen by a
retriever, a reranker and inside the prompt gets the same id. Deduplication, ``--no-text``,
the OpenInference normalizer and outcomes all use this one function.

A text the collector did not keep (``--no-text``) is read back as a :class:`RedactedText`,
which carries the hash of the text it stands for: a chunk keeps its id when its trace is
normalized again without the text.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any


class RedactedText(str):
    """A text known only by its content hash and length (what ``--no-text`` keeps of it).

    It is a string, ``[redacted: N characters]``, so readers that expect a string keep
    working, and it says what it stands for. ``content_hash`` is None for a text joined from
    several (a prompt made of messages). ``structure`` is set when the text was a JSON object
    or array: that value as kept, its ids and numbers as sent, its other strings redacted.
    """

    content_hash: str | None
    chars: int
    structure: Any

    def __new__(cls, content_hash: str | None, chars: int, structure: Any = None) -> RedactedText:
        self = super().__new__(cls, f"[redacted: {chars} characters]")
        self.content_hash = content_hash
        self.chars = chars
        self.structure = structure
        return self


def normalize_text(text: str) -> str:
    """NFC-normalise and collapse whitespace: the form that is hashed.

    ``str.split()`` splits on runs of exactly the characters ``\\s`` matches in a str
    pattern (Unicode whitespace) and drops them at the ends, so this equals
    ``re.sub(r"\\s+", " ", text).strip()``, without a regular expression's cost.
    """
    return " ".join(unicodedata.normalize("NFC", text).split())


def content_hash(text: str) -> str:
    """The documented content hash of a chunk's text: ``sha256:<64 hex>``."""
    if isinstance(text, RedactedText):
        if text.content_hash is None:
            raise ValueError("the hash of a text joined from texts that were not kept is unknown")
        return text.content_hash
    digest = hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
