"""Page logic without a browser: Streamlit's AppTest over a DuckDB file opened read-only."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from midtrace.collector.storage.store import Store
from midtrace import supervise as launch
from midtrace.client import Filters, open_client
from midtrace.schemas.stats import paired_difference
from tests.dashboard_data import PRICES, Fixture, send_all
from tests.procs import start_collector

APP = str(launch.app_path())


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Fixture]]:
    """The known traces sent through a real collector, which is then stopped."""
    tmp = tmp_path_factory.mktemp("apptest")
    db = tmp / "traces.duckdb"
    prices = tmp / "prices.json"
    prices.write_text(json.dumps(PRICES))
    proc = start_collector(db, tmp / "collector.log", "--prices", str(prices))
    try:
        fx = send_all(proc.url)
    finally:
        proc.stop()
    yield db, fx


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key in (launch.ENV_URL, launch.ENV_DB, launch.ENV_TOKEN, launch.ENV_REQUIRE_TOKEN):
        monkeypatch.delenv(key, raising=False)
    yield monkeypatch


def app(page: str | None = None, **query: str) -> AppTest:
    """The app, run once on ``page`` (a file under app_pages/) with ``query`` in its URL.

    AppTest clears the URL on a page switch, so page widgets are set through the widgets.
    """
    at = AppTest.from_file(APP, default_timeout=120)
    if page is not None:
        at.run()
        at.switch_page(f"app_pages/{page}.py")
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at


def plotly_specs(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_overview_shows_the_newest_week_against_the_one_before(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app()
    assert not at.exception
    values = {m.label: m.value for m in at.metric}
    # Newest week, production traffic only (the sweep is left out): model-a 4/5 right (wrong at
    # slot 3), model-b 2/5 (wrong at slots 2-4), the incident trace wrong: 6/11.
    assert values["Accuracy"] == "54.5%"
    assert values["Constraint recall"] == "80.0%"
    # the default range ends on the newest data, not today
    assert at.date_input(key="f_until").value.isoformat() == "2026-11-05"
    assert at.date_input(key="f_since").value.isoformat() == "2026-10-12"
    assert len(plotly_specs(at)) == 7  # five for the review, two for its cost
    assert any("change not called" in c.value for c in at.caption)
    # the findings lead the page, as plain text: here too few per week to call a change
    assert at.subheader[0].value == "Findings"
    assert at.text[0].value.startswith("Nothing moved beyond noise")


def test_model_filter_from_the_url_narrows_the_numbers(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app(model="model-b")
    assert not at.exception
    assert at.selectbox(key="model").value == "model-b"
    assert {m.label: m.value for m in at.metric}["Accuracy"] == "40.0%"


def test_the_grader_filter_says_whose_grades_count_and_counts_only_those(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    db, fx = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    at = app()
    assert not at.exception and at.selectbox(key="grader").value == "all"
    assert any("Grades from every grader count" in c.value for c in at.caption)
    at = app(grader="person")  # the fixture's grades are all a person's
    assert {m.label: m.value for m in at.metric}["Accuracy"] == "54.5%"
    assert any("Only a person's grades count" in c.value for c in at.caption)
    at = app(grader="judge")  # no judge graded anything: no accuracy to show
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Accuracy"] != "54.5%"
    assert any("Only the LLM judge's grades count" in c.value for c in at.caption)
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.incident).run()
    assert not at.exception
    assert any("graded by person" in t.value for t in at.text)


def test_overview_shows_what_the_answers_cost(env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    from midtrace.dashboard.frames import dollars
    from tests.dashboard_data import incident_record, ungraded_record, weekly_records

    # production traffic in the page's range: the weekly answers, the incident, the ungraded one
    records = [r for _, r in weekly_records()] + [incident_record(), ungraded_record()]

    def cost(r: Any) -> float | None:  # reported, else priced by the fixture's table
        if r.cost_usd is not None:
            return float(r.cost_usd)
        price = PRICES.get(r.model)
        if price is None or r.output_tokens is None or r.prompt_tokens is None:
            return None
        return (r.prompt_tokens * price["input_per_mtok"]
                + r.output_tokens * price["output_per_mtok"]) / 1e6

    costs = [cost(r) for r in records]
    total = sum(c for c in costs if c is not None)
    correct = sum(1 for r in records if r.outcome is not None and r.outcome.correct)
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app()
    assert not at.exception
    assert "Cost" in [h.value for h in at.subheader]
    values = {m.label: m.value for m in at.metric}
    assert values["Cost"] == dollars(total)
    assert values["Cost per correct answer"] == dollars(total / correct)
    reported = sum(r.cost_usd is not None for r in records)
    unpriced = sum(c is None for c in costs)
    note = next(c.value for c in at.caption if "reported their cost" in c.value)
    assert f"{reported} of {len(records)} requests reported their cost" in note
    assert f"{unpriced} have no cost" in note
    # the table per week, template and strategy counts correct answers: numbers, not "right"
    table = next(d.value for d in at.dataframe if "correct answers" in d.value.columns)
    assert table["correct answers"].sum() == correct
    specs = {s["layout"]["title"]["text"]: s for s in plotly_specs(at) if s["layout"].get("title")}
    bars = next(t for t in specs["Cost by week"]["data"] if t["type"] == "bar")
    assert sum(bars["y"]) == pytest.approx(total)
    sliced = specs["Cost per correct answer by template and strategy"]["data"][0]
    assert sorted(sliced["y"]) == ["support-v2 · edge", "support-v2 · score_order"]
    detail = next(d.value for d in at.dataframe if "cost_per_correct" in d.value.columns)
    assert set(detail["strategy"]) == {"edge", "score_order"}


def test_inspector_says_what_one_request_cost(env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    from tests.dashboard_data import OUTPUT_TOKENS, weekly_records

    db, fx = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    # the first weekly trace: model-a, priced by the fixture's table from its tokens
    _, first = weekly_records()[0]
    price = PRICES["model-a"]
    cost = (first.prompt_tokens * price["input_per_mtok"]
            + OUTPUT_TOKENS * price["output_per_mtok"]) / 1e6
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.traces[0]).run()
    assert not at.exception
    assert any(f"Output tokens: {OUTPUT_TOKENS} · cost ${cost:.4f}, estimated" in c.value
               for c in at.caption), [c.value for c in at.caption]
    at.text_input(key="trace_id").input(fx.incident).run()  # no output tokens, no cost sent
    assert any("Output tokens: unknown · cost unknown" in c.value for c in at.caption)


def test_position_page_splits_by_model(env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("position")
    at.get("button_group")[0].set_value("model").run()
    assert not at.exception
    bands = plotly_specs(at)[0]
    # the page's range: the default eight weeks up to the newest data cover the fixture
    client = open_client(db=fixture_db[0])
    try:
        split = client.view("accuracy_by_band", group_by=("model",))
        min_n = int(client.settings()["min_n"])
    finally:
        client.close()
    split = split[(split["band"] != "absent") & split["n"].notna()]
    kept = split[split["n"] >= min_n]
    hidden = len(split) - len(kept)
    assert sorted(split["model"].unique()) == ["model-a", "model-b"] and hidden
    drawn = [t["name"] for t in bands["data"] if t["type"] == "bar"]
    assert drawn == sorted(kept["model"].unique())
    captions = [c.value for c in at.caption]
    assert any(f"{hidden} split points under min_n = {min_n}" in c for c in captions), captions
    if kept.empty:  # the chart says why it is empty instead of drawing nothing
        assert "fewer than" in json.dumps(bands)


def test_inspector_in_file_mode_is_read_only_and_says_so(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    db, fx = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.incident).run()
    assert not at.exception
    assert any("Read-only" in i.value for i in at.info)
    placed = next(d.value for d in at.dataframe if "tokens" in d.value)  # "In the prompt"
    assert list(placed["chunk_id"]) == ["faq-returns#1", "xss-chunk", "policy-2026#3", "md-chunk",
                                        "policy-2026#4"]
    # no grading or replay form; a case is made in the tab, with nothing written
    assert [f.proto.form.form_id for f in at.get("form")] == ["case_form"]
    # untrusted text goes to code blocks (plain text), never to Markdown
    assert all("onerror" not in m.value for m in at.markdown)


def test_pages_draw_the_thresholds_the_database_sets(
        env: Any, fixture_db: tuple[Path, Fixture], tmp_path: Path) -> None:
    db, fx = fixture_db
    changed = tmp_path / "changed.duckdb"
    shutil.copy(db, changed)
    conn = duckdb.connect(str(changed))
    conn.execute("UPDATE settings SET value = CASE key WHEN 'min_n' THEN 3 "
                 "WHEN 'band_early_end' THEN 0.2 WHEN 'band_late_start' THEN 0.9 "
                 "ELSE value END")
    conn.close()
    env.setenv(launch.ENV_DB, str(changed))
    at = app()
    assert not at.exception
    assert any("at least 3 graded requests" in c.value for c in at.caption)
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.incident).run()
    assert not at.exception
    strip = next(s for s in plotly_specs(at) if s["layout"].get("shapes"))
    total = strip["layout"]["xaxis"]["range"][1]
    edges = sorted(s["x0"] / total for s in strip["layout"]["shapes"] if s["type"] == "line")
    assert edges == pytest.approx([0.2, 0.9])


def test_an_unknown_trace_id_is_a_warning_not_an_error(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("inspector")
    at.text_input(key="trace_id").input("0" * 32).run()
    assert not at.exception
    assert "No request with that trace id" in at.warning[0].value


def test_an_empty_database_says_how_to_send_traces(env: Any, tmp_path: Path) -> None:
    db = tmp_path / "empty.duckdb"
    Store.open(db).close()
    env.setenv(launch.ENV_DB, str(db))
    at = app()
    assert not at.exception
    assert at.title[0].value == "No traces yet"
    assert any("/v1/traces" in m.value for m in at.markdown)


def test_the_token_gate(env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    env.setenv(launch.ENV_TOKEN, "s3cret")
    env.setenv(launch.ENV_REQUIRE_TOKEN, "1")
    at = app()
    assert not at.metric and at.text_input[0].label == "Token"
    at.text_input[0].input("wrong")
    at.button[0].click()
    at.run()
    assert at.error and not at.metric
    at.text_input[0].input("s3cret")
    at.button[0].click()
    at.run()
    assert not at.exception
    assert {m.label for m in at.metric} >= {"Accuracy", "Buried rate"}


def _chart(at: AppTest, title: str) -> dict[str, Any]:
    return next(s for s in plotly_specs(at)
                if title in str(s["layout"].get("title", {}).get("text", "")))


def test_experiments_page_compares_two_layouts(env: Any,
                                               fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("experiments")
    at.selectbox(key="experiment").select("exp-1").run()
    at.selectbox(key="layout_a").select("score_order")
    at.selectbox(key="layout_b").select("edge").run()
    assert not at.exception
    diff = _chart(at, "edge minus score_order")["data"][0]
    assert diff["x"] == ["first", "middle", "last", "absent"]
    text = dict(zip(diff["x"], diff["text"], strict=True))
    assert text["middle"] == "+100%" and text["first"] == "+0%"


def test_experiments_page_reaches_a_verdict_against_the_production_baseline(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("experiments")  # exp-ranks has the most requests: the default
    assert not at.exception
    assert at.selectbox(key="experiment").value == "exp-ranks"
    texts = [t.value for t in at.text]
    # production: score_order packs model-a's 20 weekly requests, the incident and the
    # ungraded one (22); edge model-b's 20
    assert ("Baseline: score_order, the packing strategy production uses now (22 of 42 "
            "production requests with a strategy in this range).") in texts
    # the default comparison is the baseline against the best other strategy, not any two
    assert at.selectbox(key="layout_a").value == "score_order"
    assert at.selectbox(key="layout_b").value == "edge"
    _, low, high = paired_difference(only_a=0, only_b=6, n=30)
    verdict = (f"edge against score_order: +20.0 pts (95% interval {low * 100:+.1f} pts to "
               f"{high * 100:+.1f} pts; paired over 30 requests of 6 cases; McNemar p = 0.014) "
               "→ better.")
    assert verdict in texts, texts
    assert low > 0  # the interval agrees with the verdict
    cards = {m.label: m.value for m in at.metric if m.label == "Against the baseline"}
    assert cards == {"Against the baseline": "+20.0 pts"}
    # accuracy by the decisive chunk's retrieval rank, with production's ranks behind it
    ranks = _chart(at, "Accuracy by retrieval rank")
    assert ranks["layout"]["xaxis"]["title"]["text"].startswith("retrieval rank of the decisive")
    # where each rank landed: edge puts rank 2 last (slot 5) and rank 5 in slot 3
    landing = _chart(at, "Where each retrieval rank landed")["data"][0]
    rows = dict(zip(landing["y"], landing["text"], strict=True))
    assert rows["edge"] == ["slot 1", "slot 5", "slot 2", "slot 4", "slot 3"]
    assert rows["score_order"] == ["slot 1", "slot 2", "slot 3", "slot 4", "slot 5"]
    averages = next(d.value for d in at.dataframe if "uniform over ranks" in d.value.columns)
    shown = averages.set_index("strategy").to_dict("index")
    assert shown["edge"]["uniform over ranks"] == "80.0%"
    assert shown["score_order"]["uniform over ranks"] == "60.0%"
    # production's decisive ranks: 1 for the incident and 8 weekly requests, 8 each for 2-5:
    # score_order right at ranks 1, 4, 5: (9 + 8 + 8) / 41; edge also at 2: (9 + 8 + 8 + 8) / 41
    assert shown["score_order"]["production-weighted"] == f"{25 / 41:.1%}"
    assert shown["edge"]["production-weighted"] == f"{33 / 41:.1%}"
    assert shown["edge"]["production at these ranks"] == "100.0%"


def test_inspector_search_pages_through_every_match_under_the_filters(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("inspector")
    at.selectbox(key="traffic").set_value("all").run()  # the sweep's answers too
    at.text_input(key="q").input("days").run()  # answers: "Refunds within 14 days." ...
    assert not at.exception
    caption = next(c.value for c in at.caption if "contains the text" in c.value)
    total = int(caption.split(": ", 1)[1].split(" match")[0].replace(",", ""))
    assert total > 50, caption  # more than one page, or the test proves nothing
    first = set(at.dataframe[0].value["trace_id"])
    assert len(first) == 50
    at.number_input(key="results_page").set_value(2).run()
    assert not at.exception
    second = set(at.dataframe[0].value["trace_id"])
    assert second and not first & second


def test_inspector_shows_which_required_constraints_the_answer_kept(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    db = fixture_db[0]
    with duckdb.connect(str(db), read_only=True) as conn:
        (trace_id,) = conn.execute(
            "SELECT trace_id FROM request_outcomes WHERE len(required_constraints) = 2 "
            "AND len(recalled_constraints) = 1 LIMIT 1").fetchone()
    env.setenv(launch.ENV_DB, str(db))
    at = app("inspector")
    at.text_input(key="trace_id").input(trace_id).run()
    assert not at.exception
    assert any("Required constraints: 1 of 2 kept" in c.value for c in at.caption)
    table = next(d.value for d in at.dataframe if "constraint" in d.value.columns)
    assert table.to_dict("records") == [{"constraint": "opened items", "recalled": "kept"},
                                         {"constraint": "14 days", "recalled": "missed"}]


def test_position_and_failures_show_retrieval_quality_and_confident_wrong_answers(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    db = fixture_db[0]
    with duckdb.connect(str(db), read_only=True) as conn:
        expected = conn.execute("SELECT * FROM retrieval_quality").df().iloc[0]
    env.setenv(launch.ENV_DB, str(db))
    at = app("position")
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["MRR: retrieval order"] == f"{expected['retrieval_mrr']:.3f}"
    assert shown["NDCG: prompt order"] == f"{expected['prompt_ndcg']:.3f}"
    assert shown["Hit rate: prompt order"] == f"{expected['prompt_hit_rate']:.1%}"
    at = app("failures")
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    # the incident: wrong, 95% sure, its decisive evidence buried in the prompt
    assert shown["Unsupported confidence"] == "100.0%"
    assert shown["Confident wrong answers"] == "1" and shown["…of them buried"] == "1"


def test_an_empty_page_says_when_the_requests_are_in_the_other_traffic(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    from tests.dashboard_data import FIRST_WEEK, WEEKS
    sweep_day = (FIRST_WEEK + timedelta(weeks=WEEKS - 1, days=2)).date()  # only the sweep ran
    env.setenv(launch.ENV_DB, str(fixture_db[0]))
    at = app("position")
    at.date_input(key="f_since").set_value(sweep_day).run()
    at.date_input(key="f_until").set_value(sweep_day).run()
    assert not at.exception
    message = " ".join(i.value for i in at.info)
    assert "but 24 experiment requests do: switch Traffic to experiment" in message, message
    at.selectbox(key="traffic").set_value("experiment").run()
    assert not at.exception and not at.info



def test_inspector_shows_the_chunk_the_answer_follows_marked_as_text(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    """The incident's answer says 30 days: it follows the deprecated FAQ chunk at slot 1, not
    the decisive 14-day policy; the matched span is marked in the answer and in the chunk as
    plain text, and the chunks holding HTML and Markdown are never rendered."""
    db, fx = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.incident).run()
    assert not at.exception
    codes = [c.value for c in at.code]
    assert "You have ⟦30 days⟧ to return it [faq-returns#1]." in codes
    assert "Returns are accepted within ⟦30 days⟧ (2019 policy)." in codes
    table = next(d.value for d in at.dataframe if "matched" in d.value.columns)
    assert table[["slot", "chunk_id", "matched", "kinds"]].to_dict("records") == [
        {"slot": 1, "chunk_id": "faq-returns#1", "matched": '"30 days"', "kinds": "number"}]
    assert any("slot 1 · faq-returns#1 · conflicting · not decisive" == t.value for t in at.text)
    assert not any("<script" in m.value for m in at.markdown)


def test_the_inspector_adds_an_incident_to_the_case_set(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    from midtrace.sweep.cases import case_from_json

    db, fx = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    at = app("inspector")
    at.text_input(key="trace_id").input(fx.incident).run()
    at.button(key="FormSubmitter:case_form-Add to case set").click().run()
    assert not at.exception
    assert "give the accepted answers" in " ".join(t.value for t in at.text)
    assert not at.session_state["_case_set"]
    at.text_area(key="case_answers").input("14 days\n\nfourteen days")  # sent with the submit
    at.button(key="FormSubmitter:case_form-Add to case set").click().run()
    assert not at.exception
    held = at.session_state["_case_set"]
    assert list(held) == [fx.incident]
    case = case_from_json(held[fx.incident])  # what `midtrace sweep --cases` reads
    assert case.answers == ("14 days", "fourteen days")
    assert [c.id for c in case.decisive] == ["policy-2026#3"]
    # every other retrieved chunk is a distractor, the one dropped for budget too
    assert sorted(c.id for c in case.distractors) == sorted(
        ["faq-returns#1", "xss-chunk", "md-chunk", "policy-2026#4", "blog-old#2"])
    assert any(t.value == "Case set: 1 case" for t in at.sidebar.text)


def test_failures_exports_a_class_as_cases_with_a_references_file(
        env: Any, fixture_db: tuple[Path, Fixture]) -> None:
    db, _ = fixture_db
    env.setenv(launch.ENV_DB, str(db))
    at = app("failures")  # the buried class is the default
    assert not at.exception
    client = open_client(db=db)
    try:  # the requests the page lists: the filters it applied
        buried, total = client.requests_page(Filters.from_params(dict(at.session_state["_params"])),
                                             taxonomy_class="buried", limit=500)
    finally:
        client.close()
    questions = sorted(set(buried["question"]))
    assert total >= 2 and len(questions) >= 2, questions
    # one question left out: its requests are skipped, with the reason
    refs = "".join(json.dumps({"question": q, "answers": ["14 days"]}) + "\n"
                   for q in questions[1:])
    at.file_uploader(key="cases_references").set_value(
        ("refs.jsonl", refs.encode(), "application/jsonl")).run()
    at.button(key="cases_make").click().run()
    assert not at.exception
    held = at.session_state["_case_set"]
    expected = set(buried[buried["question"] != questions[0]]["trace_id"])
    assert set(held) == expected
    assert all(c["metadata"]["taxonomy_class"] == "buried" for c in held.values())
    skipped = sum(buried["question"] == questions[0])
    shown = " ".join(t.value for t in at.text)
    assert f"skipped {skipped}: no accepted answer: no line of the references file" in shown


def test_inspector_lists_and_opens_requests_that_are_not_rag(env: Any, tmp_path: Path) -> None:
    from midtrace.collector.storage.store import WriteJob
    from tests.test_request_kinds import CHAT, SEARCH, TRACES

    db = tmp_path / "kinds.duckdb"
    store = Store.open(db)
    try:
        store.write([WriteJob(spans=[s for trace in TRACES.values() for s in trace])])
    finally:
        store.close()
    env.setenv(launch.ENV_DB, str(db))
    at = app("inspector")
    assert not at.exception
    assert any("1 are retrieval only and 1 LLM only" in c.value for c in at.caption), [
        c.value for c in at.caption]
    (listed,) = at.dataframe
    assert sorted(listed.value["kind"]) == ["llm_only", "rag", "retrieval_only"]
    for trace_id, says in ((CHAT, "LLM only"), (SEARCH, "Retrieval only")):
        at.text_input(key="trace_id").input(trace_id).run()
        assert not at.exception
        assert any(i.value.startswith(says) for i in at.info), [i.value for i in at.info]
