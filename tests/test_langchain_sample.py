"""sample_traces/langchain_rag.jsonl: recorded by its script, read back with positions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from midtrace.collector.normalize.openinference import normalize_openinference
from midtrace.sample_traces.langchain_rag_app import DOCUMENTS, KeywordRetriever, long_context_reorder
from midtrace.sample_traces.record_langchain import CASES, OUT, SERVICE, record
from midtrace.schemas.chunk_hash import content_hash
from midtrace.schemas.model import RagRecord, RagRequest
from midtrace.collector.intake.otlp import SpanRecord, iter_json_lines, spans_of

TITLE = {content_hash(d.page_content): d.metadata["title"] for d in DOCUMENTS}


def requests_in(path: Path) -> list[RagRequest]:
    traces: dict[str, list[SpanRecord]] = defaultdict(list)
    for _, export in iter_json_lines(path.read_text()):
        for span, error in spans_of(export):
            assert span is not None, error
            traces[span.trace_id].append(span)
    out = [normalize_openinference(spans) for spans in traces.values()]
    assert all(r is not None for r in out)
    return sorted((r for r in out if r is not None), key=lambda r: r.time)


@pytest.fixture(scope="module")
def sample() -> list[RagRequest]:
    return requests_in(OUT)


def ranks_in_prompt(record: RagRecord) -> list[int]:
    rank = {c.id: c.retrieval_rank or 0 for c in record.chunks}
    return [rank[p.chunk_id] for p in record.placements]


def test_every_case_is_one_request(sample: Sequence[RagRequest]) -> None:
    assert [r.record.question for r in sample] == [c.question for c in CASES]
    assert {(r.convention, r.service, r.tokens_estimated) for r in sample} == {
        ("openinference", SERVICE, True)}
    assert all(r.warnings == () for r in sample)


def test_top_k_cuts_and_reorders_show_in_the_prompt_order(sample: Sequence[RagRequest]) -> None:
    for case, request in zip(CASES, sample):
        kept = list(range(1, (case.top_k or 6) + 1))
        expected = long_context_reorder(kept) if case.reorder else kept
        assert ranks_in_prompt(request.record) == expected, case.question
        stages = [c.stage for c in sorted(request.record.chunks,
                                          key=lambda c: c.retrieval_rank or 0)]
        assert stages == ["in_prompt"] * len(kept) + ["dropped"] * (6 - len(kept))
    assert sum(1 for c in CASES if c.reorder) >= 5 and sum(1 for c in CASES if c.top_k) >= 5


def test_the_cited_chunk_is_the_policy_the_answer_cites(sample: Sequence[RagRequest]) -> None:
    for case, request in zip(CASES, sample):
        retrieved = {d.metadata["title"] for d in KeywordRetriever(k=6).invoke(case.question)}
        assert case.evidence in retrieved, case.question
        (cited,) = request.record.cited_ids or ()
        assert TITLE[cited] == case.cited_title, case.question


def comparable(request: RagRequest) -> RagRequest:
    return replace(request, trace_id="", time=request.time.replace(year=2000, month=1, day=1,
                                                                   hour=0, minute=0, second=0,
                                                                   microsecond=0),
                   record=replace(request.record, latency_ms=None))


def test_the_script_records_the_same_requests_again(tmp_path: Path,
                                                    sample: Sequence[RagRequest]) -> None:
    assert record(tmp_path / "again.jsonl") == len(CASES)
    again = requests_in(tmp_path / "again.jsonl")
    assert [comparable(r) for r in again] == [comparable(r) for r in sample]
