"""Lenient typed reads of other conventions' span attributes.

midtrace's own attributes are refused when malformed (schemas/decode.py); attributes that
stock instrumentations send are read leniently instead: a value of the wrong type counts
as absent, because the app cannot fix what its instrumentation library emits. So is an
integer beyond what the contract's 32-bit columns hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from midtrace.schemas.chunk_hash import RedactedText
from midtrace.schemas.conventions import MAX_INT

# Metadata keys that name the source document of a chunk, most specific first
# (LangChain loaders use `source`, LlamaIndex readers `file_path`/`file_name`).
SOURCE_KEYS: tuple[str, ...] = (
    "source_id", "source", "document_id", "doc_id", "file_path", "file_name", "url")


def string(attrs: Mapping[str, Any], key: str) -> str | None:
    value = attrs.get(key)
    return value if isinstance(value, str) and value != "" else None


def integer(attrs: Mapping[str, Any], key: str) -> int | None:
    value = attrs.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_INT else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_INT:
        return int(value)
    return None


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        value = float(value)
    except (ValueError, OverflowError):  # text that is no number, an integer past 1e308
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def identifier(value: Any) -> str | None:
    """An id sent as a string or an integer (OpenInference allows both)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value.strip() else None


def json_value(value: Any) -> Any:
    """A JSON string parsed, a structured value as is; None for unreadable JSON.

    A JSON text that ``--no-text`` did not keep gives the structure kept of it (ids and
    numbers, its strings redacted)."""
    if isinstance(value, RedactedText):
        return value.structure
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, nested too deep
            return None
    return value


def indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Flattened list attributes ``prefix.<i>.<rest>`` as ``{i: {rest: value}}``."""
    head = prefix + "."
    splits = _SPLITS.get(head)
    if splits is None or len(splits) >= MAX_SPLITS:
        splits = _SPLITS[head] = {}
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(head):
            try:
                found = splits[key]
            except KeyError:
                found = _split(key, len(head))
                if len(key) <= MAX_SPLIT_KEY_CHARS:
                    splits[key] = found
            if found is not None:
                i, rest = found
                if (row := out.get(i)) is None:
                    out[i] = row = {}
                row[rest] = value
    return out


# The same keys come with every request of an instrumentation ("retrieval.documents.3.
# document.content"): each is cut into its index and rest once, which halves the cost of
# reading a span's documents and messages. At most MAX_SPLITS keys of at most
# MAX_SPLIT_KEY_CHARS are kept per prefix (the prefixes are this code's, about ten): some
# 2.5 MB a prefix at most, whatever keys a client makes up; an instrumentation's keys for a
# hundred documents or messages are a few hundred.
_SPLITS: dict[str, dict[str, tuple[int, str] | None]] = {}
MAX_SPLITS = 4096
MAX_SPLIT_KEY_CHARS = 200


def _split(key: str, cut: int) -> tuple[int, str] | None:
    index, _, rest = key[cut:].partition(".")
    if rest and index.isdecimal() and len(index) <= 9:  # beyond that, no list an SDK sends
        return int(index), rest
    return None


def source_id(metadata: Any) -> str | None:
    """The source document a chunk came from, named in its metadata."""
    if not isinstance(metadata, Mapping):
        return None
    for key in SOURCE_KEYS:
        value = identifier(metadata.get(key))
        if value is not None:
            return value
    return None


def parts_text(parts: Any, text_key: str, text_parts_only: bool = False) -> str | None:
    """Text of a message's content: a plain string, or a list of parts (strings, or mappings
    with the text under ``text_key`` or ``text``) joined by newlines. With
    ``text_parts_only``, parts whose ``type`` is not ``text`` are skipped."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and (not text_parts_only
                                            or part.get("type", "text") == "text"):
            text = part.get(text_key, part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return join_texts("\n", texts) if texts else None


def readable(text: str | None) -> str | None:
    """``text``, or None when it is a text ``--no-text`` did not keep (it cannot be searched)."""
    return None if isinstance(text, RedactedText) else text


def text_length(text: str) -> int:
    """Characters of ``text``, or of the text a redacted one stands for."""
    return text.chars if isinstance(text, RedactedText) else len(text)


def join_texts(separator: str, texts: Sequence[str]) -> str:
    """``separator.join(texts)``; if any of them was not kept, a redacted text of the
    joined length (so a prompt's size is still known)."""
    if len(texts) == 1:
        return texts[0]
    if not any(isinstance(t, RedactedText) for t in texts):
        return separator.join(texts)
    chars = sum(map(text_length, texts)) + len(separator) * (len(texts) - 1)
    return RedactedText(None, chars)
