"""Time locating retrieved documents in a prompt (collector/normalize/locate.py).

    python bench/locate.py [--rounds 5] [--baseline REV]

Cases, each a prompt built from a template (``Document [i] (Title: ...)``, a blank line
between documents) and documents of about 500 characters in paragraphs:

- ``20 docs``: 20 documents in a prompt of about 10,000 characters, found as they are;
- ``100 docs``, ``500 docs``, ``1000 docs``: prompts of about 52,000, 260,000 and 520,000
  characters, to see the time grow with the prompt (the last column);
- ``20 docs, reflowed``: the template re-wraps and re-indents every document;
- ``20 docs, 4 dropped``: 16 of the 20 in the prompt, 4 not there at all;
- ``20 docs, 5 truncated``: the last 5 cut short to fit a budget (found by their prefix);
- ``20 docs, NFD``: the documents decomposed (NFD), the prompt composed (NFC);
- ``500 docs, shared opening``: every document opens with the same 120-character header.

Each case runs the current ``locate`` and the one at revision REV (default: the last
revision that searched for each document separately, read with ``git show``), alternating
A, B, A, B for ROUNDS rounds, after checking that both give the same answer (a case the
older one answers otherwise, a form of a document it did not look for, is timed for the
current one alone). The current one forgets the folded forms of documents it keeps before
every call, so each call sees its documents for the first time. Reported: the best time per
call of each, their ratio, and the load average beside every figure (the machine may be
shared; the ratio, measured in one run, is the figure to compare).
"""

from __future__ import annotations

import argparse
import os
import json
import random
import subprocess
import sys
import timeit
import types
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from midtrace.collector.normalize.locate import forget_folded  # noqa: E402
from midtrace.collector.normalize.locate import locate as locate_kept  # noqa: E402

# The last revision whose locate folded each document and searched the prompt for it alone.
BASELINE = "1eeca5592e5d043792b340edf884460aadd2bcfd"
LOCATE_PATH = "collector/normalize/locate.py"
WORDS = ("refund return policy days delivery item warranty shipping order customer store "
         "package exchange receipt original condition within business annual plan invoice "
         "renewal contract clause exception region tier enterprise premium window purchase "
         "account billing cancel subscription upgrade downgrade credit support hardware "
         "the a of to and in for is on that by with").split()
Locate = Callable[[str, Sequence[str | None]], list]


def locate(prompt: str, docs: Sequence[str | None]) -> list:
    """``locate`` seeing its documents for the first time: a collector keeps the folded
    forms of documents it has seen (popular chunks come back), which a call repeated with
    the same documents would time instead."""
    forget_folded()
    return locate_kept(prompt, docs)


def document(rng: random.Random, chars: int) -> str:
    paragraphs = []
    size = 0
    while size < chars:
        sentence_count = rng.randint(2, 4)
        paragraph = " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
            for _ in range(sentence_count))
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    return "\n\n".join(paragraphs)[:chars].rstrip()


def reflow(rng: random.Random, text: str) -> str:
    """``text`` re-wrapped at about 70 characters and indented, as a template might."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + len(word) > 70:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n    ".join(lines) + rng.choice(["", " ", "\n"])


def prompt_of(shown: Sequence[str]) -> str:
    blocks = [f"Document [{i + 1}] (Title: Section {i + 1})\n{text}"
              for i, text in enumerate(shown)]
    return ("Answer the question from the documents below. Cite them as [n].\n\n"
            + "\n\n".join(blocks) + "\n\nQuestion: how many days do I have to return an item?")


def cases() -> list[tuple[str, str, list[str]]]:
    rng = random.Random(7)
    docs20 = [document(rng, 500) for _ in range(20)]
    docs1000 = [document(rng, 500) for _ in range(1000)]
    nfd = [unicodedata.normalize("NFD", d.replace("refund", "rembours\u00e9").replace(
        "window", "d\u00e9lai")) for d in docs20]
    cut = [d if i < 15 else d[:rng.randint(120, 300)] for i, d in enumerate(docs20)]
    header = ("Employee handbook, chapter 7 (benefits), as revised in March; it applies to "
              "every region unless a local annex says otherwise.\n")
    headed = [header + d for d in docs1000[:500]]
    return [
        ("20 docs", prompt_of(docs20), docs20),
        ("100 docs", prompt_of(docs1000[:100]), docs1000[:100]),
        ("500 docs", prompt_of(docs1000[:500]), docs1000[:500]),
        ("1000 docs", prompt_of(docs1000), docs1000),
        ("20 docs, reflowed", prompt_of([reflow(rng, d) for d in docs20]), docs20),
        ("20 docs, 4 dropped", prompt_of(docs20[:16]), docs20),
        ("20 docs, 5 truncated", prompt_of(cut), docs20),
        ("20 docs, NFD", prompt_of([unicodedata.normalize("NFC", d) for d in nfd]), nfd),
        ("500 docs, shared opening", prompt_of(headed), headed),
        # a tool's JSON result in the prompt: every document JSON-escaped, 4 not returned
        ("20 docs, JSON tool result, 4 dropped", "Answer from the tool results.\n\nTool: "
         + json.dumps([{"id": i, "text": d} for i, d in enumerate(docs20[:16])]), docs20),
    ]


def baseline(rev: str) -> Locate | None:
    """``locate`` as it was at ``rev``, or None when git cannot show it."""
    try:
        source = subprocess.run(["git", "show", f"{rev}:{LOCATE_PATH}"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no baseline: git show {rev}:{LOCATE_PATH} failed ({e})")
        return None
    module = types.ModuleType("locate_baseline")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev[:8]}:{LOCATE_PATH}", "exec"), module.__dict__)
    return module.locate  # type: ignore[no-any-return]


def answer(fn: Locate, prompt: str, docs: Sequence[str]) -> list[tuple[int, int, int, bool]]:
    return [(f.doc, f.start, f.end, f.truncated) for f in fn(prompt, docs)]


def calls_per_round(fn: Locate, prompt: str, docs: Sequence[str]) -> int:
    """Enough calls for about 0.2 s."""
    return timeit.Timer(lambda: fn(prompt, docs)).autorange()[0]


def per_call(fn: Locate, prompt: str, docs: Sequence[str], number: int) -> float:
    return timeit.timeit(lambda: fn(prompt, docs), number=number) / number


def duration(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs" if seconds < 1e-2 else f"{seconds * 1e3:,.1f} ms"


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="A, B rounds per case")
    parser.add_argument("--baseline", default=BASELINE, metavar="REV",
                        help="git revision of the locate to compare with")
    args = parser.parse_args()
    old = baseline(args.baseline)
    print(f"{os.cpu_count()} CPUs, {load()} at start; best of {args.rounds} rounds, "
          f"alternating new and {args.baseline[:8]}")
    print("| case | documents | prompt chars | new | old | old / new | new per 1,000 prompt "
          "chars | load (1, 5, 15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, prompt, docs in cases():
        new_answer = answer(locate, prompt, docs)
        # a case the older locate does not handle (a form of a document it did not look
        # for) is timed for the current one alone: the two answers are not the same work
        same = old is not None and answer(old, prompt, docs) == new_answer
        number = calls_per_round(locate, prompt, docs)
        old_number = calls_per_round(old, prompt, docs) if same else 0
        new_times, old_times = [], []
        for _ in range(args.rounds):
            new_times.append(per_call(locate, prompt, docs, number))
            if same:
                old_times.append(per_call(old, prompt, docs, old_number))
        new = min(new_times)
        old_shown = ratio = "—"
        if old is not None and not same:
            old_shown = "places them otherwise"
        if old_times:
            old_shown, ratio = duration(min(old_times)), f"{min(old_times) / new:.1f}x"
        print(f"| {name} | {len(docs)} ({len(new_answer)} placed) | {len(prompt):,} | "
              f"{duration(new)} | {old_shown} | {ratio} | {new / len(prompt) * 1e9:.1f} µs | "
              f"{load()} |", flush=True)


if __name__ == "__main__":
    main()
