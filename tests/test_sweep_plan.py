"""The sweep's pure stages: reading cases, placing evidence, rendering prompts, grading."""

from __future__ import annotations

import json

import pytest

from midtrace.sweep.cases import Case, CaseChunk, parse_lines
from midtrace.sweep.conditions import (ConditionError, conditions_for, parse_ranks,
                                       parse_strategies, prompt_order, retrieval_order)
from midtrace.sweep.grading import (best_subspan_match, cited_documents, grade, normalize,
                                    recalled_constraints)
from midtrace.sweep.prompt import Doc, Template, TemplateError, render


def make_case(n_distractors: int = 9, n_decisive: int = 1, case_id: str = "c") -> Case:
    return Case(
        id=case_id, question="q?", answers=("a",),
        decisive=tuple(CaseChunk(f"g{i}", f"gold {i}", "decisive", "direct_answer")
                       for i in range(n_decisive)),
        distractors=tuple(CaseChunk(f"d{i}", f"distractor {i}", "distractor", "irrelevant")
                          for i in range(n_distractors)))


GOOD = {"id": "refund", "question": "How long?", "answers": ["14 days"],
        "decisive": [{"id": "p3", "text": "Refunds within 14 days.", "source": "policy"}],
        "distractors": [{"id": "f9", "text": "Shipping takes 30 days."}],
        "constraints": ["receipt"], "metadata": {"team": "billing"}}


def test_cases_file_reports_bad_lines_by_number_and_keeps_the_rest() -> None:
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({**GOOD, "id": "no-answers", "answers": []}),
        "",
        json.dumps({**GOOD, "id": "refund"}),
        json.dumps({**GOOD, "id": "bad-label", "decisive": [{"id": "x", "text": "t", "label": "irrelevant"}]}),
        json.dumps({**GOOD, "id": "typo", "distractor": []}),
        json.dumps({**GOOD, "id": "dupe-chunk", "distractors": [{"id": "p3", "text": "again"}]}),
        json.dumps({**GOOD, "id": "ok2", "distractors": [{"id": "f1", "text": "t", "label": "supporting_background"}]}),
    ]
    result = parse_lines(line + "\n" for line in lines)
    assert [c.id for c in result.cases] == ["refund", "ok2"]
    bad = {b.line: b.reason for b in result.bad}
    assert sorted(bad) == [2, 3, 5, 6, 7, 8]
    assert "not JSON" in bad[2]
    assert "answers must be a non-empty list" in bad[3]
    assert "already used on line 1" in bad[5]
    assert "label 'irrelevant'" in bad[6]
    assert "unknown field(s) distractor" in bad[7]
    assert "used twice" in bad[8]
    case = result.cases[0]
    assert case.constraints == ("receipt",) and case.metadata == {"team": "billing"}
    assert case.decisive[0].label == "direct_answer" and case.decisive[0].source == "policy"
    assert case.distractors[0].label == "irrelevant"
    assert result.cases[1].distractors[0].label == "supporting_background"


@pytest.mark.parametrize("spec,k,expected", [
    ("all", 4, [1, 2, 3, 4]),
    ("edges+middle", 10, [1, 5, 10]),
    ("edges+middle", 5, [1, 3, 5]),
    ("edges+middle", 1, [1]),
    ("1,5,10", 6, [1, 5]),
    ("10, 1,5,5", 20, [1, 5, 10]),
])
def test_rank_specs(spec: str, k: int, expected: list[int]) -> None:
    assert parse_ranks(spec).for_k(k) == expected


@pytest.mark.parametrize("spec", ["", "0,1", "middle", "1,x"])
def test_bad_rank_specs_say_how_to_fix(spec: str) -> None:
    with pytest.raises(ConditionError, match="edges\\+middle"):
        parse_ranks(spec)


def test_unknown_strategy_lists_known_ones() -> None:
    assert parse_strategies("edge, score_order,edge") == ("edge", "score_order")
    with pytest.raises(ConditionError, match="known strategies: score_order"):
        parse_strategies("edges")


def test_single_piece_conditions_put_the_decisive_chunk_at_each_rank() -> None:
    case = make_case(n_distractors=4)
    conditions, notes = conditions_for(case, parse_ranks("1,3,7"), absent=True)
    assert [c.name for c in conditions] == ["rank_1", "rank_3", "absent"]
    assert notes == ["case 'c': rank_7 skipped, the case has only 5 chunks"]
    order = retrieval_order(case, conditions[1])
    assert [c.id for c in order] == ["d0", "d1", "g0", "d2", "d3"]
    assert [c.id for c in retrieval_order(case, conditions[2])] == ["d0", "d1", "d2", "d3"]


