"""Which chunks an answer follows: the answer's specific content found in a chunk's text.

No model: the answer's specific content is cut into features, and each in-prompt chunk whose
text holds some of them is a chunk the answer follows (docs/metrics.md, "Answer sources").

- numbers with their unit ("30 days", "$200", "15%", "five minutes", written digit or word,
  "30-day" the same as "30 days") and bare numbers of two digits or more;
- dates ("March 3, 2026", "3 March 2026", "2026-03-03");
- quoted spans (in straight or curly double quotes);
- word n-grams (two or three words, the first and last not stop words) that are rare: none
  that only repeats the question, none found in more than half of the request's chunks.

A chunk is followed when it holds a number, date or quoted span of the answer, or n-grams
covering at least three words of it. The incident of the articles: the answer says "30 days",
the warranty chunk at slot 2 says 30 days, the refund chunk at slot 7 says 14; the answer
follows the warranty chunk.

Matching is case-insensitive and exact otherwise, at word boundaries. All the chunk texts are
searched at once (joined in one lower-cased string), one search per feature, so the cost grows
with the answer's length, not with the number of chunks times it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Container, Iterable
from dataclasses import dataclass

from midtrace.schemas.chunk_hash import RedactedText
from midtrace.schemas.model import RagRecord

STRONG = ("quote", "date", "number")  # kinds, strongest first; then "ngram"
MIN_NGRAM_WORDS = 3  # n-gram matches must cover this many answer words to follow a chunk

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else
ever every few for from further had has have having he her here hers him his how i if in
into is it its itself just let may me might more most must my no nor not now of off on once
only or other our ours out over own per same shall she should so some such than that the
their theirs them then there these they this those through to too under until up upon us
very via was we were what when where whether which while who whom whose why will with
within without would yes yet you your yours
""".split())

NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
NUMBER_WORDS.update({"fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40",
                     "fifty": "50", "sixty": "60", "ninety": "90", "hundred": "100"})
DIGIT_WORDS = {v: k for k, v in NUMBER_WORDS.items()}
MONTHS = frozenset("""january february march april may june july august september october
november december jan feb mar apr jun jul aug sep sept oct nov dec""".split())

