"""Sample set 1: four weeks of a support assistant in production.

Each request: a question, retrieval of 10-20 chunks, filter and dedupe drops, a reranker,
a per-source diversity cap and a token budget, then packing (``score_order`` mostly, some
``edge``), a prompt laid out in tokens by the template, a simulated answer and, for part of
the traffic, a grade on the span and/or one that arrives later.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from midtrace.schemas import packing
from midtrace.sample_traces.corpus import CHUNKS, mirror_original
from midtrace.sample_traces.emit import SimRequest, latency_ms
from midtrace.sample_traces.questions import BY_ID, QUESTIONS, Question, label_for
from midtrace.sample_traces.simulate import (
    Answer, Template, UCurve, band, chunk_row, cite, classify, confidence_for, lay_out,
    merge_outcomes, placements_for, sections_for)
from midtrace.schemas.model import Chunk, DropReason, Outcome, RagRecord

START = datetime(2026, 10, 26, tzinfo=UTC)  # Monday of ISO week 2026-W44
WEEKS = 4
V2_SHARE_BY_WEEK = (0.0, 0.0, 0.55, 0.85)  # support-v2 rolls out in week 3
EDGE_SHARE = 0.15
MODEL_SHARES = (("gpt-4.1-mini", 0.6), ("claude-sonnet-4", 0.4))
P_MISSING = 0.07          # all decisive chunks absent from retrieval
P_RERANK_MISS = 0.06      # the reranker scores the decisive chunks as near irrelevant
P_LABELLER_DOWN = 0.05    # the chunk labeller timed out: no labels on the request
P_HISTORY = 0.25          # request carries earlier conversation turns before the evidence
DIVERSITY_CAP = 3         # chunks per source in the prompt
CONFLICT_PENALTY = 0.85   # a conflicting chunk at an edge while the decisive one is not
P_MISCITE = 0.07          # right answer, but cites a non-decisive chunk
P_DECLINE = 0.45          # out-of-corpus question answered "not in the docs"
GRADE_SHARES = (("none", 0.40), ("span", 0.35), ("late", 0.25))
PRICES = {"gpt-4.1-mini": (0.40, 1.60), "claude-sonnet-4": (3.00, 15.00)}  # USD per 1M tokens


@dataclass(frozen=True)
class Retrieval:
    retrieved: list[tuple[str, float]]      # retrieval-rank order
    reranked: list[tuple[str, float]]       # chunks that reached the reranker, in rerank order
    dropped: dict[str, DropReason]          # chunk id -> drop reason
    in_prompt: list[str]                    # rerank order


@dataclass(frozen=True)
class Forced:
    """A planted incident: fixed retrieval order, prompt size, answer and reviewer's note."""

    question: str
    start: datetime
    model: str
    template: str
    strategy: str
    retrieved: tuple[str, ...]
    k: int
    main_ok: bool
    recalled: tuple[str, ...]
    note: str
    decisive_ids: tuple[str, ...] | None = None
    tag: str = ""


def _pick(rng: random.Random, shares: Sequence[tuple[str, float]]) -> str:
    r = rng.random() * sum(w for _, w in shares)
    for name, w in shares:
        r -= w
        if r < 0:
            return name
    return shares[-1][0]


def _times(rng: random.Random, n: int) -> list[datetime]:
    """Request times over four weeks: busier on weekdays and in European/US working hours."""
    out: list[datetime] = []
    span = WEEKS * 7 * 86400
    while len(out) < n:
        t = START + timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
        weight = (1.0 if t.weekday() < 5 else 0.35) * (1.0 if 7 <= t.hour < 21 else 0.3)
        if rng.random() < weight:
            out.append(t)
    return sorted(out)


def _retrieve(rng: random.Random, q: Question, k: int, missing: bool) -> Retrieval:
    relevant = list(dict.fromkeys(q.decisive + q.conflicts + q.background))
    if missing:
        relevant = [c for c in relevant if c not in q.decisive]
    n = rng.randint(10, 20)
    others = [c for c, ch in CHUNKS.items() if c not in relevant and c not in q.decisive
              and ch.mirror_of is None]
    picked = relevant + rng.sample(others, max(0, n - len(relevant)))
    scores: dict[str, float] = {}
    for cid in picked:
        if cid in q.decisive:
            mu, sd = q.salience, 0.06
        elif cid in q.conflicts:
            mu, sd = 0.79, 0.05
        elif cid in q.background:
            mu, sd = 0.74, 0.05
        else:
            mu, sd = 0.62, 0.07
        scores[cid] = round(min(0.99, max(0.05, rng.gauss(mu, sd))), 4)
    for cid in list(scores):
        mirror = cid.replace("changelog#", "release-notes-mirror#")
        if cid.startswith("changelog#") and rng.random() < 0.6:
            scores[mirror] = round(scores[cid] - 0.0004, 4)
    # The retriever returns its top n; a mirror copy can push a weak chunk out of it.
    retrieved = sorted(scores.items(), key=lambda kv: -kv[1])[:n]
    return _after_retrieval(rng, q, retrieved, k)


def _after_retrieval(rng: random.Random, q: Question, retrieved: list[tuple[str, float]],
                     k: int, rerank_noise: float = 0.08) -> Retrieval:
    decisive_truth = 0.25 if rng.random() < P_RERANK_MISS else q.salience + 0.06
    present = {c for c, _ in retrieved}
    dropped: dict[str, DropReason] = {}
    for cid, _ in retrieved:
        ch = CHUNKS[cid]
        if ch.internal:
            dropped[cid] = "filter"
        elif mirror_original(ch) in present:
            dropped[cid] = "dedupe"
    truth = {cid: (decisive_truth if cid in q.decisive else 0.80 if cid in q.conflicts
                   else 0.70 if cid in q.background else 0.45) for cid, _ in retrieved}
    rerank = [(cid, round(min(0.999, max(0.001, 0.5 * s + 0.5 * truth[cid]
                                         + rng.gauss(0, rerank_noise))), 4))
              for cid, s in retrieved if cid not in dropped]
    rerank.sort(key=lambda kv: -kv[1])
    per_source: dict[str, int] = {}
    in_prompt: list[str] = []
    for cid, _ in rerank:
        src = CHUNKS[cid].source_id
        per_source[src] = per_source.get(src, 0) + 1
        if per_source[src] > DIVERSITY_CAP:
            dropped[cid] = "diversity"
        elif len(in_prompt) >= k:
            dropped[cid] = "budget"
        else:
            in_prompt.append(cid)
    return Retrieval(retrieved, rerank, dropped, in_prompt)


def _forced_retrieval(f: Forced, q: Question) -> Retrieval:
    """Retrieval and rerank agree on the given order; internal chunks are filtered, the
    first k of the rest reach the prompt."""
    scores = [(cid, round(0.86 - 0.021 * i, 4)) for i, cid in enumerate(f.retrieved)]
    dropped: dict[str, DropReason] = {cid: "filter" for cid in f.retrieved
                                      if CHUNKS[cid].internal}
    kept = [cid for cid in f.retrieved if cid not in dropped]
    dropped.update({cid: "budget" for cid in kept[f.k:]})
    rerank = [(cid, round(0.93 - 0.034 * i, 4)) for i, cid in enumerate(kept)]
    return Retrieval(scores, rerank, dropped, kept[:f.k])


@dataclass(frozen=True)
class Context:
    seed: int
    curves: Mapping[str, UCurve]
    templates: Mapping[str, Template]


def _simulate(rng: random.Random, q: Question, curve: UCurve, prompt_ids: Sequence[str],
              xs: Sequence[float], forced: Forced | None) -> Answer:
    x_of = dict(zip(prompt_ids, xs))
    direct_in = [c for c in prompt_ids if c in q.direct]
    if not q.in_corpus:
        main_ok = rng.random() < P_DECLINE
        recalled: tuple[str, ...] = ()
    else:
        p_main = max((curve.p(x_of[c]) for c in direct_in), default=curve.no_evidence)
        conflict_bands = {band(x_of[c]) for c in prompt_ids if c in q.conflicts}
        if direct_in and {"early", "late"} & conflict_bands and \
                all(band(x_of[c]) == "middle" for c in direct_in):
            p_main *= CONFLICT_PENALTY
        main_ok = rng.random() < p_main
        p_c = curve.p(x_of[q.constraint]) if q.constraint in x_of else 0.05
        recalled = tuple(c for c in q.constraints if rng.random() < p_c)
    if forced is not None:
        main_ok, recalled = forced.main_ok, forced.recalled
    correct = main_ok and len(recalled) == len(q.constraints)
    if correct:
        text, score = q.correct_answer, 1.0
    elif main_ok:
        text = q.partial_answer or q.wrong_answer
        score = round(0.5 + 0.5 * len(recalled) / max(1, len(q.constraints)), 2)
    else:
        text, score = q.wrong_answer, 0.0
    cited = cite(rng, prompt_ids, main_ok, direct_in, q.wrong_source, q.decisive, P_MISCITE)
    if correct and q.constraint is not None and q.constraint in prompt_ids \
            and q.constraint not in cited:
        cited = cited + (q.constraint,)
    return Answer(text, main_ok, correct, score, recalled, cited, confidence_for(rng, correct))


def _grade(rng: random.Random, q: Question, ans: Answer, labelled: bool, end: datetime,
           forced: Forced | None) -> tuple[Outcome | None, tuple[Outcome, ...]]:
    """The span's own grade (if any) and grades that arrive later, in arrival order."""
    decisive: tuple[str, ...] | None = q.decisive or None
    if q.constraint is not None and ans.main_ok and not ans.correct:
        decisive = (q.constraint,)
    full = Outcome(correct=ans.correct, score=ans.score, decisive_chunk_ids=decisive,
                   required_constraints=q.constraints or None,
                   recalled_constraints=ans.recalled if q.constraints else None)
    if forced is not None:
        late = replace(full, time=end + timedelta(days=2, hours=3), reviewer="support-qa:dana",
                       note=forced.note, decisive_chunk_ids=forced.decisive_ids or decisive)
        return None, (late,)
    kind = _pick(rng, GRADE_SHARES)
    if not labelled:
        # Only a user's thumbs down or up comes back for these: no decisive chunk is known.
        if kind == "none":
            return None, ()
        thumbs = Outcome(correct=ans.correct, time=end + timedelta(minutes=rng.randint(1, 90)),
                         reviewer="user-feedback")
        return None, (thumbs,)
    if not q.in_corpus:
        full = replace(full, decisive_chunk_ids=None)
    if kind == "none":
        return None, ()
    if kind == "late":
        late = replace(full, time=end + timedelta(hours=rng.randint(20, 140)),
                       reviewer=rng.choice(("support-qa:dana", "support-qa:omar", "grader-batch")))
        return None, (late,)
    span = replace(full, time=end + timedelta(seconds=rng.randint(2, 30)), reviewer="auto-grader")
    if q.constraints and ans.main_ok and not ans.correct and rng.random() < 0.5:
        # The lenient auto-grader passed an answer that dropped a constraint; a human
        # reviewer overturns it days later.
        span = replace(span, correct=True, score=1.0, decisive_chunk_ids=q.decisive,
                       recalled_constraints=q.constraints)
        human = replace(full, time=end + timedelta(days=rng.randint(1, 5)),
                        reviewer="support-qa:omar",
                        note="Overturned: the answer omits " + ", ".join(
                            c for c in q.constraints if c not in ans.recalled) + ".")
        return span, (human,)
    if rng.random() < 0.03:
        human = Outcome(correct=not ans.correct, score=1.0 if not ans.correct else 0.0,
                        time=end + timedelta(days=rng.randint(1, 5)), reviewer="support-qa:dana",
                        note="Regraded on review: the auto-grade was mistaken.")
        return span, (human,)
    return span, ()