@pytest.mark.parametrize("k,adjacent,both_edges,separated", [
    (10, (5, 6), (1, 10), (4, 7)),
    (5, (3, 4), (1, 5), (2, 4)),
    (6, (3, 4), (1, 6), (2, 5)),
    (4, (2, 3), (1, 4), None),
])
def test_multi_piece_conditions(k: int, adjacent: tuple[int, ...], both_edges: tuple[int, ...],
                                separated: tuple[int, ...] | None) -> None:
    case = make_case(n_distractors=k - 2, n_decisive=2)
    conditions, notes = conditions_for(case, parse_ranks("all"), absent=False)
    by_name = {c.name: c.ranks for c in conditions}
    assert by_name["adjacent"] == adjacent
    assert by_name["both_edges"] == both_edges
    assert by_name.get("separated") == separated
    assert "rank_1" not in by_name
    assert bool(notes) == (separated is None)
    for c in conditions:
        order = [ch.id for ch in retrieval_order(case, c)]
        assert [order.index("g0") + 1, order.index("g1") + 1] == list(c.ranks)


def test_three_pieces_split_across_the_edges() -> None:
    case = make_case(n_distractors=7, n_decisive=3)
    by_name = {c.name: c.ranks for c in conditions_for(case, parse_ranks("all"), False)[0]}
    assert by_name == {"adjacent": (5, 6, 7), "both_edges": (1, 2, 10), "separated": (3, 6, 8)}


def test_strategies_turn_rank_order_into_prompt_order() -> None:
    case = make_case(n_distractors=5)
    ranked = retrieval_order(case, conditions_for(case, parse_ranks("3"), False)[0][0])
    placed = prompt_order("edge", ranked)
    assert [p.rank for p in placed] == [1, 3, 5, 6, 4, 2]
    assert placed[1].chunk.id == "g0"
    assert [p.rank for p in prompt_order("long_context_reorder", ranked)] == [2, 4, 6, 5, 3, 1]
    assert [p.rank for p in prompt_order("score_order", ranked)] == [1, 2, 3, 4, 5, 6]


def test_default_template_is_the_papers_and_offsets_point_at_each_text() -> None:
    docs = [Doc("first {text}", "Title A"), Doc("second"), Doc("third")]
    prompt = render(Template.default(), "who?", docs)
    assert prompt.text == (
        "Write a high-quality answer for the given question using only the provided search "
        "results (some of which might be irrelevant).\n\n"
        "Document [1](Title: Title A) first {text}\nDocument [2] second\nDocument [3] third"
        "\n\nQuestion: who?\nAnswer:")
    assert [prompt.text[s:e] for s, e in prompt.offsets] == ["first {text}", "second", "third"]


def test_template_file_placeholders(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "support.txt"
    path.write_text('Q: {question}\n{k} sources, JSON {"a": 1}:\n{documents}\nAgain: {question}')
    template = Template.load(path)
    assert template.id == "support" and len(template.version) == 12
    prompt = render(template, "why?", [Doc("x"), Doc("yy")])
    assert prompt.text == 'Q: why?\n2 sources, JSON {"a": 1}:\nDocument [1] x\nDocument [2] yy\nAgain: why?'
    assert [prompt.text[s:e] for s, e in prompt.offsets] == ["x", "yy"]
    for bad, message in (("{question}", "{documents} exactly once"),
                         ("{documents}{documents}{question}", "exactly once"),
                         ("{documents}", "{question}")):
        with pytest.raises(TemplateError, match=message.replace("{", "\\{").replace("}", "\\}")):
            Template.of(bad, "t")


def test_grading_follows_the_papers_normalisation() -> None:
    assert normalize("The  Answer: A   14-Day window!") == "answer 14day window"
    assert best_subspan_match("It is the Eiffel Tower, in Paris.", ["eiffel tower"])
    assert best_subspan_match("30 days; actually 14 days", ["14 days", "two weeks"])
    assert not best_subspan_match("30 days", ["14 days"])
    assert not best_subspan_match("anything", ["the"])
    assert recalled_constraints("Refunds need a Receipt.", ["receipt", "original packaging"]) == ("receipt",)


def test_citations_are_prompt_positions() -> None:
    assert cited_documents("See [3] and Document [1]; also [2, 4] and [9].", k=5) == (3, 1, 2, 4)
    assert cited_documents("no citations", k=5) == ()
    g = grade("14 days with a receipt [2]", ["14 days"], ["receipt"], k=3)
    assert g.correct and g.cited == (2,)
    assert not grade("14 days [2]", ["14 days"], ["receipt"], k=3).correct
