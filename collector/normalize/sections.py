"""What fills the prompt around the chunks: instructions, history, the question, the format.

An instrumentation records the prompt as messages with roles; the normalizers join them with a
blank line into one prompt string (``join_texts("\\n\\n", ...)``), so each message's characters
are known, even when the texts were not kept (a redacted text keeps its length). From those
and the chunks' places (docs/zero-code.md, "Prompt sections"):

- a ``system`` or ``developer`` message is ``instructions``;
- every message but the last one the user sent is ``history`` (earlier turns, tool results,
  an assistant prefill after it);
- in the last user message, the text before its first chunk is ``instructions`` (the
  template's preamble), the text after its last chunk is ``format`` (what the template asks
  of the answer), and a message with no chunk in it is the ``question``;
- where the request's question is found in the prompt text (in the last user message if it
  is there), that stretch is ``question``.

The chunks themselves are cut out: a section never overlaps a placement.
"""

from __future__ import annotations

from collections.abc import Sequence

from midtrace.schemas.model import PromptSection

SEPARATOR = len("\n\n")  # between two messages of the joined prompt
INSTRUCTION_ROLES = frozenset({"system", "developer"})
USER_ROLES = frozenset({"user", "human"})

Span = tuple[str, int, int]


def message_spans(messages: Sequence[tuple[str | None, int]]
                  ) -> list[tuple[str | None, int, int]]:
    """``(role, start, end)`` of each message in the joined prompt, the role lower-cased."""
    spans: list[tuple[str | None, int, int]] = []
    pos = 0
    for role, chars in messages:
        spans.append(((role or "").lower() or None, pos, pos + max(0, chars)))
        pos += max(0, chars) + SEPARATOR
    return spans


def prompt_sections(messages: Sequence[tuple[str | None, int]],
                    chunks: Sequence[tuple[int, int]], prompt: str | None = None,
                    question: str | None = None) -> tuple[PromptSection, ...]:
    """The sections of a prompt made of ``messages`` (role, characters) whose chunks sit at
    the character ranges ``chunks``; ``prompt`` (its text, when kept) and ``question`` place the
    question exactly. In prompt order, adjacent pieces of one kind merged."""
    spans = message_spans(messages)
    asking = max((i for i, (role, _, _) in enumerate(spans) if role in USER_ROLES),
                 default=len(spans) - 1 if spans else None)
    pieces: list[Span] = []
    for i, (role, start, end) in enumerate(spans):
        if role in INSTRUCTION_ROLES:
            pieces.append(("instructions", start, end))
        elif i != asking:
            pieces.append(("history", start, end))
        else:
            inside = [(s, e) for s, e in chunks if s < end and e > start]
            if not inside:
                pieces.append(("question", start, end))
                continue
            first = max(start, min(s for s, _ in inside))
            last = min(end, max(e for _, e in inside))
            pieces += [("instructions", start, first), ("format", last, end)]
    found = _find(prompt, question, spans[asking][1:] if asking is not None else None)
    if found is not None:
        pieces = _cut(pieces, [found]) + [("question", *found)]
    pieces = _cut(pieces, list(chunks))
    return tuple(PromptSection(kind=k, char_start=s, char_end=e) for k, s, e in _merge(pieces))


def _find(prompt: str | None, question: str | None,
          asking: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The last place the question appears verbatim in the last user message, else in the
    prompt (templates put it after the context more often than before; a tool call's
    arguments after the user message repeat it)."""
    q = (question or "").strip()
    if not prompt or len(q) < 3:
        return None
    at = prompt.rfind(q, *asking) if asking is not None else -1
    if at < 0:
        at = prompt.rfind(q)
    return (at, at + len(q)) if at >= 0 else None


def _cut(pieces: list[Span], holes: Sequence[tuple[int, int]]) -> list[Span]:
    out: list[Span] = []
    for kind, start, end in pieces:
        parts = [(start, end)]
        for h0, h1 in holes:
            parts = [p for a, b in parts for p in ((a, min(b, h0)), (max(a, h1), b))
                     if p[1] > p[0]] if h1 > h0 else parts
        out += [(kind, a, b) for a, b in parts]
    return out


def _merge(pieces: list[Span]) -> list[Span]:
    """Sorted, empty pieces dropped, neighbours of one kind (across a message separator)
    joined."""
    out: list[Span] = []
    for kind, start, end in sorted((p for p in pieces if p[2] > p[1]),
                                   key=lambda p: (p[1], p[2])):
        if out and out[-1][0] == kind and start - out[-1][2] <= SEPARATOR:
            out[-1] = (kind, out[-1][1], max(out[-1][2], end))
        else:
            out.append((kind, start, end))
    return out
