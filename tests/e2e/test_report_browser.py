"""The HTML report of the sample traces, opened in the real headless Chromium: findings first,
nothing clipped, whole numbers on count axes, nothing loaded from anywhere."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests import browser as b

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"

# Every element's box inside the page, every text inside its own box, every SVG text inside
# its chart: the list of what is not.
CLIPPED = """() => {
    const out = [];
    const page = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > page + 1)
        out.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${page}`);
    for (const el of document.body.querySelectorAll('*')) {
        if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
        if (el.closest('details:not([open]) > :not(summary)')) continue;  // not shown
        // a wide table scrolls inside its own box (div.wide), which must fit the page
        const inside = el.parentElement && el.parentElement.closest('div.wide');
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (!inside && (r.left < -0.5 || r.right > page + 0.5))
            out.push(`${el.tagName} outside the page: ${r.left}..${r.right}`);
        if (['TD', 'TH', 'P', 'LI', 'H1', 'H2', 'H3', 'SUMMARY', 'FIGCAPTION', 'A'].includes(el.tagName)
                && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
            out.push(`${el.tagName} text overflows: ${el.textContent.slice(0, 60)}`);
    }
    for (const svg of document.querySelectorAll('svg')) {
        const box = svg.getBoundingClientRect();
        for (const t of svg.querySelectorAll('text')) {
            const r = t.getBoundingClientRect();
            if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5
                    || r.bottom > box.bottom + 0.5)
                out.push(`chart text clipped in "${svg.getAttribute('aria-label')}": ${t.textContent}`);
        }
    }
    return out;
}"""

# pairs of SVG texts that overlap each other (tick, category and legend labels)
OVERLAPS = """() => {
    const out = [];
    for (const svg of document.querySelectorAll('svg')) {
        const texts = [...svg.querySelectorAll('text.category, text.legend, text.tick')];
        const boxes = texts.map(t => t.getBoundingClientRect());
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i], c = boxes[j];
            if (a.left < c.right - 1 && c.left < a.right - 1 && a.top < c.bottom - 1 && c.top < a.bottom - 1)
                out.push(`${texts[i].textContent} / ${texts[j].textContent}`);
        }
    }
    return out;
}"""


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "samples.duckdb"
    files = sorted(SAMPLES.glob("support_*.jsonl.gz")) + [SAMPLES / "support_outcomes.json"]
    run = subprocess.run([sys.executable, "-m", "midtrace", "ingest", "--db", str(db),
                          *map(str, files)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = tmp / "review.html"
    # the week the new template starts (2026-11-09), with the two weeks before it
    run = subprocess.run([sys.executable, "-m", "midtrace", "report", "--db", str(db),
                          "--until", "2026-11-16", "--format", "html", "--output", str(out),
                          "--dashboard-url", "http://127.0.0.1:8501"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture(params=[1280, 800], ids=["wide", "narrow"])
def page(request: pytest.FixtureRequest, report_html: Path) -> Iterator[Page]:
    with sync_playwright() as pw:
        try:
            browser = b.launch(pw)
        except b.BrowserMissing as e:
            pytest.fail(str(e))
        page = browser.new_page(viewport={"width": request.param, "height": 900})
        outside: list[str] = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith("file:") else None)
        page.goto(report_html.as_uri())
        yield page
        browser.close()
        assert outside == [], "the report loaded something from elsewhere"


def test_the_template_regression_leads_the_findings(page: Page) -> None:
    items = page.locator("#findings li")
    expect(items.first).to_be_visible()
    count = items.count()
    assert 1 <= count <= 5
    first_two = " ".join(items.nth(i).inner_text() for i in range(min(2, count)))
    assert "template support-v2 (first seen this week)" in first_two
    assert page.locator("h2").first.inner_text() == "Findings"
    # findings, then incidents, then the evidence, then the appendix, collapsed
    headings = page.locator("h2").all_inner_texts()
    assert headings == ["Findings", "Incidents of the week", "The evidence"]
    assert page.locator("details#appendix").get_attribute("open") is None
    assert page.locator("a[href^='http://127.0.0.1:8501/inspector?trace_id=']").count() >= 3
    assert page.locator("script").count() == 0


def test_nothing_is_clipped_and_charts_fill_the_page(page: Page) -> None:
    assert page.evaluate(CLIPPED) == []
    assert page.evaluate(OVERLAPS) == []
    content = page.evaluate("document.body.clientWidth")
    for width in page.locator("figure svg").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)"):
        assert width >= 0.95 * (content - 48)  # the body's padding aside
    page.locator("details#appendix summary").click()
    assert page.locator("details#appendix table").count() >= 10
    assert page.evaluate(CLIPPED) == []
    # the last week's label is whole
    labels = page.locator("svg[aria-label='Accuracy by week'] text.category").all_text_contents()
    assert labels[-1] == "2026-11-09"


def test_count_axes_print_whole_numbers(page: Page) -> None:
    for title in ("Wrong answers by failure class and week", "Requests by failure class"):
        ticks = page.locator(f"svg[aria-label='{title}'] text.tick").all_text_contents()
        assert len(ticks) >= 3, title
        for tick in ticks:
            assert re.fullmatch(r"\d{1,3}(,\d{3})*", tick), (title, tick)
    cells = page.locator("table td.num").all_text_contents()  # the numbers, not trace ids
    assert cells and not [c for c in cells if re.search(r"\de[+-]?\d", c)]
    assert any(re.fullmatch(r"\d+\.\d%", c) for c in cells)  # shares as percentages