_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W_]+(?:['’][^\W_]+)*")
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{3,300})[\"”]")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CURRENCY = "$€£¥"
_JOIN = "\x00"  # between chunk texts: never part of a match
_JOINERS = ".,:/-'’"  # what _TOKEN allows inside a token besides letters and digits


@dataclass(frozen=True, slots=True)
class Match:
    """One piece of the answer found in a chunk: character offsets in each text."""

    kind: str  # quote | date | number | ngram
    answer_start: int
    answer_end: int
    chunk_start: int
    chunk_end: int


@dataclass(frozen=True, slots=True)
class AnswerSource:
    """A chunk the answer follows and what of the answer it holds."""

    chunk_id: str
    ordinal: int  # the chunk's place in the request's chunk list
    matches: tuple[Match, ...]


@dataclass(slots=True)
class _Feature:
    kind: str
    start: int
    end: int
    needles: tuple[str, ...]
    content: tuple[int, ...] = ()  # of an n-gram: where its words that are not stop words start


def _lower(text: str) -> str:
    low = text.lower()
    if len(low) == len(text):
        return low
    # a character whose lower case is longer ('İ'): keep offsets by lowering one at a time
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _unit_forms(unit: str) -> list[str]:
    forms = [unit]
    if unit.endswith("s") and len(unit) > 3:
        forms.append(unit[:-1])
    else:
        forms.append(unit + "s")
    return forms


class _Words:
    """Whether a word is one of ``text``'s words as ``_TOKEN`` cuts them, asked a word at a
    time. Only the answer's words are ever asked, and the question can be long (the whole
    user message, documents and all, when the trace names no shorter one): each word is
    looked up where it occurs instead of the text being cut into words whole."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._known: dict[str, bool] = {}

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str) or not word:
            return False
        known = self._known.get(word)
        if known is None:
            known = self._known[word] = self._is_word(word)
        return known

    def _is_word(self, word: str) -> bool:
        text = self.text
        at = text.find(word)
        while at >= 0:
            # No token holds a character that is neither a letter, a digit nor a joiner: from
            # just after the last such one before ``at``, _TOKEN cuts as it does from the start.
            start = at
            while start > 0 and (text[start - 1].isalnum() or text[start - 1] in _JOINERS):
                start -= 1
            for m in _TOKEN.finditer(text, start):
                if m.end() <= at:
                    continue
                if m.start() == at and m.end() == at + len(word):
                    return True
                break
            at = text.find(word, at + 1)
        return False


def _features(low: str, question_words: Container[str]) -> list[_Feature]:
    tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(low)]
    out: list[_Feature] = []
    used: set[int] = set()  # tokens inside a number or date feature
    n = len(tokens)

    def joined(i: int) -> bool:  # token i and i + 1 are separated by one space or hyphen
        return i + 1 < n and low[tokens[i][1]:tokens[i + 1][0]] in (" ", "-", "\u00a0")

    for i, (s, e, t) in enumerate(tokens):
        if i in used:
            continue
        digit = t[0].isdigit()
        if joined(i) and ((t in MONTHS and tokens[i + 1][2].isdigit()
                           and len(tokens[i + 1][2]) <= 2)
                          or (digit and len(t) <= 2 and tokens[i + 1][2] in MONTHS)):
            # "March 3" or "3 March", and the year when one follows ("March 3, 2026")
            end_i = i + 1
            if i + 2 < n and len(tokens[i + 2][2]) == 4 and tokens[i + 2][2].isdigit() and \
                    low[tokens[i + 1][1]:tokens[i + 2][0]] in (" ", ", "):
                end_i = i + 2
            _date(out, used, low, tokens, i, end_i)
            continue
        if digit and _ISO_DATE.match(t):
            used.add(i)
            out.append(_Feature("date", s, e, (t,)))
            continue
        word_number = NUMBER_WORDS.get(t)
        if not digit and word_number is None:
            continue
        value = t if digit else word_number
        assert value is not None
        start = s - 1 if digit and s > 0 and low[s - 1] in _CURRENCY else s
        prefix = low[start:s]
        if e < len(low) and low[e] == "%":
            used.add(i)
            out.append(_Feature("number", start, e + 1, (value + "%", value + " percent")))
            continue
        unit = tokens[i + 1][2] if joined(i) else None
        if unit is not None and not unit[0].isdigit() and unit not in STOP_WORDS \
                and unit not in NUMBER_WORDS:
            spelled = [value] + ([DIGIT_WORDS[value]] if value in DIGIT_WORDS else [])
            needles = tuple(f"{prefix}{v}{sep}{u}" for v in spelled for u in _unit_forms(unit)
                            for sep in (" ", "-"))
            used.update((i, i + 1))
            out.append(_Feature("number", start, tokens[i + 1][1], needles))
        elif digit and (len(t) >= 2 or prefix):
            used.add(i)
            out.append(_Feature("number", start, e, (prefix + t,)))
    for m in _QUOTED.finditer(low):
        inner = m.group(1).strip()
        if len(inner) >= 3:
            s = m.start(1) + m.group(1).index(inner)
            out.append(_Feature("quote", s, s + len(inner), (inner,)))
    stop = [t in STOP_WORDS for _, _, t in tokens]
    asked = [t in question_words for _, _, t in tokens]
    link = [joined(j) for j in range(n)]
    for i in range(n - 1):
        if stop[i] or not link[i]:
            continue
        j = i + 1
        if not stop[j] and not (asked[i] and asked[j]):
            _ngram(out, tokens, low, i, j, (i, j))
        k = j + 1
        if k < n and link[j] and not stop[k]:
            content = (i, k) if stop[j] else (i, j, k)
            if not all(asked[x] for x in content):  # else it only repeats the question
                _ngram(out, tokens, low, i, k, content)
    return out


def _ngram(out: list[_Feature], tokens: list[tuple[int, int, str]], low: str, first: int,
           last: int, content: tuple[int, ...]) -> None:
    s, e = tokens[first][0], tokens[last][1]
    out.append(_Feature("ngram", s, e, (low[s:e],), tuple(tokens[x][0] for x in content)))


def _date(out: list[_Feature], used: set[int], low: str,
          tokens: list[tuple[int, int, str]], i: int, end_i: int) -> None:
    s, e = tokens[i][0], tokens[end_i][1]
    surface = low[s:e]
    needles = {surface, surface.replace(",", "")}
    used.update(range(i, end_i + 1))
    out.append(_Feature("date", s, e, tuple(sorted(needles))))


def _find(haystack: str, needle: str, start: int) -> int:
    """The next occurrence of ``needle`` at word boundaries, or -1."""
    check_left = needle[0].isalnum()
    check_right = needle[-1].isalnum()
    while True:
        at = haystack.find(needle, start)
        if at < 0:
            return -1
        end = at + len(needle)
        if (not check_left or at == 0 or not haystack[at - 1].isalnum()) and \
                (not check_right or end == len(haystack) or not haystack[end].isalnum()):
            return at
        start = at + 1


def answer_sources(record: RagRecord) -> list[AnswerSource]:
    """The in-prompt chunks the answer of ``record`` follows, in the order of its chunk
    list. Texts kept only as hashes (RedactedText) cannot be matched and give none."""
    answer = record.answer
    if not answer or isinstance(answer, RedactedText):
        return []
    placed = {p.chunk_id for p in record.placements}
    chosen: list[tuple[int, str, str]] = []  # ordinal, chunk id, text
    seen: set[str] = set()
    for ordinal, ch in enumerate(record.chunks):
        text = ch.text
        if not text or isinstance(text, RedactedText) or ch.id in seen:
            continue
        if (ch.id in placed) if placed else ch.stage == "in_prompt":
            seen.add(ch.id)
            chosen.append((ordinal, ch.id, text))
    if not chosen:
        return []
    low = _lower(answer)
    parts = [_lower(text) for _, _, text in chosen]
    question = record.question
    question_words: Container[str] = frozenset()
    if question and not isinstance(question, RedactedText):
        asked = _lower(question)
        # A question holding the documents (a trace that names no question has the last user
        # message, documents and all) does not ask their words: else every phrase the answer
        # takes from a document would count as repeating the question.
        for part in parts:
            if len(part) < len(asked):
                asked = asked.replace(part, " ")
        question_words = _Words(asked)
    features = _features(low, question_words)
    if not features:
        return []
    starts: list[int] = []
    at = 0
    for _, _, text in chosen:
        starts.append(at)
        at += len(text) + 1
    haystack = _JOIN.join(parts)
    found: dict[int, list[tuple[_Feature, int, int]]] = {}  # chunk index -> matches
    common = max(2, len(chosen) // 2)  # an n-gram in more chunks than this is not specific
    for f in features:
        hits: dict[int, tuple[int, int]] = {}
        for needle in f.needles:
            pos = _find(haystack, needle, 0)
            while pos >= 0:
                c = bisect_right(starts, pos) - 1
                if c not in hits:
                    hits[c] = (pos - starts[c], pos - starts[c] + len(needle))
                pos = _find(haystack, needle, starts[c + 1] if c + 1 < len(starts) else
                            len(haystack))
        if f.kind == "ngram" and len(chosen) >= 3 and len(hits) > common:
            continue
        for c, (cs, ce) in hits.items():
            found.setdefault(c, []).append((f, cs, ce))
    out = []
    for c in sorted(found):
        hits = found[c]
        strong = any(f.kind != "ngram" for f, _, _ in hits)
        if strong or len({w for f, _, _ in hits for w in f.content}) >= MIN_NGRAM_WORDS:
            ordinal, chunk_id, _ = chosen[c]
            out.append(AnswerSource(chunk_id, ordinal, tuple(_merged(hits, low, parts[c]))))
    return out


def _merged(hits: Iterable[tuple[_Feature, int, int]], low: str, chunk: str) -> list[Match]:
    """A chunk's matches, those that sit together both in the answer and in the chunk joined
    into one (so "within 30 days of delivery" is one match, not several)."""
    out: list[Match] = []
    for f, cs, ce in sorted(hits, key=lambda h: (h[0].start, -h[0].end)):
        if out:
            prev = out[-1]
            if prev.answer_start <= f.start and f.end <= prev.answer_end:
                continue  # inside a match already made
            if f.start <= prev.answer_end + 1:
                text = low[prev.answer_start:f.end]
                if chunk.startswith(text, prev.chunk_start) and _find(
                        chunk, text, prev.chunk_start) == prev.chunk_start:
                    out[-1] = Match(min(prev.kind, f.kind, key=_strength), prev.answer_start,
                                    f.end, prev.chunk_start, prev.chunk_start + len(text))
                    continue
        out.append(Match(f.kind, f.start, f.end, cs, ce))
    return out


def _strength(kind: str) -> int:
    return STRONG.index(kind) if kind in STRONG else len(STRONG)
