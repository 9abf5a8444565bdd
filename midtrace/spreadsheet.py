"""CSV a spreadsheet can open safely: trace text (questions, answers, chunk text, ids an app
sent) is untrusted, and a cell that begins with ``=``, ``+``, ``-`` or ``@`` (or a tab or a
carriage return, which some spreadsheets skip before reading one of those) is run as a
formula when the file is opened. As OWASP's "CSV Injection" page recommends, such a text
cell gets a leading single quote, so it is shown as the text it is, and every text cell is
quoted; numbers are left as they are. Every CSV midtrace writes goes through ``to_csv``.
"""

from __future__ import annotations

import csv
from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralize(value: Any) -> Any:
    """A text cell as a spreadsheet should see it; anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def to_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV (no index), every text cell neutralized; numbers untouched."""
    safe = frame.copy()
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[column]):
            safe[column] = safe[column].map(neutralize)
    safe.columns = [neutralize(str(c)) for c in safe.columns]
    # every text cell in quotes: a carriage return inside one cannot start a new row
    return safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)
