"""The judge's prompt and the one answer it accepts (docs/grading.md, "An LLM judge").

The prompt is a versioned file beside this module, ``judge-v<N>.txt``; its name without the
suffix is the version stored with every grade (in the outcome's note) and part of the cache
key, with a hash of the file's text, so a changed prompt never reads an old answer. The
documents are the request's chunks in prompt order, labelled ``[1]`` ... ``[k]``; chunks the
app listed but did not place follow, when the request recorded no placements at all.

The judge must answer one JSON object (:data:`SCHEMA`); :func:`parse_verdict` validates it
strictly and raises :class:`BadVerdict` saying what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VERSION = "judge-v1"
KEYS = ("decisive", "correct", "supported", "qualifiers_in_evidence", "qualifiers_kept", "reason")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisive": {"type": "array", "items": {"type": "integer"}},
        "correct": {"type": "boolean"},
        "supported": {"type": "boolean"},
        "qualifiers_in_evidence": {"type": "array", "items": {"type": "string"}},
        "qualifiers_kept": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"},
    },
    "required": list(KEYS),
    "additionalProperties": False,
}
RESPONSE_FORMAT = {"type": "json_schema",
                   "json_schema": {"name": "midtrace_judgment", "strict": True, "schema": SCHEMA}}
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


class BadVerdict(ValueError):
    """The judge's answer is not the JSON object asked for."""


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    text: str

    @classmethod
    def load(cls, version: str = VERSION) -> JudgePrompt:
        return cls(version, (HERE / f"{version}.txt").read_text(encoding="utf-8"))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def render(self, question: str, documents: Sequence[tuple[int, str]], answer: str) -> str:
        docs = "\n".join(f"[{label}] {' '.join(text.split())}" for label, text in documents)
        # one pass, so a brace in the question or a document is never read as a placeholder
        values = {"question": question, "documents": docs or "(none)", "answer": answer}
        return re.sub(r"\{(question|documents|answer)\}", lambda m: values[m[1]], self.text)


@dataclass(frozen=True)
class Labelled:
    """The documents as the judge sees them: (label, text) and the chunk id of each label."""

    documents: tuple[tuple[int, str], ...]
    chunk_ids: dict[int, str]


def label_chunks(chunks: Sequence[dict[str, Any]]) -> Labelled:
    """Label the chunks with text ``[1]``..``[k]`` in prompt order (``prompt_index``); when
    none was placed, in the order the app listed them."""
    with_text = [c for c in chunks if c.get("text")]
    placed = sorted((c for c in with_text if c.get("prompt_index") is not None),
                    key=lambda c: c["prompt_index"])
    shown = placed or with_text
    docs = tuple((i, str(c["text"])) for i, c in enumerate(shown, start=1))
    return Labelled(docs, {i: str(c["chunk_id"]) for i, c in enumerate(shown, start=1)})


@dataclass(frozen=True)
class Verdict:
    decisive: tuple[int, ...]
    correct: bool
    supported: bool
    qualifiers_in_evidence: tuple[str, ...]
    qualifiers_kept: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"decisive": list(self.decisive), "correct": self.correct,
                "supported": self.supported,
                "qualifiers_in_evidence": list(self.qualifiers_in_evidence),
                "qualifiers_kept": list(self.qualifiers_kept), "reason": self.reason}


def parse_verdict(text: str, labels: int) -> Verdict:
    """The judge's answer as a Verdict; ``labels`` is how many documents it was shown."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced[1]
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise BadVerdict(f"not JSON ({e.msg} at column {e.colno}): {_excerpt(text)}") from None
    return verdict_from_json(obj, labels)


def verdict_from_json(obj: Any, labels: int) -> Verdict:
    if not isinstance(obj, dict):
        raise BadVerdict("not a JSON object")
    missing = [k for k in KEYS if k not in obj]
    if missing:
        raise BadVerdict(f"missing key(s) {', '.join(missing)}")
    unknown = sorted(set(obj) - set(KEYS))
    if unknown:
        raise BadVerdict(f"unknown key(s) {', '.join(unknown)}")
    for key in ("correct", "supported"):
        if not isinstance(obj[key], bool):
            raise BadVerdict(f"{key} must be true or false")
    decisive = obj["decisive"]
    if not isinstance(decisive, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in decisive):
        raise BadVerdict("decisive must be a list of label numbers")
    outside = [d for d in decisive if not 1 <= d <= labels]
    if outside:
        raise BadVerdict(f"decisive names label(s) {outside} outside 1..{labels}")
    lists = {}
    for key in ("qualifiers_in_evidence", "qualifiers_kept"):
        value = obj[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadVerdict(f"{key} must be a list of strings")
        lists[key] = tuple(dict.fromkeys(v.strip() for v in value if v.strip()))
    reason = obj["reason"]
    if not isinstance(reason, str) or not reason.strip():
        raise BadVerdict("reason must be a non-empty string")
    return Verdict(tuple(dict.fromkeys(decisive)), obj["correct"], obj["supported"],
                   lists["qualifiers_in_evidence"], lists["qualifiers_kept"],
                   " ".join(reason.split()))


def _excerpt(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
