"""The lines of JSON Lines text.

A JSON Lines file ends each line with "\\n" (or "\\r\\n"). ``str.splitlines`` also ends one at
U+2028, U+2029 and U+0085, which JSON allows unescaped inside a string and which midtrace's
own files hold as they are (``json.dumps(..., ensure_ascii=False)``: ``midtrace export``,
sweep journals, the judge's cache): a line holding one was cut in two, and the record it
held was lost. Every reader of JSON Lines text in midtrace splits it here.
"""

from __future__ import annotations

import re

LINE_END = re.compile(r"\r\n|\r|\n")  # the line ends JSON cannot hold raw inside a value
BYTES_LINE_END = re.compile(rb"\r\n|\r|\n")  # the same in UTF-8 bytes, which no other
# character's encoding contains


def json_lines(text: str) -> list[str]:
    """``text``'s lines, as ``str.splitlines`` gives them but ended only at "\\n", "\\r" and
    "\\r\\n"."""
    lines = LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines
