r"""Find retrieved documents inside a final prompt, and the documents an answer cites.

Instrumentations such as OpenInference record what a retriever returned and, separately,
the prompt the LLM received as one string. Where each document ended up is recovered here
by searching for its text in the prompt:

- whitespace is compared collapsed (any run of whitespace equals one space), so templates
  that re-indent, strip or re-wrap a document still match; offsets are reported in the
  original prompt string;
- a document that occurs twice gives two occurrences; two documents with identical text
  share the occurrences in turn (the first document takes the first one);
- a document cut short to fit a budget is found by its longest prefix present in the
  prompt, if that prefix has at least ``MIN_PREFIX_CHARS`` characters;
- occurrences never overlap: whole-text matches are taken before truncated ones and longer
  before shorter, so a document whose text sits inside a longer document is not placed
  there, and a document sharing a long prefix with another is not mistaken for it;
- when a document is not found and either text is not in Unicode NFC form, both are
  compared NFC-normalised;
- a document still not found whole is looked for as it reads inside a JSON string (a tool
  result, a prompt sent as JSON: ``\n``, ``\"``, ``\uXXXX``, and escaped twice for JSON in
  JSON) and with its HTML tags stripped (``edited_forms``); the placement covers the text as
  the prompt holds it, and a whole match in another form wins over a prefix found as is.

The prompt is folded once per call. With few documents each is then searched for with
``str.find``; with many, the folded prompt is cut into pieces of 32 characters once and each
document looked up by pieces of its own text, so the work grows with the lengths of the
prompt and the documents, not with their product (bench/locate.py measures both). The
folded forms of the documents last seen (popular chunks come back request after request)
are kept, up to ``FOLDED_KEPT`` of at most ``FOLDED_KEPT_CHARS`` characters each.

Citations: ``MIDTRACE_CITATION_PATTERN`` (default ``DEFAULT_CITATION_PATTERN``) finds
citation markers in the answer (``[3]``, ``[doc-3]``, ``[source: id]``, ``Document 3``,
``<doc id=3>``). Each marker is matched to the label the prompt gave a document (a marker
found in the text just before it, such as ``Document [3] (Title: ...)`` or ``<doc id=3>``),
then to a chunk or source id, and, when the prompt labels no document, to the 1-based
prompt order.
"""

from __future__ import annotations

import html
import json
import os
import re
import unicodedata
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from midtrace.schemas.frozen import stored_at_once

MIN_PREFIX_CHARS = 64
# How far before a document the prompt's label for it is looked for.
LABEL_WINDOW_CHARS = 200

CITATION_PATTERN_ENV = "MIDTRACE_CITATION_PATTERN"
DEFAULT_CITATION_PATTERN = (
    r"\[\s*([^\[\]\n]{1,80}?)\s*\]"
    r"|<\s*(?:doc|document|source|context)\b[^<>]*?\bid\s*=\s*[\"']?([^\"'\s<>]+)[\"']?[^<>]*>"
    r"|\b(?:doc(?:ument)?|source|passage|context)s?\s*#?\s*"
    r"(\d+(?:\s*(?:,\s*and|,|;|and|&)\s*#?\d+\b)*)\b"
    r"|【\s*([^†】]+?)\s*(?:†[^】]*)?】"
)

# Whitespace runs that folding changes: a single space is already folded.
_CHANGED_WHITESPACE = re.compile(r"\s{2,}|[^\S ]")
_OTHER_WHITESPACE = re.compile(r"[^\S ]")
_ASCII_OTHER_WHITESPACE = "\v\f\x1c\x1d\x1e\x1f"
_SPACES = re.compile(" +")
# _Grams cuts the prompt into pieces of this many characters (fewer when min_prefix is
# below 2 * _GRAM_CHARS - 1).
_GRAM_CHARS = 32
# A document with more candidate places than this is looked up again by pieces further
# into its text, at most _LATER_LOOKUPS times.
_FEW_STARTS = 16
_LATER_LOOKUPS = 8
# What a _Grams index costs, in characters str.find scans in the same time: per character
# of the prompt to build it, and per document to look one up (bench/locate.py).
_GRAM_INDEX_COST = 25
_GRAM_LOOKUP_COST = 25_000
_KEY_PREFIX = re.compile(
    r"^(?:doc(?:ument)?s?|sources?|src|refs?|references?|chunks?|passages?|contexts?|ids?)\b"
    r"\s*[-_:#=]?\s*"
    r"|^(?:doc|src|ref|chunk)(?=\d)")
_KEY_SPLIT = re.compile(r"\s*[,;]\s*")
# Numbered keys in one marker may also be joined by "and" or "&": "1, 3, and 5", "9 & 10"
# (a named key such as "terms and conditions" is not split).
_NUMBERS_SPLIT = re.compile(r"\s*(?:,\s*and\b|[,;&]|\band\b)\s*")
_NUMBERED = re.compile(r"^(?:[a-z]+s?\s*[-_:#=]?\s*)?#?\d+$")


def _split_keys(raw: str) -> list[str]:
    parts = [p for p in _NUMBERS_SPLIT.split(raw) if p.strip()]
    if len(parts) > 1 and all(_NUMBERED.match(p.strip().lower()) for p in parts):
        return parts
    return [p for p in _KEY_SPLIT.split(raw) if p.strip()]


class InvalidCitationPattern(ValueError):
    """The citation pattern setting cannot be used; the message says how to fix it."""


# --- folding: whitespace-collapsed text with a map back to original offsets -----------------

@stored_at_once
@dataclass(frozen=True)
class _Collapsed:
    """``text`` with each whitespace run collapsed to one space. Only runs of two or more
    characters move what follows, so only they are kept, to map offsets back."""

    text: str
    runs: tuple[int, ...]     # folded offset of each such run, now one space
    removed: tuple[int, ...]  # characters removed up to and including that run

    def original_start(self, i: int) -> int:
        k = bisect_left(self.runs, i)
        return i + self.removed[k - 1] if k else i

    def original_end(self, i: int) -> int:
        """Original offset of the end of a half-open folded range ending at ``i``."""
        return self.original_start(i)


@stored_at_once
@dataclass(frozen=True)
class _Folded:
    """``text`` with each whitespace run collapsed to one space and each character cluster
    NFC-normalised, as pieces that map back to the original string."""

    text: str
    starts: tuple[int, ...]      # folded offset where each piece starts
    orig_starts: tuple[int, ...]
    orig_ends: tuple[int, ...]
    linear: tuple[bool, ...]     # piece has the same length folded and original

    def original_start(self, i: int) -> int:
        k = bisect_right(self.starts, i) - 1
        return self.orig_starts[k] + (i - self.starts[k] if self.linear[k] else 0)

    def original_end(self, i: int) -> int:
        """Original offset of the end of a half-open folded range ending at ``i`` (> 0)."""
        k = bisect_right(self.starts, i - 1) - 1
        if self.linear[k]:
            return self.orig_starts[k] + (i - self.starts[k])
        return self.orig_ends[k]


def _spaces_only(text: str) -> str:
    """``text`` with every whitespace character replaced by a space (same length)."""
    spaced = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    if spaced.isascii():
        others: Iterable[str] = [c for c in _ASCII_OTHER_WHITESPACE if c in spaced]
    elif spaced.isprintable():  # every whitespace character but the space is unprintable
        others = ()
    else:
        others = set(_OTHER_WHITESPACE.findall(spaced))
    for c in others:
        spaced = spaced.replace(c, " ")
    return spaced


def _fold(text: str) -> _Collapsed:
    """Fold ``text`` in one pass over its runs of two or more whitespace characters."""
    spaced = _spaces_only(text)
    find = spaced.find
    parts: list[str] = []
    runs: list[int] = []
    removed: list[int] = []
    pos = gone = 0
    a = find("  ")
    while a >= 0:
        b = a + 2
        if spaced[b:b + 1] == " ":
            b = _SPACES.match(spaced, a).end()  # type: ignore[union-attr]
        parts.append(spaced[pos:a])
        runs.append(a - gone)
        gone += b - a - 1
        removed.append(gone)
        pos = b
        a = find("  ", b)
    if not runs:
        return _Collapsed(spaced, (), ())
    parts.append(spaced[pos:])
    return _Collapsed(" ".join(parts), tuple(runs), tuple(removed))