def build_request(ctx: Context, i: int, start: datetime,
                  forced: Forced | None = None) -> SimRequest:
    """Simulate request ``i`` (its own PRNG stream, so requests are independent)."""
    rng = random.Random(f"{ctx.seed}:support:{i}")
    week = (start - START).days // 7
    if forced is not None:
        q = next(q for q in QUESTIONS if q.text == forced.question)
        model, template, strategy = forced.model, ctx.templates[forced.template], forced.strategy
    else:
        q = rng.choices(QUESTIONS, weights=[q.weight for q in QUESTIONS])[0]
        model = _pick(rng, MODEL_SHARES)
        v2 = rng.random() < V2_SHARE_BY_WEEK[min(week, WEEKS - 1)]
        template = ctx.templates["support-v2" if v2 else "support-v1"]
        strategy = "edge" if rng.random() < EDGE_SHARE else "score_order"
    labelled = forced is not None or rng.random() >= P_LABELLER_DOWN
    history = rng.randint(200, 2500) if rng.random() < P_HISTORY and forced is None else 0
    k = forced.k if forced else rng.randint(template.min_chunks, template.max_chunks)
    missing = forced is None and q.in_corpus and rng.random() < P_MISSING
    ret = _forced_retrieval(forced, q) if forced else _retrieve(rng, q, k, missing)

    packed = packing.pack(strategy, ret.in_prompt)
    prompt_ids = list(packed.items)
    layout = lay_out([CHUNKS[c].text for c in prompt_ids],
                     template.preamble_tokens + history, template.tail_tokens)
    xs = [layout.x(j) for j in range(len(prompt_ids))]
    ans = _simulate(rng, q, ctx.curves[model], prompt_ids, xs, forced)

    rerank_rank = {cid: (r, s) for r, (cid, s) in enumerate(ret.reranked, start=1)}
    chunks: list[Chunk] = []
    for r, (cid, score) in enumerate(ret.retrieved, start=1):
        chunks.append(chunk_row(
            CHUNKS[cid], drop_reason=ret.dropped.get(cid), retrieval=(r, score),
            rerank=rerank_rank.get(cid), label=label_for(q, cid) if labelled else None,
            decisive=None, cited=cid in ans.cited))

    output_tokens = rng.randint(60, 220)
    retrieve_ms = round(rng.uniform(35, 140), 1)
    per_token_ms = 9 * rng.uniform(0.8, 1.3)
    llm_ms = round(350 + layout.prompt_tokens * 0.06 + output_tokens * per_token_ms, 1)
    p_in, p_out = PRICES[model]
    record = RagRecord(
        question=q.text, answer=ans.text, model=model, template_id=template.id,
        template_version=template.version, strategy=packed.strategy, confidence=ans.confidence,
        answer_constraints=ans.recalled if q.constraints else None, cited_ids=ans.cited,
        unresolved_conflicts=_conflicts_noted(rng, q, prompt_ids),
        prompt_tokens=layout.prompt_tokens, evidence_tokens=layout.evidence_tokens,
        cost_usd=round((layout.prompt_tokens * p_in + output_tokens * p_out) / 1e6, 6),
        verifier_result=_verifier(rng, q, ans),
        chunks=tuple(chunks), placements=placements_for(prompt_ids, layout),
        prompt_sections=sections_for(layout, template.preamble_tokens, history, q.text))
    req = SimRequest(start=start, record=record, retrieve_ms=retrieve_ms, llm_ms=llm_ms,
                     n_retrieved=len(ret.retrieved), output_tokens=output_tokens)
    end = start + timedelta(milliseconds=latency_ms(req))
    record = replace(record, latency_ms=latency_ms(req))
    span_outcome, late = _grade(rng, q, ans, labelled, end, forced)
    record = replace(record, outcome=span_outcome)
    merged = merge_outcomes(([span_outcome] if span_outcome else []) + list(late))
    tags = {f"week{week + 1}", q.id}
    if forced is not None:
        tags.add(forced.tag)
    return replace(req, record=record, late=late, taxonomy=classify(record, merged),
                   tags=frozenset(tags))


