"""Drive the dashboard in Debian's headless Chromium through Playwright (sync API).

Shared by the browser tests, scripts/screenshots.py and bench/dashboard.py. Chromium is the
system one (/usr/bin/chromium, `apt-get install chromium`); Playwright never downloads its
own. A page counts as rendered when the app's script has stopped running and every Plotly
chart on it has drawn its SVG.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = os.environ.get("MIDTRACE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
PAGES = {"overview": "", "position": "position", "citations": "citations",
         "failures": "failures", "inspector": "inspector", "experiments": "experiments"}
CHART = '[data-testid="stPlotlyChart"]'
DRAWN = '[data-testid="stPlotlyChart"] .js-plotly-plot .main-svg'
EXCEPTION = '[data-testid="stException"]'


class BrowserMissing(RuntimeError):
    pass


def launch(pw: Playwright) -> Browser:
    if not Path(CHROMIUM).exists():
        raise BrowserMissing(f"{CHROMIUM} is missing: install Debian's browser with "
                             "`apt-get update && apt-get install -y chromium` (never "
                             "`playwright install`)")
    return pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def wait_rendered(page: Page, timeout: float = 60, settle: float = 0.25) -> int:
    """Wait until the script is idle and every chart is drawn; returns the number of charts.

    "Idle" must hold twice, ``settle`` seconds apart: a rerun (a widget bound to the URL,
    a switch_page) can start right after the first run ends.
    """
    deadline = time.monotonic() + timeout
    stable_since: float | None = None
    while time.monotonic() < deadline:
        state = page.evaluate("""() => {
            const app = document.querySelector('[data-testid="stApp"]');
            const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]').length;
            const drawn = document.querySelectorAll(
                '[data-testid="stPlotlyChart"] .js-plotly-plot .main-svg').length;
            const skeletons = document.querySelectorAll('[data-testid="stSkeleton"]').length;
            return {state: app && app.getAttribute('data-test-script-state'),
                    conn: app && app.getAttribute('data-test-connection-state'),
                    charts, drawn, skeletons};
        }""")
        # Plotly draws at least one .main-svg per chart (two with hover layers).
        ready = (state["state"] == "notRunning" and state["skeletons"] == 0
                 and state["drawn"] >= state["charts"])
        if ready:
            if stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= settle:
                return int(state["charts"])
        else:
            stable_since = None
        time.sleep(0.05)
    raise TimeoutError(f"the page did not finish rendering within {timeout:.0f} s: {state}")


def page_url(base: str, name: str, query: str = "") -> str:
    path = PAGES[name]
    return f"{base}/{path}" + (f"?{query}" if query else "")
