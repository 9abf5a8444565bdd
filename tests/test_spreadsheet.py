"""CSV downloads neutralize cells a spreadsheet would run as formulas (OWASP CSV Injection)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from midtrace import spreadsheet

ROOT = Path(__file__).resolve().parent.parent


def cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_formula_cells_are_quoted_and_everything_else_is_kept() -> None:
    frame = pd.DataFrame({
        "question": ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1",
                     "What is the refund window?"],
        "score": [-1.5, 2.0, -3.0, 0.0, 1.0, 1.0, 0.5],
        "slot": [1, -2, 3, 4, 5, 6, 7],
    })
    out = cells(spreadsheet.to_csv(frame))
    assert out[0] == ["question", "score", "slot"]
    assert [row[0] for row in out[1:]] == [
        "'=HYPERLINK(\"http://x\",\"y\")", "'+1+1", "'-2+3", "'@SUM(A1)", "'\t=1", "'\r=1",
        "What is the refund window?"]
    assert [row[1] for row in out[1:]] == ["-1.5", "2.0", "-3.0", "0.0", "1.0", "1.0", "0.5"]
    assert [row[2] for row in out[1:]] == ["1", "-2", "3", "4", "5", "6", "7"]
    assert cells(spreadsheet.to_csv(pd.DataFrame({"=cmd": ["a"]})))[0] == ["'=cmd"]


def test_every_csv_the_dashboard_offers_goes_through_the_neutralizer() -> None:
    sources = list((ROOT / "dashboard").rglob("*.py")) + list((ROOT / "midtrace").rglob("*.py"))
    raw = [str(p.relative_to(ROOT)) for p in sources
           if re.search(r"(?<!spreadsheet)\.to_csv\(", p.read_text()) and p.name != "spreadsheet.py"]
    assert raw == [], f"CSV written without midtrace.spreadsheet.to_csv: {raw}"
    ui = (ROOT / "dashboard" / "ui.py").read_text()
    assert ui.count("download_button(") == ui.count("spreadsheet.to_csv(frame)") >= 2
