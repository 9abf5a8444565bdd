"""Placement conditions: where the decisive evidence sits in the retrieval order.

Every case keeps its distractors in their file order (the retriever's order). A condition
inserts the decisive chunk(s) at chosen retrieval ranks among them; a packing strategy
(midtrace.schemas.packing) then turns that rank order into the prompt order. With ``score_order``
rank r is prompt slot r, the classic position sweep.

Single-piece cases (one decisive chunk), k chunks in the prompt:
  ``rank_<r>``   the decisive chunk at rank r (``--ranks``: ``all`` = 1..k,
                 ``edges+middle`` = 1, ceil(k/2), k, or a list such as ``1,5,10``; ranks
                 above k are skipped for that case).
Multi-piece cases (m >= 2 decisive chunks, in file order):
  ``adjacent``   consecutive ranks in the middle, starting at ceil((k-m)/2) + 1
                 (k=10, m=2: ranks 5 and 6).
  ``both_edges`` the first ceil(m/2) pieces at the front, the rest at the back
                 (m=2: ranks 1 and k).
  ``separated``  piece i at round(i*(k+1)/(m+1)), i = 1..m: distractors before, between
                 and after every piece (k=10, m=2: ranks 4 and 7); skipped when k < 2m+1.
Any case, with ``--absent``:
  ``absent``     the distractors alone (closed book): does the model invent an answer?
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from midtrace.schemas import packing
from midtrace.sweep.cases import Case, CaseChunk

RankMode = Literal["all", "edges+middle", "list"]
MULTI_PIECE = ("adjacent", "both_edges", "separated")
ABSENT = "absent"


class ConditionError(ValueError):
    """A --ranks or --strategies value cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class RankSpec:
    mode: RankMode
    ranks: tuple[int, ...] = ()

    def for_k(self, k: int) -> list[int]:
        if self.mode == "all":
            return list(range(1, k + 1))
        if self.mode == "edges+middle":
            return sorted({1, math.ceil(k / 2), k})
        return [r for r in self.ranks if r <= k]

    def __str__(self) -> str:
        return ",".join(map(str, self.ranks)) if self.mode == "list" else self.mode


def parse_ranks(spec: str) -> RankSpec:
    text = spec.strip().lower().replace(" ", "")
    if text in ("all", "edges+middle"):
        return RankSpec(text)  # type: ignore[arg-type]
    try:
        ranks = sorted({int(x) for x in text.split(",") if x})
    except ValueError:
        ranks = []
    if not ranks or ranks[0] < 1:
        raise ConditionError(f"--ranks {spec!r}: use all, edges+middle, or 1-based ranks such "
                             "as 1,5,10")
    return RankSpec("list", tuple(ranks))


def parse_strategies(spec: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(s.strip() for s in spec.split(",") if s.strip()))
    if not names:
        raise ConditionError("--strategies needs at least one strategy name")
    for name in names:
        try:
            packing.get(name)
        except packing.UnknownStrategyError as e:
            raise ConditionError(str(e)) from e
    return names


@dataclass(frozen=True)
class Condition:
    """A named placement: the retrieval ranks of the decisive chunks, in file order."""

    name: str
    ranks: tuple[int, ...]


def conditions_for(case: Case, spec: RankSpec, absent: bool) -> tuple[list[Condition], list[str]]:
    """The case's conditions, and a note for each one it cannot have."""
    k, m = case.k, len(case.decisive)
    out: list[Condition] = []
    notes: list[str] = []
    if m == 1:
        out += [Condition(f"rank_{r}", (r,)) for r in spec.for_k(k)]
        if spec.mode == "list":
            notes += [f"case {case.id!r}: rank_{r} skipped, the case has only {k} chunks"
                      for r in spec.ranks if r > k]
    else:
        start = math.ceil((k - m) / 2) + 1
        out.append(Condition("adjacent", tuple(range(start, start + m))))
        front = math.ceil(m / 2)
        out.append(Condition("both_edges", tuple(range(1, front + 1))
                             + tuple(range(k - (m - front) + 1, k + 1))))
        if k >= 2 * m + 1:
            out.append(Condition("separated", tuple(
                math.floor(i * (k + 1) / (m + 1) + 0.5) for i in range(1, m + 1))))
        else:
            notes.append(f"case {case.id!r}: separated skipped, it needs at least {m + 1} "
                         f"distractors to put one before, between and after the pieces")
    if absent:
        out.append(Condition(ABSENT, ()))
    return out, notes


def retrieval_order(case: Case, condition: Condition) -> list[CaseChunk]:
    """The case's chunks in retrieval-rank order under ``condition`` (rank 1 first)."""
    if not condition.ranks:
        return list(case.distractors)
    at = dict(zip(condition.ranks, case.decisive))
    k = case.k
    distractors = iter(case.distractors)
    return [at[r] if r in at else next(distractors) for r in range(1, k + 1)]


@dataclass(frozen=True)
class Placed:
    """A chunk in prompt order with its retrieval rank."""

    chunk: CaseChunk
    rank: int


def prompt_order(strategy: str, ranked: Sequence[CaseChunk]) -> list[Placed]:
    packed = packing.pack(strategy, list(ranked), source=lambda c: c.source,
                          source_position=lambda c: c.source_position)
    return [Placed(c, r) for c, r in zip(packed.items, packed.ranks)]
