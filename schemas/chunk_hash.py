"""Chunk identity when an app sends no id (docs/architecture.md, "Chunk identity").

The id is the hex sha256 of the text after Unicode NFC normalisation with every run of
whitespace collapsed to one space and the ends stripped, so the same chunk seen by a
retriever, a reranker and inside the prompt gets the same id. Deduplication, ``--no-text``,
the OpenInference normalizer and outcomes all use this one function.
"""

from __future__ import annotations

import hashlib
import unicodedata

def normalize_text(text: str) -> str:
    """NFC-normalise and collapse whitespace: the form that is hashed.

    ``str.split()`` splits on runs of exactly the characters ``\\s`` matches in a str
    pattern (Unicode whitespace) and drops them at the ends, so this equals
    ``re.sub(r"\\s+", " ", text).strip()``, without a regular expression's cost.
    """
    return " ".join(unicodedata.normalize("NFC", text).split())


def content_hash(text: str) -> str:
    """The documented content hash of a chunk's text: ``sha256:<64 hex>``."""
    digest = hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
