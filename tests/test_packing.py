"""Packing strategies: exact orders from their definitions, the registry, and a light import."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from midtrace.schemas import packing
from midtrace.schemas import conventions
from midtrace.schemas.model import Chunk

ROOT = Path(__file__).resolve().parent.parent
SIZES = range(0, 11)


# --- expected orders, each derived from its definition, not from the code under test -----

def expected_edge(n: int) -> list[int]:
    """Rank 1 in the first slot, rank 2 in the last, rank 3 the second, rank 4 ... inward."""
    slots: list[int | None] = [None] * n
    lo, hi = 0, n - 1
    for r in range(1, n + 1):
        if r % 2 == 1:
            slots[lo] = r
            lo += 1
        else:
            slots[hi] = r
            hi -= 1
    return [s for s in slots if s is not None]


def haystack_lost_in_the_middle(n: int) -> list[int]:
    """Haystack LostInTheMiddleRanker's insertion rule (no word-count threshold)."""
    if n == 0:
        return []
    order = [0]
    for doc in range(1, n):
        order.insert(len(order) // 2 + len(order) % 2, doc)
    return [i + 1 for i in order]


def langchain_litm(n: int) -> list[int]:
    """LangChain's _litm_reordering, step by step: reverse, insert even i at 0, append odd i."""
    docs = list(range(1, n + 1))
    docs.reverse()
    result: list[int] = []
    for i, value in enumerate(docs):
        if i % 2 == 1:
            result.append(value)
        else:
            result.insert(0, value)
    return result


EXPECTED = {
    "score_order": lambda n: list(range(1, n + 1)),
    "edge": expected_edge,
    "long_context_reorder": langchain_litm,
    "reverse": lambda n: list(range(n, 0, -1)),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_positional_strategies_give_the_defined_order(name: str, n: int) -> None:
    items = [f"chunk-{r}" for r in range(1, n + 1)]
    packed = packing.pack(name, items)
    want = EXPECTED[name](n)
    assert list(packed.ranks) == want
    assert list(packed.items) == [f"chunk-{r}" for r in want]
    assert packed.strategy == name
    assert list(packing.prompt_ranks(name, n)) == want


@pytest.mark.parametrize("n", SIZES)
def test_edge_matches_haystack(n: int) -> None:
    assert list(packing.prompt_ranks("edge", n)) == haystack_lost_in_the_middle(n)


def test_documented_examples() -> None:
    assert packing.prompt_ranks("edge", 5) == (1, 3, 5, 4, 2)
    assert packing.prompt_ranks("edge", 6) == (1, 3, 5, 6, 4, 2)
    assert packing.prompt_ranks("long_context_reorder", 6) == (2, 4, 6, 5, 3, 1)
    # LangChain's reorder equals edge for odd n only.
    for n in SIZES:
        same = packing.prompt_ranks("edge", n) == packing.prompt_ranks("long_context_reorder", n)
        assert same == (n % 2 == 1 or n == 0)


def _sources_for(n: int) -> list[tuple[str | None, int | None]]:
    """A fixed, irregular layout: three sources, positions out of rank order, a few unknowns."""
    layout: list[tuple[str | None, int | None]] = []
    for r in range(1, n + 1):
        src = None if r % 7 == 0 else ("policy", "api-docs", "changelog")[(r * r) % 3]
        pos = None if r % 5 == 0 else (r * 7) % 11
        layout.append((src, pos))
    return layout


def expected_doc_order(layout: Sequence[tuple[str | None, int | None]]) -> list[int]:
    """Sort key per rank: (best rank of its source, has no position, position, rank)."""
    best: dict[str, int] = {}
    for r, (src, _) in enumerate(layout, start=1):
        if src is not None:
            best[src] = min(best.get(src, r), r)

    def key(r: int) -> tuple[int, bool, int, int]:
        src, pos = layout[r - 1]
        group = best[src] if src is not None else r
        return (group, pos is None, pos if pos is not None else 0, r)

    return sorted(range(1, len(layout) + 1), key=key)


@pytest.mark.parametrize("n", SIZES)
def test_doc_order_within_source(n: int) -> None:
    layout = _sources_for(n)
    items = [(r, s, p) for r, (s, p) in enumerate(layout, start=1)]
    packed = packing.pack("doc_order_within_source", items,
                          source=lambda t: t[1], source_position=lambda t: t[2])
    assert list(packed.ranks) == expected_doc_order(layout)
    assert [t[0] for t in packed.items] == list(packed.ranks)


def test_doc_order_reads_chunk_fields_directly() -> None:
    chunks = [
        Chunk(id="a", source_id="refund-policy", source_position=4),
        Chunk(id="b", source_id="warranty", source_position=0),
        Chunk(id="c", source_id="refund-policy", source_position=1),
        Chunk(id="d"),
        Chunk(id="e", source_id="warranty", source_position=None),
        Chunk(id="f", source_id="refund-policy", source_position=2),
    ]
    packed = packing.pack("doc_order_within_source", chunks)
    assert [c.id for c in packed.items] == ["c", "f", "a", "b", "e", "d"]
    assert packed.ranks == (3, 6, 1, 2, 5, 4)


def test_equal_scores_keep_input_order() -> None:
    items = ["a", "b", "c", "d", "e", "f", "g"]
    scores = {"a": 0.5, "b": 0.9, "c": 0.5, "d": 0.9, "e": None, "f": float("nan"), "g": 0.5}
    ranked = packing.rank(items, score=lambda x: scores[x])
    assert [r.item for r in ranked] == ["b", "d", "a", "c", "g", "e", "f"]
    assert [r.rank for r in ranked] == [1, 2, 3, 4, 5, 6, 7]
    packed = packing.pack("edge", items, score=lambda x: scores[x])
    assert list(packed.items) == ["b", "a", "g", "f", "e", "c", "d"]


def test_all_equal_scores_are_rank_order() -> None:
    items = list(range(10))
    for name in ("score_order", "edge", "long_context_reorder", "reverse"):
        by_score = packing.pack(name, items, score=lambda _: 1.0)
        assert by_score == packing.pack(name, items)


def test_unknown_name_lists_known_strategies() -> None:
    with pytest.raises(packing.UnknownStrategyError) as info:
        packing.pack("middle_out", ["a"])
    message = str(info.value)
    assert "middle_out" in message
    for name in packing.BUILTIN:
        assert name in message
    with pytest.raises(LookupError):
        packing.get("middle_out")


def test_register_own_strategy() -> None:
    def best_last(ranked: Sequence[packing.Ranked[Any]]) -> list[packing.Ranked[Any]]:
        return list(ranked[1:]) + list(ranked[:1])

    packing.register("best_last", best_last)
    try:
        assert "best_last" in packing.names()
        assert packing.names()[:5] == packing.BUILTIN
        packed = packing.pack("best_last", ["r1", "r2", "r3"])
        assert packed.items == ("r2", "r3", "r1")
        assert packed.strategy == "best_last"
        with pytest.raises(packing.StrategyError, match="already registered"):
            packing.register("best_last", best_last)
        packing.register("best_last", packing.reverse, replace=True)
        assert packing.pack("best_last", ["r1", "r2"]).items == ("r2", "r1")
    finally:
        packing.unregister("best_last")
    assert "best_last" not in packing.names()


def test_registry_refuses_bad_registrations() -> None:
    with pytest.raises(packing.StrategyError, match="built-in"):
        packing.register("edge", packing.reverse, replace=True)
    with pytest.raises(packing.StrategyError, match="name"):
        packing.register("has space", packing.reverse)
    with pytest.raises(packing.StrategyError, match="built-in"):
        packing.unregister("score_order")


def test_strategy_must_return_a_permutation() -> None:
    packing.register("drops_one", lambda ranked: list(ranked)[1:])
    packing.register("twice", lambda ranked: [ranked[0]] * len(ranked))
    try:
        for name in ("drops_one", "twice"):
            with pytest.raises(packing.StrategyError, match="each once"):
                packing.pack(name, ["a", "b", "c"])
    finally:
        packing.unregister("drops_one")
        packing.unregister("twice")


def test_strategy_attribute_is_the_contract_name() -> None:
    assert packing.STRATEGY_ATTRIBUTE == conventions.STRATEGY


def test_import_pulls_in_only_the_standard_library() -> None:
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import midtrace.schemas.packing\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    loaded = json.loads(out)
    assert "midtrace.schemas.packing" in loaded
    ours = {m for m in loaded if m.split(".")[0] == "midtrace"}
    assert ours <= {"midtrace", "midtrace.schemas", "midtrace.schemas.packing"}, ours
    tops = {m.split(".")[0] for m in loaded}
    assert tops - set(sys.stdlib_module_names) == {"midtrace"}
