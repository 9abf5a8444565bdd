"""Packing strategies: the order in which ranked chunks are laid into the prompt.

A retriever (and reranker) decides *which* chunks are worth the budget and ranks them; a
packing strategy decides *where* each one sits in the prompt. Strategies here are pure
permutations of a ranked list, named as everywhere in midtrace (docs/architecture.md, "Packing
strategies"):

``score_order``
    rank order as given: 1, 2, 3, ...
``edge``
    rank 1 first, rank 2 last, rank 3 second, rank 4 second-to-last, inward. n=5 gives
    1,3,5,4,2 and n=6 gives 1,3,5,6,4,2, as Haystack's ``LostInTheMiddleRanker``.
``long_context_reorder``
    LangChain's ``LongContextReorder`` exactly: reverse the list, then put every item with
    an even index at the front and every odd one at the back. n=6 gives 2,4,6,5,3,1. For an
    odd n it equals ``edge``; for an even n rank 1 ends up *last* and rank 2 first.
``reverse``
    lowest rank first, rank 1 last (closest to a question that follows the evidence).
``doc_order_within_source``
    chunks grouped by source document, each group in reading order (``source_position``);
    groups in the order of their best-ranked chunk. A chunk with no source is a group of
    its own; within a group, chunks with no position follow the positioned ones, by rank.

Dropping (budget, dedupe, ...) happens before packing; a strategy only reorders. The module
imports only the standard library, so an app can use it without the rest of midtrace.

An app packs and records the strategy's name on its trace::

    packed = packing.pack("edge", chunks)
    prompt = render(packed.items)
    record_request(span, RagRecord(strategy=packed.strategy, ...))

``packed.strategy`` is what goes into ``RagRecord.strategy`` (span attribute
``midtrace.packing.strategy``, :data:`STRATEGY_ATTRIBUTE`).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")

STRATEGY_ATTRIBUTE = "midtrace.packing.strategy"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


class UnknownStrategyError(LookupError):
    """No strategy is registered under that name; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class StrategyError(ValueError):
    """A strategy was registered or behaved against the rules (bad name, not a permutation)."""


@dataclass(frozen=True)
class Ranked(Generic[T]):
    """One item as a strategy sees it: the item, its 1-based rank and what keys said of it."""

    item: T
    rank: int
    score: float | None = None
    source: Hashable | None = None
    source_position: int | None = None


@dataclass(frozen=True)
class Packed(Generic[T]):
    """Items in prompt order, the strategy that ordered them, and each item's rank."""

    items: tuple[T, ...]
    strategy: str
    ranks: tuple[int, ...]


Strategy = Callable[[Sequence[Ranked[Any]]], Sequence[Ranked[Any]]]


# --- the built-in strategies: each takes a list in rank order and returns it reordered ------
# The positional ones accept any sequence; doc_order_within_source needs Ranked entries
# (made by rank() or pack()), since it reads each entry's source and source position.

def score_order(ranked: Sequence[S]) -> list[S]:
    """Rank order as given."""
    return list(ranked)


def edge(ranked: Sequence[S]) -> list[S]:
    """Best at both ends, worst in the middle: 1, 3, 5, ..., 6, 4, 2."""
    return list(ranked[0::2]) + list(ranked[1::2])[::-1]


def long_context_reorder(ranked: Sequence[S]) -> list[S]:
    """LangChain's LongContextReorder: reverse, then even indices to the front, odd to the back."""
    front: list[S] = []
    back: list[S] = []
    for i, item in enumerate(reversed(ranked)):
        if i % 2 == 1:
            back.append(item)
        else:
            front.append(item)
    return front[::-1] + back


def reverse(ranked: Sequence[S]) -> list[S]:
    """Lowest rank first, rank 1 last."""
    return list(ranked)[::-1]


def doc_order_within_source(ranked: Sequence[Ranked[T]]) -> list[Ranked[T]]:
    """Group by source (groups ordered by their best rank), each group in source order."""
    groups: dict[Hashable, list[Ranked[T]]] = {}
    for r in ranked:
        key: Hashable = ("source", r.source) if r.source is not None else ("rank", r.rank)
        groups.setdefault(key, []).append(r)
    out: list[Ranked[T]] = []
    for members in groups.values():
        out += sorted(members, key=lambda r: (r.source_position is None,
                                              r.source_position or 0, r.rank))
    return out


# --- the registry -------------------------------------------------------------------------

BUILTIN: tuple[str, ...] = (
    "score_order", "edge", "long_context_reorder", "reverse", "doc_order_within_source")

_lock = threading.Lock()
_registry: dict[str, Strategy] = {
    "score_order": score_order,
    "edge": edge,
    "long_context_reorder": long_context_reorder,
    "reverse": reverse,
    "doc_order_within_source": doc_order_within_source,
}


