"""Regenerate the dashboard's screenshots (docs/screenshots/*.png) from a midtrace database.

    python scripts/screenshots.py sample_traces/traces.duckdb [--out docs/screenshots]
        [--trace-id ID] [--width 1440]

Starts `midtrace dashboard --db DB` on a free loopback port, opens every page in Debian's
headless Chromium (/usr/bin/chromium), waits until every chart is drawn and saves one PNG per
page, as tall as the page. The inspector shows --trace-id, or the newest buried request.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="a midtrace DuckDB file (no collector may hold it)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--trace-id", default=None, help="the request the inspector shows")
    parser.add_argument("--width", type=int, default=1440)
    args = parser.parse_args()
    shoot(args.db, Path(args.out), args.trace_id, args.width)


if __name__ == "__main__":
    main()