def _fold_nfc(text: str) -> _Folded:
    """Fold ``text`` with each character cluster NFC-normalised as well."""
    parts: list[str] = []
    starts: list[int] = []
    orig_starts: list[int] = []
    orig_ends: list[int] = []
    linear: list[bool] = []
    size = 0

    def add(piece: str, a: int, b: int) -> None:
        nonlocal size
        starts.append(size)
        orig_starts.append(a)
        orig_ends.append(b)
        linear.append(len(piece) == b - a)
        parts.append(piece)
        size += len(piece)

    def add_text(a: int, b: int) -> None:
        segment = text[a:b]
        if unicodedata.is_normalized("NFC", segment):
            add(segment, a, b)
            return
        # Compose each starter with the combining marks after it, one cluster at a time,
        # so every folded character still maps to a place in the original.
        i = a
        while i < b:
            j = i + 1
            while j < b and unicodedata.combining(text[j]):
                j += 1
            add(unicodedata.normalize("NFC", text[i:j]), i, j)
            i = j

    pos = 0
    for m in _CHANGED_WHITESPACE.finditer(text):
        if m.start() > pos:
            add_text(pos, m.start())
        add(" ", m.start(), m.end())
        pos = m.end()
    if pos < len(text):
        add_text(pos, len(text))
    return _Folded("".join(parts), tuple(starts), tuple(orig_starts), tuple(orig_ends),
                   tuple(linear))


def fold_text(text: str) -> str:
    """The form documents are compared in: whitespace runs collapsed, ends stripped."""
    # str.split() splits on exactly the characters the regular expression \s matches.
    return " ".join(text.split())


# Popular chunks come back in request after request: their folded forms are kept, up to
# FOLDED_KEPT texts of at most FOLDED_KEPT_CHARS characters, each with its folded form: at
# most 16 MB of ASCII text (a chunk of 600 characters: about 2.5 MB for all 2,048).
FOLDED_KEPT = 2048
FOLDED_KEPT_CHARS = 4096
_folded_kept = lru_cache(maxsize=FOLDED_KEPT)(fold_text)


def forget_folded() -> None:
    """Forget the folded documents kept (bench/locate.py times each call as a first sight)."""
    _folded_kept.cache_clear()


def _folded_document(text: str) -> str:
    """``fold_text`` of a document, from the texts kept when it is one of them."""
    return _folded_kept(text) if len(text) <= FOLDED_KEPT_CHARS else fold_text(text)


# --- locating ----------------------------------------------------------------------------

@stored_at_once
@dataclass(frozen=True)
class Found:
    """One occurrence of document ``doc`` (its index in the texts given) in the prompt.

    ``start``/``end`` are half-open character offsets in the original prompt string;
    ``truncated`` is True when only a prefix of the document was found.
    """

    doc: int
    start: int
    end: int
    truncated: bool = False


class _Scan:
    """Search the folded prompt for each text in turn: for a few documents, a handful of
    ``str.find`` calls over the prompt cost less than building a ``_Grams`` index."""

    def __init__(self, text: str) -> None:
        self.text = text

    def occurrences(self, needle: str) -> list[int]:
        """Where ``needle`` occurs: each search resumes after the previous occurrence."""
        out: list[int] = []
        i = self.text.find(needle)
        while i >= 0:
            out.append(i)
            i = self.text.find(needle, i + len(needle))
        return out

    def longest_prefix(self, needle: str, min_len: int) -> int:
        """Length of the longest prefix of ``needle`` (>= min_len) present, or 0."""
        text = self.text
        if len(needle) < min_len or needle[:min_len] not in text:
            return 0
        lo, hi = min_len, len(needle)  # prefix of length lo is present; presence is monotone
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if needle[:mid] in text:
                lo = mid
            else:
                hi = mid - 1
        return lo


