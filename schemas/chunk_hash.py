"""Chunk identity when an app sends no id (DESIGN.md, "Chunk identity").

The id is the hex sha256 of the text after Unicode NFC normalisation with every run of
whitespace collapsed to one space and the ends stripped, so the same chunk seen by a
retriever, a reranker and inside the prompt gets the same id. Deduplication, ``--no-text``,
the OpenInference normalizer and outcomes all use this one function.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WHITESPACE = re.compile(r"\s+")
# Whitespace that normalising would change: anything but a single space between words.
_UNUSUAL_SPACE = re.compile(r"[^\S ]| {2}")


def normalize_text(text: str) -> str:
    """NFC-normalise and collapse whitespace: the form that is hashed."""
    if (text.isascii() and _UNUSUAL_SPACE.search(text) is None
            and not text.startswith(" ") and not text.endswith(" ")):
        return text  # already normal: ASCII is NFC, and there is nothing to collapse
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def content_hash(text: str) -> str:
    """The documented content hash of a chunk's text: ``sha256:<64 hex>``."""
    digest = hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
