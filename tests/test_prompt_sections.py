"""Prompt sections: what surrounds the chunks in the prompt, from the messages' roles and
lengths, the chunks' places and the question (collector/normalize/sections.py), and how the
inspector's strip fills the rest (dashboard/frames.py)."""

from __future__ import annotations

import pandas as pd

from midtrace.collector.normalize.sections import prompt_sections
from midtrace.dashboard import frames


def kinds(sections) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    return [(s.kind, s.char_start, s.char_end) for s in sections]


def test_system_history_preamble_question_and_format_around_the_chunks() -> None:
    system = "You answer from the context only."
    earlier = "Hi, I have a billing question."
    reply = "Sure, what is it?"
    user = ("Context:\n[1] refunds take 30 days\n[2] plans renew monthly\n"
            "Question: how long do refunds take?\nAnswer in one sentence.")
    prompt = "\n\n".join([system, earlier, reply, user])
    base = prompt.index(user)
    c1 = (prompt.index("[1]"), prompt.index("[1]") + len("[1] refunds take 30 days"))
    c2 = (prompt.index("[2]"), prompt.index("[2]") + len("[2] plans renew monthly"))
    q = "how long do refunds take?"
    got = kinds(prompt_sections([("system", len(system)), ("user", len(earlier)),
                                 ("assistant", len(reply)), ("user", len(user))],
                                [c1, c2], prompt, q))
    q_at = prompt.rindex(q)
    assert got[0] == ("instructions", 0, len(system))
    assert got[1] == ("history", len(system) + 2, base - 2)
    assert got[2] == ("instructions", base, c1[0])  # the template's preamble "Context:\n"
    assert ("question", q_at, q_at + len(q)) in got
    assert got[-1] == ("format", q_at + len(q), len(prompt))
    # no section overlaps a chunk
    for _, a, b in got:
        assert all(b <= s or a >= e for s, e in (c1, c2))


def test_without_the_prompt_text_the_roles_and_lengths_still_place_the_sections() -> None:
    # --no-text keeps each message's length, not its text: no exact question
    got = kinds(prompt_sections([("system", 100), ("user", 500)], [(150, 300), (300, 450)]))
    assert got == [("instructions", 0, 150), ("format", 450, 602)]


def test_a_last_user_message_without_chunks_is_the_question() -> None:
    got = kinds(prompt_sections([("system", 50), ("user", 400), ("user", 40)],
                                [(60, 200), (200, 400)]))
    assert [k for k, _, _ in got] == ["instructions", "history", "history", "question"]
    assert got[-1] == ("question", 454, 494)


def test_the_strip_names_every_gap_the_trace_did_not_explain() -> None:
    placed = pd.DataFrame({"token_start": [2300, 2500], "token_end": [2500, 2700]})
    recorded = frames.prompt_segments(placed, None, 3000)
    assert list(recorded["name"]) == ["before the chunks (not recorded)",
                                      "after the chunks (not recorded)"]
    assert list(recorded["tokens"]) == [2300, 300]
    sections = [{"kind": "instructions", "token_start": 0, "token_end": 2000},
                {"kind": "question", "token_start": 2700, "token_end": 2800}]
    named = frames.prompt_segments(placed, sections, 3000)
    assert list(named["name"]) == ["instructions", "before the chunks (not recorded)",
                                   "question", "after the chunks (not recorded)"]
    assert list(named["tokens"]) == [2000, 300, 100, 200]