class _Grams(_Scan):
    """The folded prompt indexed by consecutive pieces of ``k`` characters, for many
    documents: one pass over the prompt instead of one per document.

    Any occurrence of a text of at least ``2k - 1`` characters covers one of the pieces
    whole, starting less than ``k`` characters into the text; so looking up the text's ``k``
    pieces that start there gives every place it can start. Shorter texts are searched for
    with ``str.find``; prefixes are looked for only when at least ``2k - 1`` characters long.
    """

    def __init__(self, text: str, k: int) -> None:
        super().__init__(text)
        self.k = k
        places = range(0, len(text) - k + 1, k)
        pieces = [text[p:p + k] for p in places]
        index: Mapping[str, Sequence[int]] = dict(zip(pieces, zip(places)))
        if len(index) < len(pieces):  # a piece seen twice: keep every place
            lists: dict[str, list[int]] = {}
            for piece, p in zip(pieces, places):
                lists.setdefault(piece, []).append(p)
            index = lists
        self.index = index

    def _hits(self, needle: str, offset: int) -> tuple[int, list[tuple[int, Sequence[int]]]]:
        """The ``k`` pieces of ``needle`` from ``offset`` found in the index, as (where the
        piece starts in ``needle``, where it is in the prompt), and how many places in all.
        Needs ``offset + 2k - 1 <= len(needle)``."""
        found = map(self.index.get, map(needle.__getitem__, _slices(offset, self.k)))
        hits = [(o, places) for o, places in enumerate(found, offset) if places]
        return sum(len(places) for _, places in hits), hits

    @staticmethod
    def _starts(hits: list[tuple[int, Sequence[int]]]) -> list[int]:
        return sorted({p - o for o, places in hits for p in places if p >= o})

    def starts(self, needle: str) -> list[int]:
        """Sorted places where ``needle`` (at least ``2k - 1`` characters) may start: a
        superset of its occurrences, and of those of its prefixes that long."""
        return self._starts(self._hits(needle, 0)[1])

    def occurrences(self, needle: str) -> list[int]:
        k = self.k
        if len(needle) < 2 * k - 1:
            return super().occurrences(needle)
        count, hits = self._hits(needle, 0)
        # An opening many documents share (a repeated header) gives many places; pieces
        # further into the text, its last ones first, tell them apart.
        last = len(needle) - 2 * k + 1
        later = [last] + [k << i for i in range(_LATER_LOOKUPS - 1) if k << i < last]
        for offset in later if last > 0 else ():
            if count <= _FEW_STARTS:
                break
            fewer, other = self._hits(needle, offset)
            if fewer < count:
                count, hits = fewer, other
        out: list[int] = []
        end = 0
        for i in self._starts(hits):
            if i >= end and self.text.startswith(needle, i):
                out.append(i)
                end = i + len(needle)
        return out

    def longest_prefix(self, needle: str, min_len: int) -> int:
        if min_len < 2 * self.k - 1:
            return super().longest_prefix(needle, min_len)
        text = self.text
        best = min_len - 1
        for i in self.starts(needle) if len(needle) >= min_len else ():
            if not text.startswith(needle[:best + 1], i):
                continue
            lo, hi = best + 1, min(len(needle), len(text) - i)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if text.startswith(needle[:mid], i):
                    lo = mid
                else:
                    hi = mid - 1
            best = lo
        return best if best >= min_len else 0


@lru_cache(maxsize=64)
def _slices(offset: int, k: int) -> tuple[slice, ...]:
    return tuple(slice(o, o + k) for o in range(offset, offset + k))


