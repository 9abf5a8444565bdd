"""Regenerate the dashboard's screenshots (docs/screenshots/*.png) from a midtrace database.

    python scripts/screenshots.py sample_traces/traces.duckdb [--out docs/screenshots]
        [--trace-id ID] [--width 1440]

Starts `midtrace dashboard --db DB` on a free loopback port, opens every page in Debian's
headless Chromium (/usr/bin/chromium), waits until every chart is drawn and saves one PNG per
page, as tall as the page. The inspector shows --trace-id, or the newest buried request.

It also renders the HTML weekly review of the week the sample's new template starts
(`report --until 2026-11-16`, docs/report-and-gate.md) and saves it as report.png;
`--report-only` skips the dashboard.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from midtrace.supervise import DashboardSettings, start_dashboard, stop  # noqa: E402
from midtrace.client import open_client  # noqa: E402
from tests.browser import EXCEPTION, PAGES, launch, page_url, wait_rendered  # noqa: E402


def pick_trace(db: str) -> str | None:
    client = open_client(db=db)
    try:
        for cls in ("buried", "unused", "dropped", None):
            rows = client.requests(taxonomy_class=cls, limit=1)
            if not rows.empty:
                return str(rows["trace_id"].iloc[0])
        return None
    finally:
        client.close()


def full_height(page) -> int:  # type: ignore[no-untyped-def]
    return int(page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMain"]')
                  || document.querySelector('section.main');
        const block = document.querySelector('[data-testid="stMainBlockContainer"]');
        return Math.max(main ? main.scrollHeight : 0, block ? block.scrollHeight + 80 : 0,
                        document.body.scrollHeight);
    }"""))


def shoot(db: str, out: Path, trace_id: str | None, width: int) -> list[Path]:
    trace_id = trace_id or pick_trace(db)
    out.mkdir(parents=True, exist_ok=True)
    process, url = start_dashboard(DashboardSettings(db=db, port=0))
    written = []
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": width, "height": 1000},
                                    device_scale_factor=1)
            for name in PAGES:
                query = f"trace_id={trace_id}" if name == "inspector" and trace_id else ""
                page.set_viewport_size({"width": width, "height": 1000})
                page.goto(page_url(url, name, query))
                wait_rendered(page, timeout=120)
                if page.locator(EXCEPTION).count():
                    raise SystemExit(f"{name}: the page raised:\n"
                                     + "\n".join(page.locator(EXCEPTION).all_inner_texts()))
                page.set_viewport_size({"width": width, "height": min(full_height(page), 6000)})
                wait_rendered(page, timeout=60)
                path = out / f"{name}.png"
                page.screenshot(path=str(path))
                written.append(path)
                print(f"wrote {path}", flush=True)
            browser.close()
    finally:
        stop(process)
    return written


def shoot_report(db: str, out: Path, width: int, until: str = "2026-11-16") -> Path:
    from midtrace.client import Filters
    from midtrace.collector.query.reads import parse_time
    from midtrace.report import build_report, render

    with open_client(db=db) as client:
        html = render(build_report(client, Filters(until=parse_time(until)),
                                   dashboard_url="http://127.0.0.1:8501"), "html")
    out.mkdir(parents=True, exist_ok=True)
    page_file = out / ".report-preview.html"
    page_file.write_text(html, encoding="utf-8")
    path = out / "report.png"
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": width, "height": 1000},
                                    device_scale_factor=1)
            page.goto(page_file.resolve().as_uri())
            page.screenshot(path=str(path), full_page=True)
            browser.close()
    finally:
        page_file.unlink()
    from PIL import Image  # a dependency of streamlit: a palette keeps the tall page small

    Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)
    print(f"wrote {path}", flush=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="a midtrace DuckDB file (no collector may hold it)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--trace-id", default=None, help="the request the inspector shows")
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--report-only", action="store_true", help="only the HTML report")
    args = parser.parse_args()
    if not args.report_only:
        shoot(args.db, Path(args.out), args.trace_id, args.width)
    shoot_report(args.db, Path(args.out), min(args.width, 1280))


if __name__ == "__main__":
    main()
