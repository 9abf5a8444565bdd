"""The dashboard's figure functions and frame helpers, checked against their input frames."""

from __future__ import annotations

import pandas as pd
import pytest

from midtrace.dashboard import cost_figures, figures, frames
from midtrace.schemas.stats import wilson


def band_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "band": ["late", "early", "middle", "absent"],
        "n": [40, 50, 45, 20], "correct": [34, 46, 18, 2],
        "accuracy": [0.85, 0.92, 0.4, 0.1], "ci_low": [0.71, 0.81, 0.27, 0.03],
        "ci_high": [0.93, 0.97, 0.55, 0.3]})


def test_accuracy_by_band_orders_bands_and_carries_intervals_and_n() -> None:
    df = band_frame()
    present, absent = df[df["band"] != "absent"], df[df["band"] == "absent"]
    fig = figures.accuracy_by_band(present, baseline=absent)
    (bars,) = fig.data
    assert list(bars.x) == ["early", "middle", "late"]
    assert list(bars.y) == [0.92, 0.4, 0.85]
    assert list(bars.error_y.array) == pytest.approx([0.05, 0.15, 0.08])
    assert list(bars.error_y.arrayminus) == pytest.approx([0.11, 0.13, 0.14])
    assert list(bars.text) == ["n=50", "n=45", "n=40"]
    assert [row[2] for row in bars.customdata] == [50, 45, 40]
    assert fig.layout.yaxis.tickformat == ".0%"
    (line,) = fig.layout.shapes
    assert line.y0 == line.y1 == 0.1 and line.line.dash == "dash"


def test_accuracy_by_band_split_draws_one_trace_per_slice() -> None:
    df = pd.concat([band_frame().assign(model="m1"), band_frame().assign(model="m2",
                                                                          accuracy=0.5)])
    df = df[df["band"] != "absent"]
    fig = figures.accuracy_by_band(df, split="model")
    assert [t.name for t in fig.data] == ["m1", "m2"]
    assert list(fig.data[1].y) == [0.5, 0.5, 0.5]
    assert fig.layout.showlegend is True


def test_accuracy_by_slot_is_a_line_in_slot_order() -> None:
    df = pd.DataFrame({"k": 5, "slot": [3, 1, 2, 5, 4], "n": [10] * 5,
                       "accuracy": [0.3, 0.9, 0.6, 0.85, 0.55], "ci_low": [0.1] * 5,
                       "ci_high": [0.95] * 5, "requests": [10] * 5})
    fig = figures.accuracy_by_slot(df)
    (line,) = fig.data
    assert list(line.x) == [1, 2, 3, 4, 5]
    assert list(line.y) == [0.9, 0.6, 0.3, 0.55, 0.85]
    assert line.mode == "lines+markers"


def test_rate_by_week_draws_interval_band_and_line() -> None:
    df = pd.DataFrame({"week": pd.to_datetime(["2026-10-19", "2026-10-12"]),
                       "accuracy": [0.6, 0.8], "ci_low": [0.4, 0.6], "ci_high": [0.75, 0.9],
                       "graded": [30, 40]})
    fig = figures.rate_by_week(df, "accuracy", n="graded")
    band, line = fig.data
    assert band.fill == "toself" and band.hoverinfo == "skip"
    assert list(line.y) == [0.8, 0.6]
    assert [row[2] for row in line.customdata] == [40, 30]
    assert fig.layout.xaxis.dtick == 7 * 24 * 3600 * 1000


def test_taxonomy_by_week_stacks_classes_in_taxonomy_order() -> None:
    df = pd.DataFrame({"week": ["2026-10-12"] * 3 + ["2026-10-19"] * 2,
                       "class": ["answered", "buried", "missing", "answered", "buried"],
                       "n": [8, 2, 1, 6, 4]})
    fig = figures.taxonomy_by_week(df)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["answered", "missing", "buried"]
    buried = fig.data[2]
    assert list(buried.y) == [2, 4]
    assert buried.marker.color == figures.TAXONOMY_COLORS["buried"]
    shares = figures.taxonomy_by_week(df, share=True)
    assert list(shares.data[2].y) == pytest.approx([2 / 11, 4 / 10])


def test_taxonomy_by_slice_leaves_out_answered_and_gives_shares() -> None:
    df = pd.DataFrame({"model": ["a", "a", "a", "b"], "class": ["answered", "buried", "missing",
                                                                "buried"], "n": [10, 3, 1, 5]})
    fig = figures.taxonomy_by_slice(df, "model")
    assert [t.name for t in fig.data] == ["missing", "buried"]
    assert list(fig.data[1].x) == pytest.approx([0.75, 1.0])


