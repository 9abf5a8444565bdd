"""Time to first full render of each dashboard page in a real browser, cold and warm.

    python bench/dashboard.py [--db /tmp/midtrace-bench.duckdb] [--requests 1000000]
        [--source db|collector] [--warm 3]

Builds the synthetic database with bench/views.py when it is missing (a million requests,
20 chunk rows each), then starts `midtrace dashboard --db DB --port 0` (or a collector on the
file and `midtrace dashboard --url`) and opens every page in Debian's headless Chromium.
"Rendered" means the app's script has finished and every Plotly chart has drawn its SVG
(tests/browser.py). Cold: the first visit to each page on a fresh server (its queries not yet
cached; the first page also pays for the facets and the app's imports). Warm: the median of
--warm further visits (the queries answered from st.cache_data): as full page loads (the
JavaScript bundle, websocket and all), and as in-app navigation from the sidebar, which is how
a reader moves between pages.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from midtrace.collector.settings import CollectorSettings  # noqa: E402
from midtrace.supervise import DashboardSettings, start_collector, start_dashboard, stop  # noqa: E402
from midtrace.client import open_client  # noqa: E402
from tests.browser import EXCEPTION, PAGES, launch, page_url, wait_rendered  # noqa: E402

SETTLE = 0.25  # wait_rendered's quiet period, taken off each measurement


def ensure_db(db: Path, n: int) -> None:
    if db.exists():
        return
    for phase in ("build", "prepare"):
        subprocess.run([sys.executable, str(ROOT / "bench" / "views.py"), "--db", str(db),
                        "--requests", str(n), "--phase", phase], check=True)


def pick_trace(db: Path) -> str:
    client = open_client(db=db)
    try:
        rows = client.requests(taxonomy_class="buried", limit=1)
        if rows.empty:
            rows = client.requests(limit=1)
        return str(rows["trace_id"].iloc[0])
    finally:
        client.close()


def visit(page, base: str, name: str, trace_id: str) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    query = f"trace_id={trace_id}" if name == "inspector" else ""
    started = time.perf_counter()
    page.goto(page_url(base, name, query))
    charts = wait_rendered(page, timeout=300, settle=SETTLE)
    elapsed = time.perf_counter() - started - SETTLE
    if page.locator(EXCEPTION).count():
        raise SystemExit(f"{name} raised: {page.locator(EXCEPTION).all_inner_texts()}")
    return elapsed, charts


NAV = {"overview": ("Overview", "Weekly review"),
       "position": ("Position", "Where the decisive evidence sat"),
       "citations": ("Citations", "Citations"), "failures": ("Failures", "Failures"),
       "experiments": ("Experiments", "Experiments")}


def navigate(page, name: str) -> float:  # type: ignore[no-untyped-def]
    """In-app navigation: click the page in the sidebar, as a reader moving between pages."""
    link, title = NAV[name]
    started = time.perf_counter()
    page.locator('[data-testid="stSidebarNav"]').get_by_text(link, exact=True).click()
    page.locator("h1").filter(has_text=title).wait_for(timeout=300_000)
    wait_rendered(page, timeout=300, settle=SETTLE)
    return time.perf_counter() - started - SETTLE


def open_trace(page, trace_id: str) -> float:  # type: ignore[no-untyped-def]
    """In-app: open the inspector from the sidebar and paste a trace id, as in an incident."""
    started = time.perf_counter()
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Trace inspector", exact=True).click()
    page.locator("h1").filter(has_text="Trace inspector").wait_for(timeout=300_000)
    box = page.locator(".st-key-trace_id input")
    box.fill(trace_id)
    box.press("Enter")
    page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for(timeout=300_000)
    wait_rendered(page, timeout=300, settle=SETTLE)
    return time.perf_counter() - started - SETTLE


def run(db: Path, source: str, warm: int) -> list[dict[str, object]]:
    trace_id = pick_trace(db)
    collector = None
    if source == "collector":
        collector, url = start_collector(CollectorSettings(db=str(db), http_port=0, grpc_port=0))
        settings = DashboardSettings(url=url, port=0)
    else:
        settings = DashboardSettings(db=str(db), port=0)
    process, base = start_dashboard(settings, output=open(os.devnull, "w"))
    rows: list[dict[str, object]] = []
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            for name in PAGES:
                cold, charts = visit(page, base, name, trace_id)
                rows.append({"page": name, "charts": charts, "cold_s": cold})
                print(f"{name:12} cold {cold:6.2f} s", flush=True)
            for row in rows:
                times = [visit(page, base, str(row["page"]), trace_id)[0] for _ in range(warm)]
                row["warm_s"] = statistics.median(times)
                row["warm_max_s"] = max(times)
                print(f"{row['page']:12} warm {row['warm_s']:6.2f} s (max {max(times):.2f})",
                      flush=True)
            nav: dict[str, list[float]] = {name: [] for name in NAV}
            visit(page, base, "inspector", trace_id)
            nav["inspector"] = []
            for _ in range(warm):
                for name in NAV:
                    nav[name].append(navigate(page, name))
                nav["inspector"].append(open_trace(page, trace_id))
            for row in rows:
                times = nav.get(str(row["page"]))
                row["nav_s"] = statistics.median(times) if times else None
                if times:
                    print(f"{row['page']:12} in-app {row['nav_s']:6.2f} s", flush=True)
            browser.close()
    finally:
        stop(process)
        if collector is not None:
            stop(collector)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/midtrace-bench.duckdb"))
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--source", choices=["db", "collector"], default="db")
    parser.add_argument("--warm", type=int, default=3)
    args = parser.parse_args()
    ensure_db(args.db, args.requests)
    load = Path("/proc/loadavg").read_text().split()[:3]
    rows = run(args.db, args.source, args.warm)
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    with open("/proc/cpuinfo") as f:
        cpus = len(re.findall(r"^processor", f.read(), re.M))
    print(f"\n{args.db} via {args.source}; {cpus} CPUs, load average at start "
          f"{' '.join(load)}, at the end {' '.join(load_end)}")
    print("| page | charts | cold load (s) | warm load, median (s) | warm load, max (s) | "
          "warm in-app navigation, median (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        nav = f"{r['nav_s']:.2f}" if r.get("nav_s") is not None else "—"
        print(f"| {r['page']} | {r['charts']} | {r['cold_s']:.2f} | {r['warm_s']:.2f} | "
              f"{r['warm_max_s']:.2f} | {nav} |")


if __name__ == "__main__":
    main()
