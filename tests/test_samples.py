"""The committed sample traces: reproducible, fresh, readable by the contract, and as planted.

Facts are checked at the decoded level: files are read with midtrace.collector.intake.otlp and decoded with
midtrace.schemas.decode, late outcomes are merged by the contract's rule, and the failure taxonomy
is recomputed here from docs/architecture.md's definitions, independently of the generator.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from midtrace.schemas import packing
from midtrace.sample_traces import generate
from midtrace.sample_traces.questions import AUDIT_EXPORT, RATE_LIMIT, REFUND_ANNUAL
from midtrace.schemas.decode import decode_trace
from midtrace.schemas.model import RagRequest
from midtrace.collector.intake.otlp import SpanRecord, iter_json_lines, spans_of

SAMPLES = Path(generate.__file__).resolve().parent
SAMPLE_GLOBS = ("*.jsonl.gz", "*.json")
CLASSES = ("answered", "missing", "dropped", "buried", "unused", "unlabeled", "ungraded")
WEEK3 = datetime(2026, 11, 9, tzinfo=UTC)


@dataclass(frozen=True)
class FileRead:
    name: str
    requests: tuple[RagRequest, ...]
    spans_per_trace: tuple[tuple[str, ...], ...]
    resources: tuple[tuple[tuple[str, Any], ...], ...]
    traces_per_line: tuple[int, ...]
    llm_span_has_attrs: bool


def read_file(path: Path) -> FileRead:
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    traces: dict[str, list[SpanRecord]] = defaultdict(list)
    per_line: list[int] = []
    resources: set[tuple[tuple[str, Any], ...]] = set()
    for _, request in iter_json_lines(text):
        line_traces: set[str] = set()
        for span, error in spans_of(request):
            assert error is None, error
            assert span is not None
            traces[span.trace_id].append(span)
            line_traces.add(span.trace_id)
            resources.add(tuple(sorted(span.resource.items())))
        per_line.append(len(line_traces))
    decoded = []
    names = []
    llm_ok = True
    for trace_id, spans in traces.items():
        req = decode_trace(spans)
        assert req is not None, f"{path.name}: trace {trace_id} has no midtrace attributes"
        decoded.append(req)
        names.append(tuple(sorted(s.name for s in spans)))
        llm = [s for s in spans if s.name == "llm.chat"]
        llm_ok &= len(llm) == 1 and "midtrace.request.question" in llm[0].attributes
    return FileRead(path.name, tuple(decoded), tuple(names), tuple(sorted(resources)),
                    tuple(per_line), llm_ok)


@pytest.fixture(scope="module")
def files() -> dict[str, FileRead]:
    paths = sorted(SAMPLES.glob("*.jsonl.gz"))
    assert paths, "no committed sample files"
    with ProcessPoolExecutor(max_workers=2) as pool:
        return {r.name: r for r in pool.map(read_file, paths)}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return json.loads((SAMPLES / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def support(files: dict[str, FileRead]) -> list[RagRequest]:
    return [r for name, f in sorted(files.items()) if name.startswith("support_")
            for r in f.requests]


@pytest.fixture(scope="module")
def sweep(files: dict[str, FileRead]) -> list[RagRequest]:
    return [r for name, f in sorted(files.items()) if name.startswith("sweep_")
            for r in f.requests]


@pytest.fixture(scope="module")
def late() -> list[dict[str, Any]]:
    body = json.loads((SAMPLES / "support_outcomes.json").read_text(encoding="utf-8"))
    return list(body["outcomes"])


# --- reproducibility -----------------------------------------------------------------------

def _sample_files(directory: Path) -> dict[str, Path]:
    return {p.name: p for glob in SAMPLE_GLOBS for p in directory.glob(glob)}


def test_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate.generate(a, seed=11, requests=150, sweep_cases=2, jobs=2)
    generate.generate(b, seed=11, requests=150, sweep_cases=2, jobs=1)
    generate.generate(c, seed=12, requests=150, sweep_cases=2, jobs=1)
    fa, fb, fc = _sample_files(a), _sample_files(b), _sample_files(c)
    assert sorted(fa) == sorted(fb) == sorted(fc)
    assert len(fa) == 9
    for name in fa:
        assert fa[name].read_bytes() == fb[name].read_bytes(), name
    assert fa["support_2026-10-26.jsonl.gz"].read_bytes() != \
        fc["support_2026-10-26.jsonl.gz"].read_bytes()


def _content(path: Path) -> bytes:
    data = path.read_bytes()
    # Compare what was compressed: another zlib build may compress the same text differently.
    return gzip.decompress(data) if path.suffix == ".gz" else data


def test_committed_files_equal_a_fresh_generation(tmp_path: Path) -> None:
    generate.generate(tmp_path, jobs=2)
    fresh, committed = _sample_files(tmp_path), _sample_files(SAMPLES)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if _content(fresh[name]) != _content(committed[name])]
    assert not stale, (f"stale sample files {stale}: run "
                       "`.venv/bin/python sample_traces/generate.py` and commit the result")


def test_files_are_small() -> None:
    total = sum(p.stat().st_size for p in _sample_files(SAMPLES).values())
    assert total < 6 * 1024 * 1024


# --- readable through the contract ---------------------------------------------------------

def test_every_file_parses_and_every_trace_decodes(files: dict[str, FileRead],
                                                   manifest: dict[str, Any]) -> None:
    counts = {**manifest["support"]["files"], **manifest["sweep"]["files"]}
    assert sorted(files) == sorted(counts)
    for name, f in files.items():
        assert len(f.requests) == counts[name]
        assert set(f.spans_per_trace) == {("llm.chat", "rag.request", "retrieve")}
        assert f.llm_span_has_attrs
        service = "support-assistant" if name.startswith("support_") else "support-assistant-sweep"
        assert f.resources == ((("midtrace.sample", "synthetic"), ("service.name", service)),)
        assert all(n <= 50 for n in f.traces_per_line) and f.traces_per_line[0] == 50
        assert all(r.service == service and not r.tokens_estimated for r in f.requests)


def test_everything_says_it_is_synthetic(manifest: dict[str, Any]) -> None:
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in readme.lower()
    for name in _sample_files(SAMPLES):
        if name != "manifest.json":
            prefix = name.split("2026")[0] if name.startswith("support_2026") else name
            assert prefix in readme, f"README.md does not describe {name}"
    assert "SYNTHETIC" in (generate.__doc__ or "")
    assert manifest["synthetic"] is True


# --- the failure taxonomy, recomputed from docs/architecture.md ---------------------------------------

def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def merged_outcome(req: RagRequest, late: list[dict[str, Any]]) -> dict[str, Any]:
    """Field by field; posted outcomes override span attributes; newest by time, then order."""
    fields = ("correct", "score", "decisive_chunk_ids", "required_constraints",
              "recalled_constraints", "reviewer", "note")
    merged: dict[str, Any] = {}
    if req.record.outcome is not None:
        merged = {k: getattr(req.record.outcome, k) for k in fields
                  if getattr(req.record.outcome, k) is not None}
    posted = sorted(enumerate(late), key=lambda io: (_parse_time(io[1].get("time")) or
                                                     datetime.min.replace(tzinfo=UTC), io[0]))
    for _, o in posted:
        merged.update({k: (tuple(v) if isinstance(v, list) else v)
                       for k, v in o.items() if k in fields and v is not None})
    return merged


def taxonomy(req: RagRequest, outcome: dict[str, Any]) -> str:
    rec = req.record
    if outcome.get("correct") is None:
        return "ungraded"
    if outcome["correct"]:
        return "answered"
    decisive = set(outcome.get("decisive_chunk_ids") or ())
    if not decisive:
        decisive = {c.id for c in rec.chunks if c.decisive}
    if not decisive:
        decisive = {c.id for c in rec.chunks
                    if c.label in ("direct_answer", "exception_constraint")}
    if not decisive:
        return "unlabeled"
    if not any(c.id in decisive for c in rec.chunks):
        return "missing"
    placed = [p for p in rec.placements if p.chunk_id in decisive]
    if not placed:
        return "dropped"
    assert rec.prompt_tokens
    xs = [((p.token_start or 0) + (p.token_end or 0)) / 2 / rec.prompt_tokens for p in placed]
    return "buried" if all(1 / 3 <= x < 2 / 3 for x in xs) else "unused"


@pytest.fixture(scope="module")
def support_classes(support: list[RagRequest], late: list[dict[str, Any]]) -> dict[str, str]:
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in late:
        by_trace[o["trace_id"]].append(o)
    return {r.trace_id: taxonomy(r, merged_outcome(r, by_trace[r.trace_id])) for r in support}


def test_every_taxonomy_class_is_planted(support_classes: dict[str, str],
                                         manifest: dict[str, Any]) -> None:
    counts = Counter(support_classes.values())
    for cls in CLASSES:
        assert counts[cls] >= 20, (cls, counts)
    assert dict(counts) == {k: v for k, v in manifest["support"]["taxonomy"].items() if v}
    graded = 1 - counts["ungraded"] / sum(counts.values())
    assert 0.5 < graded < 0.7


def test_late_outcomes_are_valid_and_some_supersede(support: list[RagRequest],
                                                    late: list[dict[str, Any]]) -> None:
    allowed = {"trace_id", "time", "correct", "score", "decisive_chunk_ids",
               "required_constraints", "recalled_constraints", "reviewer", "note"}
    by_id = {r.trace_id: r for r in support}
    for o in late:
        assert set(o) <= allowed
        assert len(o["trace_id"]) == 32 and int(o["trace_id"], 16)
        assert o["trace_id"] in by_id
        assert _parse_time(o["time"]) is not None
    span_grade = {r.trace_id: r.record.outcome.correct for r in support
                  if r.record.outcome is not None}
    overturned = [o for o in late if o["trace_id"] in span_grade
                  and span_grade[o["trace_id"]] != o["correct"]]
    assert len(overturned) >= 10
    on_span = sum(1 for r in support if r.record.outcome is not None)
    assert on_span > 500 and len(late) > 500


# --- the planted incidents -----------------------------------------------------------------

def test_refund_incident(support: list[RagRequest], support_classes: dict[str, str],
                         late: list[dict[str, Any]]) -> None:
    cases = [r for r in support if r.record.question == REFUND_ANNUAL]
    assert len(cases) > 100
    incident = next(r for r in cases if any(
        o["trace_id"] == r.trace_id and "14 days" in (o.get("note") or "") for o in late))
    rec = incident.record
    assert "30 days" in (rec.answer or "")
    assert rec.cited_ids == ("hub-warranty#1",)
    order = [p.chunk_id for p in rec.placements]
    assert len(order) == 10 and order.index("refund-policy#2") == 6
    assert order.index("hub-warranty#1") == 1
    assert support_classes[incident.trace_id] == "buried"


def test_audit_export_incident(support: list[RagRequest], support_classes: dict[str, str],
                               late: list[dict[str, Any]]) -> None:
    merged = {r.trace_id: merged_outcome(r, [o for o in late if o["trace_id"] == r.trace_id])
              for r in support if r.record.question == AUDIT_EXPORT}
    omitted = [tid for tid, o in merged.items() if o.get("correct") is False
               and o.get("required_constraints") == ("Enterprise Plus only",
                                                     "AuditExport feature flag")
               and o.get("recalled_constraints") == ()]
    assert omitted
    buried = [tid for tid in omitted if support_classes[tid] == "buried"]
    assert buried
    by_id = {r.trace_id: r for r in support}
    assert any("Enterprise Plus" not in (by_id[t].record.answer or "Enterprise Plus")
               and by_id[t].record.template_id == "support-v2" for t in buried)


def test_deprecated_source_cited_over_canonical(support: list[RagRequest],
                                                support_classes: dict[str, str]) -> None:
    hits = []
    for r in support:
        rec = r.record
        if rec.question != RATE_LIMIT or not rec.cited_ids:
            continue
        authority = {c.id: c.authority for c in rec.chunks}
        placed = {p.chunk_id for p in rec.placements}
        if any(authority.get(c) == "deprecated" for c in rec.cited_ids) and "admin-api#1" in placed:
            hits.append(r)
    assert len(hits) >= 3
    assert any(support_classes[r.trace_id] in ("buried", "unused") for r in hits)


# --- traffic shape -------------------------------------------------------------------------

def test_template_v2_only_from_week_3(support: list[RagRequest]) -> None:
    by_week: dict[int, Counter[str]] = defaultdict(Counter)
    for r in support:
        by_week[r.time.isocalendar().week][r.record.template_id or ""] += 1
        if r.record.template_id == "support-v2":
            assert r.time >= WEEK3
    assert sorted(by_week) == [44, 45, 46, 47]
    assert by_week[44]["support-v2"] == by_week[45]["support-v2"] == 0
    assert by_week[46]["support-v2"] > 100 and by_week[47]["support-v2"] > by_week[46]["support-v2"]


def test_buried_share_rises_with_v2(support_classes: dict[str, str],
                                    support: list[RagRequest]) -> None:
    def rate(weeks: set[int]) -> float:
        classes = [support_classes[r.trace_id] for r in support
                   if r.time.isocalendar().week in weeks]
        wrong = [c for c in classes if c not in ("answered", "ungraded")]
        return sum(c == "buried" for c in wrong) / len(wrong)

    assert rate({46, 47}) > rate({44, 45}) + 0.05


def test_support_requests_have_the_promised_shape(support: list[RagRequest]) -> None:
    reasons: Counter[str] = Counter()
    for r in support:
        rec = r.record
        assert 10 <= len(rec.chunks) <= 20
        assert 6 <= len(rec.placements) <= 10
        assert rec.strategy in ("score_order", "edge")
        assert rec.model in ("gpt-4.1-mini", "claude-sonnet-4")
        reasons.update(c.drop_reason or "" for c in rec.chunks if c.stage == "dropped")
        ends = [(p.token_start or 0, p.token_end or 0) for p in rec.placements]
        assert all(s < e for s, e in ends)
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(ends, ends[1:]))
        assert rec.prompt_tokens and ends[-1][1] < rec.prompt_tokens
        assert all(150 <= len(c.text or "") <= 400 for c in rec.chunks)
        by_rerank = sorted((c for c in rec.chunks if c.stage == "in_prompt"),
                           key=lambda c: c.rerank_rank or 0)
        want = packing.pack(rec.strategy or "", [c.id for c in by_rerank]).items
        assert tuple(p.chunk_id for p in rec.placements) == want
    assert set(reasons) == {"budget", "dedupe", "filter", "diversity"}
    assert Counter(r.record.strategy for r in support)["edge"] > 200


# --- the sweep -----------------------------------------------------------------------------

def test_sweep_conditions_complete(sweep: list[RagRequest], manifest: dict[str, Any]) -> None:
    conditions = {f"rank_{r}" for r in range(1, 11)} | {"absent"}
    seen: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for r in sweep:
        rec = r.record
        assert rec.experiment_id == "sweep-2026-11"
        key = (rec.case_id or "", rec.strategy or "", rec.model or "")
        assert rec.condition not in seen[key], f"duplicate {rec.condition} for {key}"
        seen[key].add(rec.condition or "")
    cases = {k[0] for k in seen}
    assert len(cases) == manifest["sweep"]["cases"] >= 25
    for case in cases:
        for strategy in ("score_order", "edge", "long_context_reorder"):
            for model in ("gpt-4.1-mini", "claude-sonnet-4"):
                assert seen[(case, strategy, model)] == conditions


def test_sweep_places_the_decisive_chunk_as_its_condition_says(sweep: list[RagRequest]) -> None:
    for r in sweep:
        rec = r.record
        gold = [c for c in rec.chunks if c.decisive]
        assert rec.outcome is not None and rec.outcome.correct is not None
        if rec.condition == "absent":
            assert not gold and len(rec.chunks) == 10
            continue
        assert len(gold) == 1 and f"rank_{gold[0].retrieval_rank}" == rec.condition
        assert rec.outcome.decisive_chunk_ids == (gold[0].id,)
        rank_of = {c.id: c.retrieval_rank for c in rec.chunks}
        ranks = tuple(rank_of[p.chunk_id] for p in rec.placements)
        assert ranks == packing.prompt_ranks(rec.strategy or "", 10)


def test_sweep_shows_the_u_curve(sweep: list[RagRequest]) -> None:
    by_slot: dict[int, list[bool]] = defaultdict(list)
    for r in sweep:
        gold = [p.prompt_index for p in r.record.placements
                if any(c.id == p.chunk_id and c.decisive for c in r.record.chunks)]
        if gold and r.record.outcome is not None:
            by_slot[gold[0] + 1].append(bool(r.record.outcome.correct))

    def acc(slots: range | tuple[int, ...]) -> float:
        values = [v for s in slots for v in by_slot[s]]
        return sum(values) / len(values)

    assert acc((1,)) > acc(range(4, 8)) + 0.15
    assert acc((10,)) > acc(range(4, 8)) + 0.15