def strip_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "chunk_id": ["c-late", "c-early", "<b>x</b>"], "prompt_index": [2, 0, 1],
        "token_start": [700, 100, 400], "token_end": [900, 300, 600],
        "label": ["exception_constraint", "direct_answer", "irrelevant"],
        "decisive": [False, True, False], "cited": [True, False, False],
        "source_id": ["s1", "s2", "<script>alert(1)</script>"], "authority": "canonical",
        "retrieval_rank": [3, 1, 2], "retrieval_score": [0.5, 0.9, 0.7],
        "rerank_rank": [2, 1, 3], "rerank_score": [0.6, 0.8, 0.4]})


def test_prompt_strip_draws_blocks_on_the_token_axis_in_prompt_order() -> None:
    fig = figures.prompt_strip(strip_frame(), 1000, early_end=0.25, late_start=0.8)
    blocks = {t.name: t for t in fig.data if t.type == "bar"}
    assert set(blocks) == {"direct_answer", "exception_constraint", "irrelevant"}
    early = blocks["direct_answer"]
    assert list(early.base) == [100.0] and list(early.x) == [200.0]
    assert list(early.text) == ["1"]  # slot 1: first in prompt order
    assert list(blocks["irrelevant"].text) == ["2"] and list(blocks["exception_constraint"].text) == ["3"]
    assert early.marker.line.width == (3.5,) and early.marker.line.color == ("#000",)
    assert blocks["irrelevant"].marker.line.width == (1,)
    assert early.marker.color == figures.LABEL_COLORS["direct_answer"]
    cited = next(t for t in fig.data if t.name == "cited")
    assert list(cited.x) == [800.0]
    assert tuple(fig.layout.xaxis.range) == (0, 1000.0)
    bounds = sorted(s.x0 for s in fig.layout.shapes if s.type == "line")
    assert bounds == pytest.approx([250, 800])  # the settings given, not a constant


def test_prompt_strip_escapes_untrusted_text_in_hover() -> None:
    fig = figures.prompt_strip(strip_frame(), 1000, 1 / 3, 2 / 3)
    hover = " ".join(h for t in fig.data if t.hovertext is not None for h in t.hovertext)
    assert "<script>" not in hover and "<b>x</b>" not in hover
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hover and "&lt;b&gt;x&lt;/b&gt;" in hover
    assert "rerank rank 3" in hover


def test_prompt_strip_without_offsets_falls_back_to_prompt_order() -> None:
    df = strip_frame().assign(token_start=None, token_end=None)
    fig = figures.prompt_strip(df, None, 1 / 3, 2 / 3)
    assert fig.layout.xaxis.title.text.startswith("prompt order")


def test_labels_from_data_are_escaped_everywhere() -> None:
    df = band_frame().assign(model="<a href='javascript:x'>m</a>")
    fig = figures.accuracy_by_band(df[df["band"] != "absent"], split="model")
    assert fig.data[0].name == "&lt;a href='javascript:x'&gt;m&lt;/a&gt;"
    bars = figures.count_bars(pd.DataFrame({"source_id": ["<img src=x>"], "n": [3]}),
                              "source_id", title="cited <b>x</b>")
    assert bars.layout.title.text == "cited &lt;b&gt;x&lt;/b&gt;"
    assert list(bars.data[0].y) == ["&lt;img src=x&gt;"]


def test_band_heatmap_puts_counts_on_a_band_grid() -> None:
    df = pd.DataFrame({"decisive_band": ["middle", "early", "middle"],
                       "cited_band": ["early", "early", "none"], "requests": [5, 7, 2]})
    fig = figures.band_heatmap(df, "decisive_band", "cited_band", "requests")
    (heat,) = fig.data
    assert list(heat.y) == ["early", "middle"] and list(heat.x) == ["early", "none"]
    assert heat.z.tolist() == [[7, 0], [5, 2]]


def test_empty_frames_give_a_message_not_an_error() -> None:
    for fig in (figures.accuracy_by_band(pd.DataFrame()), figures.taxonomy_by_week(pd.DataFrame()),
                figures.prompt_strip(pd.DataFrame(), 100, 1 / 3, 2 / 3), figures.slice_moves(pd.DataFrame())):
        assert fig.layout.annotations and not fig.data


def weekly(dim: str, rows: list[tuple[str, str, int, int]]) -> pd.DataFrame:
    """weekly_overview rows (dimension, week, correct, graded), accuracy from the counts; a
    slice with no graded requests in a week has the row with 0 graded (the view's week grid)."""
    frame = pd.DataFrame(rows, columns=[dim, "week", "correct", "graded"])
    return frame.assign(accuracy=frame["correct"] / frame["graded"].where(frame["graded"] > 0))


