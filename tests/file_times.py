"""How long each test file took in a full run (tests/file_times.json), by which conftest.py
orders the files longest first.

Files run side by side, each file's tests in one process (`./dev test`, `--dist loadfile`);
a process takes the next file when it finishes one. A long file taken last sets the end of the
whole run while the other processes wait, so the long files are started first and the short
ones fill in at the end. A file not listed (a new one) goes after the listed files that took
longer than :data:`UNLISTED` seconds.

Refresh after a full run with per-test times:

    ./dev test --junitxml=/tmp/junit.xml
    .venv/bin/python -m tests.file_times /tmp/junit.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

TIMES = Path(__file__).with_name("file_times.json")
UNLISTED = 30.0  # seconds assumed for a file the list does not have


def load() -> dict[str, float]:
    """Seconds per test file (its path from the repository's root), as last recorded."""
    try:
        return json.loads(TIMES.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(nodeids: list[str], times: dict[str, float]) -> list[int]:
    """The positions of ``nodeids`` in running order: files by recorded time, longest first,
    each file's tests in their own order."""
    return sorted(range(len(nodeids)),
                  key=lambda i: -times.get(file_of(nodeids[i]), UNLISTED))


def from_junit(path: Path) -> dict[str, float]:
    """Seconds per test file from a JUnit XML report of pytest (test classes folded into their
    file)."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(path).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        while parts and parts[-1][:1].isupper():  # a test class
            parts.pop()
        seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return {name: round(t, 1) for name, t in seconds.most_common()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.file_times JUNIT_XML")
    found = from_junit(Path(sys.argv[1]))
    TIMES.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(f"{len(found)} files, {sum(found.values()):.0f} s in all, written to {TIMES}")