def register(name: str, fn: Strategy, *, replace: bool = False) -> None:
    """Register ``fn`` under ``name``; it gets the ranked list and returns it reordered.

    ``fn`` receives :class:`Ranked` entries in rank order and must return the same entries
    in prompt order (a permutation). Built-in names cannot be replaced; another name can
    only with ``replace=True``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise StrategyError(
            f"strategy name {name!r} must start with a letter or digit and use only "
            "letters, digits and _ . : -")
    if not callable(fn):
        raise StrategyError(f"strategy {name!r} must be callable, got {type(fn).__name__}")
    with _lock:
        if name in BUILTIN:
            raise StrategyError(f"{name!r} is a built-in strategy and cannot be replaced")
        if name in _registry and not replace:
            raise StrategyError(
                f"strategy {name!r} is already registered; pass replace=True to replace it")
        _registry[name] = fn


def unregister(name: str) -> None:
    """Remove a strategy registered with :func:`register` (built-ins stay)."""
    with _lock:
        if name in BUILTIN:
            raise StrategyError(f"{name!r} is a built-in strategy and cannot be removed")
        if name not in _registry:
            raise UnknownStrategyError(_unknown_message(name))
        del _registry[name]


def names() -> tuple[str, ...]:
    """Registered strategy names: the built-ins in their documented order, then others sorted."""
    with _lock:
        extra = sorted(n for n in _registry if n not in BUILTIN)
    return BUILTIN + tuple(extra)


def get(name: str) -> Strategy:
    """The strategy registered under ``name``; UnknownStrategyError names the known ones."""
    with _lock:
        fn = _registry.get(name)
    if fn is None:
        raise UnknownStrategyError(_unknown_message(name))
    return fn


def _unknown_message(name: object) -> str:
    return f"unknown packing strategy {name!r}; known strategies: {', '.join(names())}"


# --- packing ------------------------------------------------------------------------------

def rank(
    items: Sequence[T],
    *,
    score: Callable[[T], float | None] | None = None,
    source: Callable[[T], Hashable | None] | None = None,
    source_position: Callable[[T], int | None] | None = None,
) -> list[Ranked[T]]:
    """Wrap ``items`` as :class:`Ranked` entries in rank order.

    Without ``score`` the input order is the rank order (rank 1 first). With ``score``,
    items are sorted by descending score, stably (equal scores keep their input order), and
    items whose score is None or NaN come last. ``source`` and ``source_position`` default
    to the ``source_id`` and ``source_position`` attributes when an item has them (as
    ``midtrace.schemas.model.Chunk`` does).
    """
    source_of = source or _attr_getter("source_id")
    position_of = source_position or _attr_getter("source_position")
    scores = [_clean_score(score(x)) if score else None for x in items]
    order = list(range(len(items)))
    if score is not None:
        order.sort(key=lambda i: (scores[i] is None, -(scores[i] or 0.0)))
    return [Ranked(item=items[i], rank=k, score=scores[i], source=source_of(items[i]),
                   source_position=position_of(items[i]))
            for k, i in enumerate(order, start=1)]


def pack(
    name: str,
    items: Sequence[T],
    *,
    score: Callable[[T], float | None] | None = None,
    source: Callable[[T], Hashable | None] | None = None,
    source_position: Callable[[T], int | None] | None = None,
) -> Packed[T]:
    """Order ``items`` (rank 1 first, or by ``score``) for the prompt with strategy ``name``.

    Returns the items in prompt order with the strategy's name (for ``RagRecord.strategy``)
    and each item's rank. Key functions are as for :func:`rank`.
    """
    fn = get(name)
    ranked = rank(items, score=score, source=source, source_position=source_position)
    result = list(fn(ranked))
    _check_permutation(name, ranked, result)
    return Packed(items=tuple(r.item for r in result), strategy=name,
                  ranks=tuple(r.rank for r in result))


def prompt_ranks(name: str, n: int) -> tuple[int, ...]:
    """The ranks 1..n in the prompt order ``name`` gives them (items without sources)."""
    return pack(name, list(range(1, n + 1)), source=_none, source_position=_none).ranks


def _check_permutation(name: str, ranked: list[Ranked[Any]], result: list[Any]) -> None:
    given = sorted(id(r) for r in ranked)
    if len(result) != len(ranked) or sorted(id(r) for r in result) != given:
        raise StrategyError(
            f"strategy {name!r} must return the entries it was given, each once, reordered "
            f"(got {len(result)} entries for {len(ranked)})")


def _attr_getter(attr: str) -> Callable[[Any], Any]:
    return lambda item: getattr(item, attr, None)


def _none(_: object) -> None:
    return None


def _clean_score(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value