def test_slice_moves_are_called_by_a_z_test_and_new_slices_come_first() -> None:
    df = weekly("template", [
        ("a", "2026-10-12", 90, 100), ("a", "2026-10-19", 60, 100),   # 90% -> 60%: called
        ("b", "2026-10-12", 20, 40), ("b", "2026-10-19", 28, 40),     # 50% -> 70%: p = 0.07
        ("c", "2026-10-12", 1, 5), ("c", "2026-10-19", 5, 6),         # big, small n
        ("v2", "2026-10-12", 0, 0), ("v2", "2026-10-19", 7, 20),      # first seen this week
        ("old", "2026-10-12", 9, 10), ("old", "2026-10-19", 0, 0),    # gone
    ])
    moves = frames.slice_moves([("template", df)], min_n=30)
    assert list(moves["slice"][:2]) == ["template: v2", "template: old"]
    assert list(moves["kind"][:2]) == ["new", "vanished"]
    moved = moves[moves["kind"] == "moved"]
    assert list(moved["slice"]) == ["template: c", "template: a", "template: b"]  # by |change|
    assert list(moved["called"]) == [False, True, False]
    a = moved.set_index("value").loc["a"]
    assert a["delta"] == pytest.approx(-0.3) and a["z"] < 0 and a["p_value"] < 0.001
    assert 0.05 < moved.set_index("value").loc["b", "p_value"] < 0.1  # close, not called
    # a new slice is set against all traffic of the week before: 120 of 155 right
    v2 = moves.set_index("value").loc["v2"]
    assert (v2["versus"], v2["n_before"]) == ("all", 155)
    assert v2["before"] == pytest.approx(120 / 155) and v2["z"] < 0 and not v2["called"]
    assert frames.arrivals(moves) == [
        "template: v2: first seen this week, accuracy 35% of 20 graded (all traffic the week "
        "before: 77% of 155)",
        "template: old: no graded traffic this week (the week before: 90% of 10 graded)"]
    fig = figures.slice_moves(moves)
    colors = dict(zip(fig.data[0].y, fig.data[0].marker.color, strict=True))
    assert set(colors) == {"template: a", "template: b", "template: c", "template: v2"}
    assert colors["template: a"] == "#d62728" and colors["template: b"] == "#bbbbbb"
    assert list(fig.data[0].y)[-1] == "template: c"  # the biggest change drawn on top
    text = dict(zip(fig.data[0].y, fig.data[0].text, strict=True))
    assert text["template: a"] == "90% → 60% (n 100 → 100)"
    assert text["template: v2"].startswith("new: 35% (n 20) vs all 77% the week before (n 155)")


def test_last_two_weeks_and_weekly_recall() -> None:
    df = pd.DataFrame({"week": pd.to_datetime(["2026-10-12", "2026-10-19", "2026-10-19"]),
                       "context_bucket": ["<4k", "<4k", "4k-16k"], "required": [10, 10, 30],
                       "recalled": [9, 8, 12]})
    recall = frames.weekly_recall(df)
    assert list(recall["recall"]) == pytest.approx([0.9, 0.5])
    assert (recall["ci_low"].iloc[1], recall["ci_high"].iloc[1]) == wilson(20, 40)
    cur, prev = frames.last_two_weeks(recall, "recall")
    assert cur is not None and prev is not None
    assert cur["required"] == 40 and prev["recalled"] == 9


def test_placed_chunks_and_citations_from_a_trace() -> None:
    trace = {
        "request": {"cited_ids": ["b", "zz"]},
        "chunks": [{"chunk_id": "a", "label": "direct_answer", "is_decisive": True,
                    "is_cited": False, "text": "A"},
                   {"chunk_id": "b", "label": "conflicting", "is_decisive": False,
                    "is_cited": True, "text": "B"},
                   {"chunk_id": "d", "stage": "dropped", "drop_reason": "budget",
                    "is_decisive": False, "is_cited": False, "text": "D"}],
        "placements": [{"chunk_id": "b", "prompt_index": 1, "slot": 2, "band": "late",
                        "token_start": 50, "token_end": 90},
                       {"chunk_id": "a", "prompt_index": 0, "slot": 1, "band": "early",
                        "token_start": 0, "token_end": 40}],
    }
    placed = frames.placed_chunks(trace)
    assert list(placed["chunk_id"]) == ["a", "b"]
    assert list(placed["decisive"]) == [True, False] and list(placed["cited"]) == [False, True]
    assert list(frames.unplaced_chunks(trace)["chunk_id"]) == ["d"]
    cites = frames.citations(trace, placed)
    assert list(cites["chunk_id"]) == ["b", "zz"]
    assert cites["slot"].iloc[0] == 2 and cites["band"].iloc[1] == "unknown"


def test_layout_difference_per_shared_condition() -> None:
    df = pd.DataFrame({"strategy": ["edge", "edge", "score_order", "score_order"],
                       "condition": ["first", "middle", "first", "middle"],
                       "accuracy": [1.0, 0.9, 1.0, 0.4], "n": [10, 10, 10, 10]})
    diff = frames.layout_difference(df, "score_order", "edge", ["first", "middle"])
    assert list(diff["difference"]) == pytest.approx([0.0, 0.5])
    fig = figures.layout_difference(diff, "score_order", "edge")
    assert list(fig.data[0].y) == pytest.approx([0.0, 0.5])


def test_placement_conditions_sort_in_prompt_order() -> None:
    values = ["rank_10", "absent", "rank_2", "rank_1", "middle", "first", None]
    assert frames.condition_order(values) == ["first", "middle", "rank_1", "rank_2", "rank_10",
                                              "absent"]


def test_a_headline_change_is_called_only_when_unlikely_to_be_noise() -> None:
    assert frames.change_called(0.50, 100, 0.65, 100, min_n=30)[0]  # p = 0.032
    called, p = frames.change_called(0.50, 40, 0.60, 40, min_n=30)  # intervals overlap too
    assert not called and p is not None and p > 0.05
    assert frames.change_called(0.10, 10, 0.90, 10, min_n=30) == (False, None)  # n too small


def cost_slices() -> pd.DataFrame:
    return pd.DataFrame({
        "template": ["<b>t1</b>", "t2", None], "strategy": ["edge", "score_order", "edge"],
        "requests": [10, 5, 3], "priced": [10, 5, 0], "reported": [4, 0, 0],
        "estimated": [6, 5, 0], "correct": [5, 0, 2], "cost_usd": [0.02, 0.01, None],
        "cost_per_correct": [0.004, None, None]})


def test_cost_by_slice_escapes_names_and_draws_no_bar_without_a_cost_per_correct() -> None:
    fig = cost_figures.cost_by_slice(cost_slices())
    (bars,) = fig.data
    names = list(bars.y)
    assert "&lt;b&gt;t1&lt;/b&gt; · edge" in names and "<b>t1</b> · edge" not in names
    assert "(none) · edge" in names
    values = dict(zip(names, bars.x))
    assert values["&lt;b&gt;t1&lt;/b&gt; · edge"] == pytest.approx(0.004)
    assert values["t2 · score_order"] is None  # no correct answer: listed, no bar


def test_cost_by_week_leaves_unpriced_weeks_without_a_bar() -> None:
    weeks = pd.DataFrame({
        "week": pd.to_datetime(["2026-11-02", "2026-11-09"]).date, "requests": [4, 2],
        "priced": [4, 0], "reported": [1, 0], "estimated": [3, 0], "correct": [2, 1],
        "cost_usd": [0.5, None], "cost_per_correct": [0.25, None]})
    bars, line = cost_figures.cost_by_week(weeks).data
    assert list(bars.y) == [0.5, None] and list(line.y) == [0.25, None]
    nothing = cost_figures.cost_by_week(weeks.assign(priced=0))
    assert not nothing.data and "no model is in the price table" in nothing.layout.annotations[0].text


def test_cost_note_says_how_costs_are_known_and_flags_example_prices() -> None:
    note = frames.cost_note({"requests": 10, "priced": 8, "reported": 3, "estimated": 5,
                             "example_priced": 5})
    assert note.startswith("3 of 10 requests reported their cost, 5 are estimated")
    assert "example prices" in note and "2 have no cost" in note
    assert "example" not in frames.cost_note({"requests": 1, "priced": 1, "reported": 1,
                                              "estimated": 0, "example_priced": 0})
    assert (frames.dollars(0.00274), frames.dollars(1234.5), frames.dollars(None)) == (
        "$0.0027", "$1,234.50", "—")


def test_request_cost_says_reported_estimated_or_unknown() -> None:
    assert frames.request_cost({"output_tokens": 1200, "cost_source": "reported",
                                "cost_usd": 0.5}) == (
        "Output tokens: 1,200 · cost $0.5000, reported by the app.")
    estimated = frames.request_cost({"output_tokens": 40, "cost_source": "estimated",
                                     "estimated_cost_usd": 0.0031, "example_price": True})
    assert "$0.0031, estimated" in estimated and "example price" in estimated
    assert "cost unknown" in frames.request_cost({"output_tokens": None, "cost_source": None})
