"""JSON Lines text split only where JSON cannot hold a line break (midtrace/jsonl.py)."""

from __future__ import annotations

import json

from midtrace.jsonl import json_lines


def test_lines_end_only_where_json_cannot_hold_a_raw_line_break() -> None:
    values = [{"answer": "a\u2028b"}, {"answer": "c\u2029d\u0085e"}, {"answer": "f"}]
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)
    assert len(text.splitlines()) > len(values)  # what cut such a line in two
    assert [json.loads(line) for line in json_lines(text)] == values
    assert json_lines("a\r\nb\rc\n\nd") == ["a", "b", "c", "", "d"] == "a\r\nb\rc\n\nd".splitlines()
    assert json_lines("") == [] and json_lines("\n") == [""] and json_lines("x") == ["x"]
