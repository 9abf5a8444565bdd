"""The dashboard's three workflows on the bundled sample traces, start to finish, in a real
browser at 1440 pixels: find an incident by what its answer said and open it; see a new
template's regression in the week it starts. (The third, a layout verdict on Experiments, is
in test_dashboard_browser.py.)

The samples are loaded the way `midtrace demo` loads them; the dashboard reads the file
(`midtrace dashboard --db FILE --port 0`). Where a row sits in a list is asked of the same
file through the client, so the test follows the data, not a copy of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from midtrace.client import open_client
from midtrace.collector.query.reads import Filters
from midtrace.demo import load_samples
from tests import browser as b
from tests.e2e.test_dashboard_browser import READY, chromium, select_first_row  # noqa: F401
from tests.procs import Proc, start

pytestmark = pytest.mark.browser

INCIDENT_QUESTION = "What is the refund window for annual plans?"  # sample_traces/README.md
INCIDENT_DAY = "2026-11-10"
WEEK_3 = ("2026-11-09", "2026-11-15")  # support-v2 starts (sample_traces/README.md)


@dataclass
class Demo:
    db: Path
    dashboard: Proc


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    tmp = tmp_path_factory.mktemp("workflows")
    db = tmp / "demo.duckdb"
    report = load_samples(db)
    assert report.requests > 4000 and not report.refused, report
    dashboard = start(["dashboard", "--db", str(db), "--port", "0"], tmp / "dashboard.log",
                      ready=READY, timeout=90)
    try:
        yield Demo(db, dashboard)
    finally:
        assert dashboard.stop() == 0, dashboard.log()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:  # noqa: F811
    context = chromium.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, errors


def visit(page: Page, demo: Demo, name: str, query: str) -> None:
    page.goto(b.page_url(demo.dashboard.url, name, query))
    b.wait_rendered(page, timeout=120)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)


def nothing_cut_off(page: Page) -> None:
    """No headline figure is clipped at this width (a metric truncates with an ellipsis)."""
    clipped = page.evaluate("""() => [...document.querySelectorAll(
            '[data-testid="stMetricValue"] div, [data-testid="stMetricLabel"] p')]
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")
    assert clipped == []


def test_find_the_refund_incident_by_its_answer_within_the_sidebar_dates(
        page: Page, demo: Demo) -> None:
    day = datetime.fromisoformat(INCIDENT_DAY).replace(tzinfo=UTC)
    week = Filters(since=datetime.fromisoformat(WEEK_3[0]).replace(tzinfo=UTC),
                   until=datetime.fromisoformat("2026-11-16").replace(tzinfo=UTC))
    client = open_client(db=demo.db)
    try:
        in_week = client.requests(week, search="30 days", limit=1000)
        on_day = client.requests(Filters(since=day, until=day.replace(day=11)),
                                 search="30 days", limit=1000)
    finally:
        client.close()
    planted = on_day[(on_day["question"] == INCIDENT_QUESTION)
                     & (on_day["taxonomy_class"] == "buried") & (on_day["decisive_slot"] == 7)]
    assert len(planted) == 1, on_day[["question", "taxonomy_class", "decisive_slot"]]
    incident = str(planted["trace_id"].iloc[0])
    assert len(in_week) > 50  # more than one page in the week: the search pages

    # A reviewer searches the week for what the answer said: every match, 50 a page.
    visit(page, demo, "inspector", f"since={WEEK_3[0]}&until={WEEK_3[1]}&q=30+days")
    expect(page.get_by_text(f"{len(in_week):,} match; 1-50 shown")).to_be_visible()
    page.get_by_label(re.compile(r"Page \(of 2\)")).fill("2")
    page.keyboard.press("Enter")
    expect(page.get_by_text(f"{len(in_week):,} match; 51-{len(in_week):,} shown")).to_be_visible()
    expect(page).to_have_url(re.compile(r"results_page=2"))

    # ...narrows the sidebar's dates to the day of the incident, and opens it from the list.
    visit(page, demo, "inspector", f"since={INCIDENT_DAY}&until={INCIDENT_DAY}&q=30+days")
    expect(page.get_by_text(f"{len(on_day):,} match; 1-{len(on_day):,} shown")).to_be_visible()
    select_first_row(page, "found", row=int(planted.index[0]))
    expect(page).to_have_url(re.compile(rf"trace_id={incident}"), timeout=30_000)
    expect(page).to_have_url(re.compile(rf"since={INCIDENT_DAY}"))  # the filters stay
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    shown = page.locator('[data-testid="stText"]')
    expect(shown.filter(has_text=INCIDENT_QUESTION).first).to_be_visible()
    expect(shown.filter(has_text="slot 7 of 10, middle")).to_have_count(1)
    # the strip draws what surrounds the chunks, not empty space
    strip = page.locator(b.CHART).first
    expect(strip.locator(".legendtext").filter(has_text="instructions")).to_have_count(1)
    expect(strip.locator(".legendtext").filter(has_text="question")).to_have_count(1)
    nothing_cut_off(page)


def test_the_new_template_regression_shows_in_the_slices_chart_the_week_it_starts(
        page: Page, demo: Demo) -> None:
    visit(page, demo, "overview", f"since=2026-10-26&until={WEEK_3[1]}")
    expect(page.get_by_text("Newest week: 09 Nov 2026")).to_be_visible()
    slices = page.locator(b.CHART).filter(
        has=page.locator(".ytick text", has_text="template: support-v2"))
    expect(slices).to_have_count(1)
    label = slices.locator(".ytick text").filter(has_text="template: support-v2")
    expect(label).to_contain_text("new:")
    expect(label).to_contain_text("vs all")
    # called worse: red, not the grey of a change that may be noise
    fills = slices.locator(".bars path").evaluate_all(
        "ps => ps.map(p => getComputedStyle(p).fill)")
    assert "rgb(214, 39, 40)" in fills, fills
    expect(page.get_by_text(re.compile(r"template: support-v2: first seen this week"))
           ).to_be_visible()
    nothing_cut_off(page)
