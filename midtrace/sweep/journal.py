"""The resume journal: one JSON line per recorded call, appended right after it is recorded.

``<state dir>/<experiment>.jsonl``; the state dir defaults to ``.midtrace/sweeps`` next to
the cases file. The first line is a header naming the model and template; the rest are
:class:`TrialResult` lines. A rerun of the same experiment skips every trial the journal
holds, so a kill loses at most the calls in flight. A line cut short by a kill is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from midtrace.jsonl import json_lines
from midtrace.sweep.results import TrialKey, TrialResult

log = logging.getLogger(__name__)

FORMAT = "midtrace-sweep-journal"
VERSION = 1
CHECKED = ("model", "template_version")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@+-]+")


class JournalError(Exception):
    """The journal belongs to a different run or cannot be written."""


def journal_path(state_dir: Path, experiment: str) -> Path:
    name = _UNSAFE.sub("_", experiment).strip("._") or "experiment"
    return state_dir / f"{name}.jsonl"


class Journal:
    """Open (or start) the journal of one experiment; ``done`` holds what it already records."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.done: dict[TrialKey, TrialResult] = {}
        existing = self._read(header) if path.exists() else None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = open(path, "a", encoding="utf-8")
        except OSError as e:
            raise JournalError(f"cannot write the sweep journal {path}: {e.strerror or e}") from e
        if existing is None:
            self._write([{"format": FORMAT, "version": VERSION, **header}])
        elif not existing:
            self._write([""])  # end the line a kill cut short before appending

    def _read(self, header: dict[str, Any]) -> bool:
        """Load recorded trials; returns whether the file ends with a newline."""
        text = self.path.read_text(encoding="utf-8")
        lines = json_lines(text)
        if not lines:
            raise JournalError(f"{self.path} is empty; delete it to start the experiment afresh")
        try:
            first = json.loads(lines[0])
        except json.JSONDecodeError:
            first = None
        if not isinstance(first, dict) or first.get("format") != FORMAT:
            raise JournalError(f"{self.path} is not a midtrace sweep journal")
        for key in CHECKED:
            if first.get(key) != header.get(key):
                raise JournalError(
                    f"experiment {header.get('experiment')!r} was recorded with {key} "
                    f"{first.get(key)!r}, this run has {header.get(key)!r}; choose another "
                    f"--experiment name, or delete {self.path} to start it afresh")
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                result = TrialResult.from_json(json.loads(line))
            except (json.JSONDecodeError, TypeError, ValueError) as e:
                log.warning("%s:%d: skipped an unreadable journal line (%s)", self.path, number, e)
                continue
            self.done[result.key] = result
        return text.endswith("\n")

    def append(self, results: Iterable[TrialResult]) -> None:
        rows = [r.to_json() for r in results]
        self._write(rows)
        for row in rows:
            r = TrialResult.from_json(row)
            self.done[r.key] = r

    def _write(self, rows: list[Any]) -> None:
        if not rows:
            return
        data = "".join((json.dumps(r, ensure_ascii=False) if r != "" else "") + "\n" for r in rows)
        try:
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as e:
            raise JournalError(f"cannot write the sweep journal {self.path}: {e.strerror or e}") from e

    def close(self) -> None:
        self._file.close()