def _search(prompt: str, needles: Sequence[str], min_prefix: int) -> _Scan:
    """The cheaper search for this many documents in a prompt this long."""
    scanned = len(needles) * len(prompt)
    if scanned <= _GRAM_INDEX_COST * len(prompt) + _GRAM_LOOKUP_COST * len(needles):
        return _Scan(prompt)
    return _Grams(prompt, max(1, min(_GRAM_CHARS, (min_prefix + 1) // 2)))


# Candidates are (truncated, -length, group, start), so that sorting them gives the order in
# which _accept considers them.
_Candidate = tuple[bool, int, int, int]


def _candidates(search: _Scan, needles: Sequence[str], min_prefix: int) -> list[_Candidate]:
    """Every occurrence of each needle, or, for one with none, of its longest prefix of at
    least ``min_prefix`` characters."""
    out: list[_Candidate] = []
    for g, needle in enumerate(needles):
        hits = search.occurrences(needle)
        if hits:
            out += [(False, -len(needle), g, h) for h in hits]
            continue
        length = search.longest_prefix(needle, min_prefix) if len(needle) > min_prefix else 0
        prefix = needle[:length].rstrip()
        if length and len(prefix) >= min_prefix:
            out += [(True, -len(prefix), g, h) for h in search.occurrences(prefix)]
    return out


def _accept(candidates: list[_Candidate]) -> list[tuple[int, int, int, bool]]:
    """Greedy non-overlapping choice: whole matches first, then longer, then earlier doc.

    Returns ``(group, start, end, truncated)`` in folded offsets."""
    taken: list[tuple[int, int]] = []
    accepted: list[tuple[int, int, int, bool]] = []
    for truncated, neg_len, g, start in sorted(candidates):
        end = start - neg_len
        k = bisect_right(taken, (start, end))
        if k > 0 and taken[k - 1][1] > start:
            continue
        if k < len(taken) and taken[k][0] < end:
            continue
        insort(taken, (start, end))
        accepted.append((g, start, end, truncated))
    return accepted


_TAG = re.compile(r"<[^<>]{1,200}>")
MIN_EDITED_CHARS = 24  # shortest edited form of a document that is looked for


def edited_forms(text: str, escaped: bool = True) -> list[str]:
    """What a document may have become on its way into the prompt besides re-spacing: a JSON
    string's body (a tool result or a prompt sent as JSON; non-ASCII kept or escaped, and
    escaped twice for JSON inside JSON), and its text with HTML tags stripped and entities
    decoded. ``escaped=False`` (a prompt with no backslash) leaves out the JSON forms."""
    forms: list[str] = []
    if escaped:
        once = json.dumps(text, ensure_ascii=False)[1:-1]
        ascii_once = json.dumps(text)[1:-1]
        forms += [once, ascii_once, json.dumps(once, ensure_ascii=False)[1:-1],
                  json.dumps(ascii_once)[1:-1]]
    if "<" in text or "&" in text:
        forms.append(html.unescape(_TAG.sub(" ", text)))
    return forms


def locate(prompt: str, texts: Sequence[str | None],
           min_prefix: int = MIN_PREFIX_CHARS) -> list[Found]:
    """Every occurrence of each text in ``prompt``, in prompt order (see the module doc)."""
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        if t:
            key = _folded_document(t)
            if key:
                groups.setdefault(key, []).append(i)
    if not groups or not prompt:
        return []
    needles = list(groups)
    members = list(groups.values())
    folded: _Collapsed | _Folded = _fold(prompt)
    accepted = _accept(_candidates(_search(folded.text, needles, min_prefix), needles,
                                   min_prefix))

    missing = set(range(len(needles))) - {g for g, _, _, _ in accepted}
    nfc_needed = missing and (not unicodedata.is_normalized("NFC", prompt) or any(
        not unicodedata.is_normalized("NFC", needles[g]) for g in missing))
    if nfc_needed:
        folded = _fold_nfc(prompt)
        nfc_needles = [fold_text(unicodedata.normalize("NFC", n)) for n in needles]
        accepted = _accept(_candidates(_search(folded.text, nfc_needles, min_prefix),
                                       nfc_needles, min_prefix))

    # Documents the prompt holds in another form (JSON-escaped, tags stripped): those not
    # found, and those found only cut short, whose whole may be there escaped (a character
    # JSON escapes, or that folds to a space, ends the plain match early).
    whole = {g for g, _, _, t in accepted if not t}
    missing = set(range(len(needles))) - whole
    if missing:
        extra: list[_Candidate] = [(t, -(e - b), g, b) for g, b, e, t in accepted]
        has_escapes = "\\" in prompt
        for g in sorted(missing):
            original = texts[members[g][0]] or ""
            forms = edited_forms(original, escaped=has_escapes)
            if nfc_needed:  # the prompt is searched NFC-normalised from here on
                forms = [unicodedata.normalize("NFC", x) for x in forms]
            # a stripped form too short to tell apart ("a < b and c > d" -> "a d") is not
            # looked for: it would be found anywhere
            variants = [v for v in dict.fromkeys(fold_text(x) for x in forms)
                        if v != needles[g]
                        and (len(v) >= MIN_EDITED_CHARS or len(v) >= len(needles[g]))]
            if variants:
                extra += [(t, n, g, b) for t, n, _, b in _candidates(
                    _search(folded.text, variants, min_prefix), variants, min_prefix)]
        accepted = _accept(extra)

    found: list[Found] = []
    by_group: dict[int, list[tuple[int, int, int, bool]]] = {}
    for c in sorted(accepted, key=lambda c: c[1]):
        by_group.setdefault(c[0], []).append(c)
    for g, hits in by_group.items():
        docs = members[g]
        for j, (_, start, end, truncated) in enumerate(hits):
            found.append(Found(docs[j % len(docs)], folded.original_start(start),
                               folded.original_end(end), truncated))
    found.sort(key=lambda f: (f.start, f.doc))
    return found


# --- citations -------------------------------------------------------------------------------

def compile_citation_pattern(text: str) -> re.Pattern[str]:
    """Compile a citation pattern, refusing one that cannot name a document."""
    try:
        pattern = re.compile(text, re.IGNORECASE)
    except re.error as e:
        raise InvalidCitationPattern(
            f"{CITATION_PATTERN_ENV} is not a valid regular expression ({e}); fix it or unset "
            "it to use the default") from e
    if pattern.groups < 1:
        raise InvalidCitationPattern(
            f"{CITATION_PATTERN_ENV} must have a capturing group around the document key, "
            r"e.g. \[(\d+)\]")
    return pattern


@lru_cache(maxsize=8)
def _compiled(text: str) -> re.Pattern[str]:
    return compile_citation_pattern(text)


def citation_pattern(environ: Mapping[str, str] | None = None) -> re.Pattern[str]:
    """The configured citation pattern: ``MIDTRACE_CITATION_PATTERN`` or the default."""
    env = os.environ if environ is None else environ
    return _compiled(env.get(CITATION_PATTERN_ENV) or DEFAULT_CITATION_PATTERN)


def normalize_key(key: str) -> str:
    """``Doc-3``, ``[source: 3]`` and ``3`` all become ``3``; other keys are lower-cased."""
    k = key.strip().strip("\"'`").strip().lower()
    stripped = _KEY_PREFIX.sub("", k, count=1).strip()
    return stripped or k


def _markers(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int, list[str]]]:
    out = []
    for m in pattern.finditer(text):
        raw = next((g for g in m.groups() if g), None)
        if raw is not None:
            keys = [normalize_key(part) for part in _split_keys(raw)]
            if keys:
                out.append((m.start(), m.end(), keys))
    return out


def citation_keys(text: str, pattern: re.Pattern[str]) -> list[str]:
    """The normalised keys of every citation marker in ``text``, in order of appearance."""
    return [k for _, _, keys in _markers(text, pattern) for k in keys]


def prompt_labels(prompt: str, spans: Sequence[tuple[int, int]],
                  pattern: re.Pattern[str],
                  message_starts: Sequence[int] = ()) -> list[str | None]:
    """The label the prompt gives each placed span: the marker just before it.

    Spans are ``(start, end)`` in prompt order. The label is looked for between the end of
    the previous span and the start of this one (at most ``LABEL_WINDOW_CHARS`` back), and
    not before the start of the message the span is in, when ``message_starts`` (the
    prompt's message offsets, ascending) are known: an instruction's example (``cite like
    [2]``) labels no document of a later message (a tool result). The last marker there
    wins, except that a numeric marker on the same line before it wins over a non-numeric
    one (``Document [3] (Title: Q3 [draft])`` is labelled 3).
    """
    labels: list[str | None] = []
    prev_end = 0
    for start, end in spans:
        floor = max((m for m in message_starts if m <= start), default=0)
        window = prompt[max(prev_end, start - LABEL_WINDOW_CHARS, floor):start]
        markers = _markers(window, pattern)
        label = None
        if markers:
            last_start, _, last_keys = markers[-1]
            label = last_keys[-1]
            if not label.isdecimal():
                same_line = [k for s, e, keys in markers if "\n" not in window[e:last_start]
                             for k in keys if k.isdecimal()]
                label = same_line[-1] if same_line else label
        labels.append(label)
        prev_end = max(prev_end, end)
    return labels


@stored_at_once
@dataclass(frozen=True)
class Citations:
    """What an answer cites: chunk ids in order of first citation, and unmatched keys."""

    cited_ids: tuple[str, ...]
    unresolved: tuple[str, ...]


def resolve_citations(answer: str, placed_ids: Sequence[str], labels: Sequence[str | None],
                      aliases: Mapping[str, Sequence[str]],
                      pattern: re.Pattern[str]) -> Citations | None:
    """Map the answer's citation markers to chunk ids; None when it has no marker at all.

    ``placed_ids`` and ``labels`` are per placement in prompt order; ``aliases`` maps other
    normalised names (chunk ids, source ids) to chunk ids. A number the prompt gives to
    several documents (an earlier turn's numbering still in the prompt, then this turn's)
    means the last document so numbered; a name (a source) means every document it labels.
    """
    keys = citation_keys(answer, pattern)
    if not keys:
        return None
    by_label: dict[str, list[str]] = {}
    for cid, label in zip(placed_ids, labels):
        if label is not None and label.isdecimal():
            by_label[label] = [cid]
        elif label is not None:
            by_label.setdefault(label, []).append(cid)
    cited: list[str] = []
    unresolved: list[str] = []
    for key in keys:
        ids = by_label.get(key) or list(aliases.get(key, ()))
        if not ids and not by_label and key.isdecimal() and 1 <= int(key) <= len(placed_ids):
            ids = [placed_ids[int(key) - 1]]
        if not ids:
            if key not in unresolved:
                unresolved.append(key)
            continue
        cited += [i for i in dict.fromkeys(ids) if i not in cited]
    return Citations(tuple(cited), tuple(unresolved))
