"""Sample set 2: a position sweep, experiment ``sweep-2026-11``.

Each case is one in-corpus question with its decisive chunk (the first direct answer) and ten
fixed distractors from the same knowledge base, near misses first. Condition ``rank_r`` puts
the decisive chunk at retrieval rank r (1..10) among the first nine distractors; ``absent``
sends the ten distractors alone. Every condition runs under ``score_order``, ``edge`` and
``long_context_reorder`` (prompt order from midtrace.schemas.packing) for every model. The grade is
on the span: correct with probability ``UCurve.p(x)``, x = (slot - 1) / (k - 1) of the
decisive chunk's prompt slot, or ``no_evidence`` when absent.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from midtrace.schemas import packing
from midtrace.sample_traces.corpus import CHUNKS
from midtrace.sample_traces.emit import SimRequest, latency_ms
from midtrace.sample_traces.questions import QUESTIONS, Question, label_for
from midtrace.sample_traces.simulate import (
    UCurve, chunk_row, cite, classify, confidence_for, lay_out, placements_for,
    sections_for)
from midtrace.schemas.model import Outcome, RagRecord

EXPERIMENT_ID = "sweep-2026-11"
START = datetime(2026, 11, 19, 2, 0, tzinfo=UTC)
K = 10
STRATEGIES = ("score_order", "edge", "long_context_reorder")
CONDITIONS = tuple(f"rank_{r}" for r in range(1, K + 1)) + ("absent",)
PREAMBLE_TOKENS = 90
TAIL_TOKENS = 70
SECONDS_BETWEEN = 1.5


@dataclass(frozen=True)
class Case:
    id: str
    question: Question
    gold: str
    distractors: tuple[str, ...]  # K of them, in their fixed rank order


def cases(seed: int, n: int | None = None) -> list[Case]:
    """The sweep's cases: in-corpus questions, each with ten distractors fixed by the seed."""
    out: list[Case] = []
    for number, q in enumerate((q for q in QUESTIONS if q.in_corpus), start=1):
        rng = random.Random(f"{seed}:sweep:case:{q.id}")
        gold = q.direct[0]
        pool = [c for c, ch in CHUNKS.items()
                if not ch.internal and ch.mirror_of is None and c not in q.decisive]
        near = [c for c in dict.fromkeys(q.conflicts + q.background) if c in pool]
        same = [c for c in pool if CHUNKS[c].source_id == CHUNKS[gold].source_id
                and c not in near]
        picked = near + rng.sample(same, min(2, len(same)))
        picked += rng.sample([c for c in pool if c not in picked], K - len(picked))
        case_id = f"case-{number:02d}-{q.id.removeprefix('q-')}"
        out.append(Case(case_id, q, gold, tuple(picked[:K])))
    return out[:n] if n is not None else out


def _ranked(case: Case, condition: str) -> list[str]:
    if condition == "absent":
        return list(case.distractors)
    r = int(condition.removeprefix("rank_"))
    ids = list(case.distractors[:K - 1])
    ids.insert(r - 1, case.gold)
    return ids


def _request(seed: int, case: Case, strategy: str, model: str, condition: str, curve: UCurve,
             start: datetime) -> SimRequest:
    rng = random.Random(f"{seed}:sweep:{case.id}:{strategy}:{model}:{condition}")
    q = case.question
    ranked = _ranked(case, condition)
    packed = packing.pack(strategy, ranked)
    prompt_ids = list(packed.items)
    layout = lay_out([CHUNKS[c].text for c in prompt_ids], PREAMBLE_TOKENS, TAIL_TOKENS)
    if case.gold in prompt_ids:
        slot = prompt_ids.index(case.gold) + 1
        p = curve.p((slot - 1) / (len(prompt_ids) - 1))
    else:
        p = curve.no_evidence
    correct = rng.random() < p
    cited = cite(rng, prompt_ids, correct, [case.gold] if case.gold in prompt_ids else [],
                 q.wrong_source, (case.gold,), 0.0)
    chunks = tuple(
        chunk_row(CHUNKS[cid], drop_reason=None, retrieval=(r, round(0.88 - 0.025 * (r - 1), 4)),
                  rerank=None, label=label_for(q, cid), decisive=cid == case.gold,
                  cited=cid in cited)
        for r, cid in enumerate(ranked, start=1))
    output_tokens = rng.randint(40, 140)
    req = SimRequest(start=start, record=RagRecord(), retrieve_ms=round(rng.uniform(2, 6), 1),
                     llm_ms=round(300 + layout.prompt_tokens * 0.05 + output_tokens * 8, 1),
                     n_retrieved=len(ranked), output_tokens=output_tokens)
    end = start + timedelta(milliseconds=latency_ms(req))
    record = RagRecord(
        question=q.text, answer=q.correct_answer if correct else q.wrong_answer, model=model,
        template_id="sweep-v1", template_version="1", strategy=packed.strategy,
        experiment_id=EXPERIMENT_ID, condition=condition, case_id=case.id,
        confidence=confidence_for(rng, correct), cited_ids=cited,
        prompt_tokens=layout.prompt_tokens, evidence_tokens=layout.evidence_tokens,
        latency_ms=latency_ms(req), chunks=chunks, placements=placements_for(prompt_ids, layout),
        prompt_sections=sections_for(layout, PREAMBLE_TOKENS, 0, q.text),
        outcome=Outcome(correct=correct, score=1.0 if correct else 0.0,
                        decisive_chunk_ids=(case.gold,), reviewer="sweep-grader",
                        time=end + timedelta(seconds=1)))
    return SimRequest(start=start, record=record, retrieve_ms=req.retrieve_ms, llm_ms=req.llm_ms,
                      n_retrieved=req.n_retrieved, output_tokens=output_tokens,
                      taxonomy=classify(record, record.outcome),
                      tags=frozenset({strategy, model, condition, case.id}))


def build(seed: int, curves: Mapping[str, UCurve], models: Sequence[str],
          n_cases: int | None = None) -> dict[str, list[SimRequest]]:
    """Sweep requests by strategy; within a strategy, case by case, model by model."""
    out: dict[str, list[SimRequest]] = {}
    t = START
    for strategy in STRATEGIES:
        reqs: list[SimRequest] = []
        for case in cases(seed, n_cases):
            for model in models:
                for condition in CONDITIONS:
                    reqs.append(_request(seed, case, strategy, model, condition, curves[model], t))
                    t += timedelta(seconds=SECONDS_BETWEEN)
        out[strategy] = reqs
    return out
