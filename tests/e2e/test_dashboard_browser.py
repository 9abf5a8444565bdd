"""The dashboard in a real browser: a real collector with known traces, `midtrace dashboard
--url ... --port 0`, and Debian's headless Chromium driven by Playwright."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from midtrace.client import open_client
from tests import browser as b
from tests.dashboard_data import INCIDENT_QUESTION, MARKDOWN_TEXT, XSS_TEXT, Fixture, send_all
from tests.procs import Proc, start, start_collector

pytestmark = pytest.mark.browser

READY = re.compile(r"midtrace dashboard at (http://\S+)")
MIN_CHARTS = {"overview": 5, "position": 2, "citations": 3, "failures": 2, "inspector": 1,
              "experiments": 2}


@dataclass
class Stack:
    collector: Proc
    dashboard: Proc
    fixture: Fixture


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("dashboard")
    collector = start_collector(tmp / "traces.duckdb", tmp / "collector.log")
    try:
        fixture = send_all(collector.url)
        dashboard = start(["dashboard", "--url", collector.url, "--port", "0"],
                          tmp / "dashboard.log", ready=READY, timeout=90)
        try:
            yield Stack(collector, dashboard, fixture)
        finally:
            assert dashboard.stop() == 0, dashboard.log()
    finally:
        collector.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as pw:
        try:
            browser = b.launch(pw)
        except b.BrowserMissing as e:
            pytest.fail(str(e))
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    page.errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()


def open_page(page: Page, stack: Stack, name: str, query: str = "") -> int:
    page.goto(b.page_url(stack.dashboard.url, name, query))
    charts = b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    return charts


def test_a_deep_link_on_a_fresh_server_goes_through_the_router(page: Page, stack: Stack) -> None:
    """The first session of a new server opens /inspector?trace_id=... with the filters."""
    open_page(page, stack, "inspector", f"trace_id={stack.fixture.incident}")
    expect(page.get_by_text(INCIDENT_QUESTION, exact=True)).to_be_visible()
    expect(page.get_by_text("Filters", exact=True)).to_be_visible()
    expect(page.locator('[data-testid="stSidebarNav"]').get_by_text("Trace inspector")).to_be_visible()


@pytest.mark.parametrize("name", list(b.PAGES))
def test_every_page_draws_its_charts_without_an_exception(page: Page, stack: Stack,
                                                          name: str) -> None:
    query = f"trace_id={stack.fixture.incident}" if name == "inspector" else ""
    charts = open_page(page, stack, name, query)
    assert charts >= MIN_CHARTS[name]
    expect(page.locator(b.DRAWN).first).to_be_attached()
    assert page.locator('[data-testid="stDownloadButton"]').count() >= MIN_CHARTS[name]
    # the default range is anchored on the newest data (5 Nov 2026), not on today
    assert "until=2026-11-05" in page.url and "since=2026-10-12" in page.url
    assert not page.errors  # type: ignore[attr-defined]


def test_a_filter_changes_a_number_and_the_url(page: Page, stack: Stack) -> None:
    open_page(page, stack, "overview")
    accuracy = page.locator('[data-testid="stMetricValue"]').first
    # newest week, production traffic (the Overview leaves the sweep out): model-a 4/5,
    # model-b 2/5, the incident wrong: 6/11
    expect(accuracy).to_have_text("54.5%")
    model = page.locator('[data-testid="stSelectbox"]').filter(has_text="Model")
    # low in the sidebar: brought to its middle, so its list has room to open below it
    model.evaluate("e => e.scrollIntoView({block: 'center'})")
    model.click()
    page.get_by_role("option", name="model-b").click()
    expect(page).to_have_url(re.compile(r"model=model-b"))
    b.wait_rendered(page)
    # newest week, model-b only: 3 of its 5 weekly requests wrong
    expect(accuracy).to_have_text("40.0%")
    # the link reproduces the view in a fresh page
    other = page.context.new_page()
    other.goto(page.url)
    b.wait_rendered(other)
    expect(other.locator('[data-testid="stMetricValue"]').first).to_have_text("40.0%")
    other.close()


def test_the_inspector_draws_a_known_trace_in_prompt_order(page: Page, stack: Stack) -> None:
    open_page(page, stack, "inspector", f"trace_id={stack.fixture.incident}")
    expect(page.get_by_text(INCIDENT_QUESTION, exact=True)).to_be_visible()
    cells = page.locator('.st-key-table_placed [data-testid="stDataFrame"] td[role="gridcell"]')
    expect(cells.first).to_be_attached()
    texts = cells.all_text_contents()
    ids = [t for t in texts if t in {"faq-returns#1", "xss-chunk", "policy-2026#3", "md-chunk",
                                     "policy-2026#4"}]
    assert ids == ["faq-returns#1", "xss-chunk", "policy-2026#3", "md-chunk", "policy-2026#4"]
    dropped = page.locator('.st-key-table_unplaced [data-testid="stDataFrame"] td[role="gridcell"]')
    expect(dropped.filter(has_text="budget")).to_have_count(1)
    strip = page.locator(b.CHART).first
    texts = strip.locator("g.trace.bars text").all_text_contents()
    assert sorted(t for t in texts if t.isdigit()) == ["1", "2", "3", "4", "5"]
    # the 300 tokens before slot 1 are drawn and named, not left as empty space
    assert "before the chunks (not recorded)" in texts
    expect(strip.locator("text").filter(has_text="middle")).to_have_count(1)


def test_untrusted_chunk_text_shows_literally(page: Page, stack: Stack) -> None:
    open_page(page, stack, "inspector", f"trace_id={stack.fixture.incident}")
    page.get_by_text("Show every chunk's text in prompt order").click()
    b.wait_rendered(page)
    expect(page.get_by_text(XSS_TEXT, exact=True)).to_have_count(1)
    expect(page.get_by_text(MARKDOWN_TEXT, exact=True)).to_have_count(1)
    expect(page.locator('img[src="x"]')).to_have_count(0)
    expect(page.locator('a[href="http://x"]')).to_have_count(0)
    expect(page.locator("strong", has_text="bold")).to_have_count(0)
    page.wait_for_timeout(300)
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_grading_in_the_browser_changes_the_report(page: Page, stack: Stack) -> None:
    client = open_client(url=stack.collector.url, fresh=True)

    def counts() -> dict[str, int]:
        frame = client.view("failure_taxonomy")
        return dict(zip(frame["class"], frame["n"].astype(int), strict=True))

    before = counts()
    open_page(page, stack, "inspector", f"trace_id={stack.fixture.ungraded}")
    form = page.locator('[data-testid="stForm"]')
    form.get_by_text("wrong", exact=True).click()
    form.locator('[data-testid="stMultiSelect"]').click()
    page.get_by_role("option", name="ungraded-c3").click()
    page.keyboard.press("Escape")
    form.get_by_label("Required constraints", exact=False).fill("annual plans\nafter the first month")
    form.get_by_label("Of those, the ones the answer kept", exact=False).fill("annual plans")
    form.get_by_role("button", name="Save grade").click()
    expect(page.get_by_text("Grade saved. Every page now counts it.")).to_be_visible()
    expect(page.get_by_text("Required constraints: 1 of 2 kept in the answer.")).to_be_visible()
    after = counts()
    assert after.get("ungraded", 0) == before.get("ungraded", 0) - 1
    assert after["buried"] == before["buried"] + 1
    b.wait_rendered(page)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    trace = client.trace(stack.fixture.ungraded)
    assert trace is not None and trace["taxonomy_class"] == "buried"
    assert trace["outcome"]["required_constraints"] == ["annual plans", "after the first month"]
    assert trace["outcome"]["recalled_constraints"] == ["annual plans"]
    client.close()


def test_a_failure_class_opens_its_requests_and_a_request_opens_the_inspector(
        page: Page, stack: Stack) -> None:
    open_page(page, stack, "failures", "class=dropped")
    expect(page.get_by_text("dropped: retrieved, then cut")).to_be_visible()
    open_page(page, stack, "failures", "class=buried")
    # the link column's cells (the grid's hidden fallback table carries the link as text)
    cells = page.locator('.st-key-table_requests [data-testid="stDataFrame"] td[role="gridcell"]')
    link = cells.filter(has_text="./inspector?").first
    expect(link).to_be_attached()
    href = link.text_content() or ""
    # the link keeps the page's filters (the default dates are always in the URL)
    assert re.fullmatch(r"\./inspector\?since=[0-9-]+&until=[0-9-]+&trace_id=[0-9a-f]{32}",
                        href), href
    open_page(page, stack, "inspector", href.split("?", 1)[1])
    expect(page.locator(b.CHART)).to_have_count(1)
    expect(page).to_have_url(re.compile(r"since=[0-9-]+&until=[0-9-]+"))


def select_first_row(page: Page, key: str, row: int = 0) -> None:
    """Tick a row (0-based, among the first ten) of a selectable st.dataframe: it draws on a
    canvas, so the click goes to where the row's selection box is (the left edge, one
    35-pixel header and ``row`` rows below the top)."""
    grid = page.locator(f'.st-key-{key} [data-testid="stDataFrame"]')
    expect(grid).to_be_visible()
    box = grid.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 35 * row + 35 / 2)


@pytest.mark.parametrize("how", ["recent", "found"])
def test_a_request_picked_from_the_inspector_lists_opens_without_an_error(
        page: Page, stack: Stack, how: str) -> None:
    open_page(page, stack, "inspector")
    wanted = r"[0-9a-f]{32}"
    if how == "found":  # a reviewer remembers what the answer said, not the question
        page.get_by_role("textbox", name="…or find by question or answer text").fill(
            "30 days to return")
        page.keyboard.press("Enter")
        expect(page.get_by_text("Requests whose question or answer contains the text")).to_be_visible()
        expect(page).to_have_url(re.compile(r"q=30"))  # the search is kept in the link
        b.wait_rendered(page, timeout=90)
        wanted = stack.fixture.incident
    select_first_row(page, how)
    expect(page).to_have_url(re.compile(rf"trace_id={wanted}"), timeout=30_000)
    b.wait_rendered(page, timeout=90)
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    expect(page.locator(b.CHART)).to_have_count(1)  # the prompt strip of the chosen request


def test_pages_count_production_traffic_unless_the_traffic_filter_says_otherwise(
        page: Page, stack: Stack) -> None:
    """The sweep's closed-book (absent) requests are experiment traffic: not on Position by
    default, there with traffic=all; each page says what it counts."""
    ticks = page.locator(f"{b.CHART} .xtick text")
    absent = page.locator(f"{b.CHART} .annotation-text").filter(has_text="closed book")
    open_page(page, stack, "position")
    expect(page.get_by_text("Counting production traffic")).to_be_visible()
    expect(ticks.filter(has_text="middle").first).to_be_attached()
    expect(absent).to_have_count(0)
    open_page(page, stack, "position", "traffic=all")
    expect(page.get_by_text("Counting all traffic")).to_be_visible()
    expect(absent.first).to_be_attached()


def test_a_page_toggle_is_kept_in_the_url(page: Page, stack: Stack) -> None:
    open_page(page, stack, "failures")
    page.get_by_text("Failures only").click()
    expect(page).to_have_url(re.compile(r"fail_only=false"))
    b.wait_rendered(page)
    link = page.url
    open_page(page, stack, "failures", link.split("?", 1)[1])  # a colleague follows the link
    expect(page.get_by_role("switch", name="Failures only")).not_to_be_checked()


def test_experiments_reach_a_verdict_with_its_interval_against_the_baseline(
        page: Page, stack: Stack) -> None:
    """The layout decision start to finish: the page opens on the largest experiment, names
    production's strategy as the baseline, compares the best other strategy with it and says
    better, worse or not distinguishable, with the interval; picking the other experiment
    gives its own verdict and what would decide it."""
    open_page(page, stack, "experiments")
    expect(page.get_by_text("Counting experiment traffic only")).to_be_visible()
    expect(page.get_by_text(re.compile(
        r"^Baseline: score_order, the packing strategy production uses now \(22 of 42 "))).to_be_visible()
    verdict = page.locator(".st-key-verdict")
    expect(verdict).to_contain_text(re.compile(
        r"edge against score_order: \+20\.0 pts \(95% interval \+\d+\.\d pts to \+\d+\.\d pts; "
        r"paired over 30 requests of 6 cases; McNemar p = 0\.014\) → better\."))
    text = verdict.inner_text()
    low, high = (float(v) for v in re.findall(r"interval \+(\d+\.\d) pts to \+(\d+\.\d)", text)[0])
    assert 0 < low < 20 < high <= 100  # the interval holds the difference and excludes 0
    # the x-axis says what it is, and the second view shows where each rank landed
    expect(page.locator(f"{b.CHART} .g-xtitle").filter(
        has_text="retrieval rank of the decisive chunk").first).to_be_attached()
    expect(page.locator(f"{b.CHART} text").filter(has_text="slot 5").first).to_be_attached()
    # the slot sweep: edge rescues the middle of three cases, too few to call. McNemar needs
    # (1.959964 sqrt(1/3) + 0.841621 sqrt(1/3 - 1/9))^2 / (1/9) = 21.02 pairs: 22 - 9 = 13
    # more, 3 pairs a case: 5 more cases
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Experiment").click()
    page.get_by_role("option", name="exp-1").click()
    expect(page).to_have_url(re.compile(r"experiment=exp-1"))
    b.wait_rendered(page)
    expect(verdict).to_contain_text(re.compile(
        r"edge against score_order: \+33\.3 pts \(95% interval -\d+\.\d pts to \+\d+\.\d pts; "
        r"paired over 9 requests of 3 cases; McNemar p = 0\.083\) → not distinguishable at "
        r"this n; about 5 more cases \(13 pairs\) would decide it"))
    expect(page.locator(b.EXCEPTION)).to_have_count(0)
    assert not page.errors  # type: ignore[attr-defined]