def _conflicts_noted(rng: random.Random, q: Question,
                     prompt_ids: Sequence[str]) -> tuple[str, ...] | None:
    seen = [c for c in prompt_ids if c in q.conflicts]
    if seen and rng.random() < 0.2:
        return tuple(f"{c} disagrees with the other sources" for c in seen)
    return None


def _verifier(rng: random.Random, q: Question, ans: Answer) -> str | None:
    if not q.constraints or rng.random() < 0.5:
        return None
    missing = [c for c in q.constraints if c not in ans.recalled]
    return "pass" if not missing else "fail: missing " + "; ".join(missing)


def incidents() -> list[Forced]:
    """The planted incidents from the reference articles, each findable by its question."""
    return [
        Forced(question=BY_ID["q-refund-annual"].text,
               start=datetime(2026, 11, 10, 14, 32, 7, 250000, tzinfo=UTC),
               model="gpt-4.1-mini", template="support-v1", strategy="score_order",
               retrieved=("billing-faq#3", "hub-warranty#1", "plans#0", "refund-policy#0",
                          "billing-faq#1", "refund-policy#4", "refund-policy#2", "plans#1",
                          "legacy-pricing#1", "security-policy#1", "support-runbook#1",
                          "refund-policy#3"),
               k=10, main_ok=False, recalled=(),
               note="Bot said 30 days (hub warranty paragraph, slot 2); the refund policy "
                    "says 14 days and sat at slot 7 of 10.", tag="incident:refund"),
        Forced(question=BY_ID["q-audit-export"].text,
               start=datetime(2026, 11, 12, 9, 5, 41, 30000, tzinfo=UTC),
               model="claude-sonnet-4", template="support-v2", strategy="score_order",
               retrieved=("admin-api#3", "changelog#1", "plans#3", "migration-v1#1", "admin-api#0",
                          "security-policy#2", "admin-api#4", "api-keys#2", "plans#2",
                          "data-export#0", "sso-guide#1"),
               k=10, main_ok=True, recalled=(),
               note="Answer says yes for all enterprise customers; omits Enterprise Plus and "
                    "the AuditExport flag (admin API docs, slot 7).",
               decisive_ids=("admin-api#4",), tag="incident:audit"),
        Forced(question=BY_ID["q-rate-limit"].text,
               start=datetime(2026, 11, 17, 16, 48, 2, 500000, tzinfo=UTC),
               model="gpt-4.1-mini", template="support-v2", strategy="score_order",
               retrieved=("migration-v1#0", "changelog#0", "admin-api#7", "admin-api#0",
                          "admin-api#1", "plans#0", "admin-api#2", "api-keys#0", "plans#3",
                          "security-policy#4", "billing-faq#0"),
               k=9, main_ok=False, recalled=(),
               note="Cited the 2024 v1 migration note (deprecated): 100/min. The canonical "
                    "Admin API reference says 600/min per workspace.", tag="incident:deprecated"),
    ]


def build(ctx: Context, n: int) -> list[SimRequest]:
    """``n`` requests over four weeks plus the planted incidents, in time order."""
    rng = random.Random(f"{ctx.seed}:support:times")
    planned: list[tuple[datetime, Forced | None]] = [(t, None) for t in _times(rng, n)]
    planned += [(f.start, f) for f in incidents()]
    planned.sort(key=lambda p: p[0])
    return [build_request(ctx, i, t, f) for i, (t, f) in enumerate(planned)]
