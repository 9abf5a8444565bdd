"""docs/zero-code.md names every attribute and setting the zero-code normalizers use."""

from __future__ import annotations

from pathlib import Path

import pytest

from midtrace.collector.normalize import genai, openinference, tool_results, vercel_ai
from midtrace.collector.normalize.attr_values import SOURCE_KEYS
from midtrace.collector.normalize.locate import CITATION_PATTERN_ENV, DEFAULT_CITATION_PATTERN, MIN_PREFIX_CHARS

DOC = (Path(__file__).parent.parent / "docs" / "zero-code.md").read_text()


@pytest.mark.parametrize("name", openinference.ATTRIBUTES_READ + genai.ATTRIBUTES_READ
                         + vercel_ai.ATTRIBUTES_READ + tuple(sorted(vercel_ai.LLM_OPERATIONS))
                         + SOURCE_KEYS)
def test_every_attribute_read_is_documented(name: str) -> None:
    assert f"`{name}`" in DOC


def test_the_citation_setting_and_its_default_are_documented() -> None:
    assert f"`{CITATION_PATTERN_ENV}`" in DOC
    assert DEFAULT_CITATION_PATTERN in DOC


def test_the_attribute_limit_and_truncation_threshold_are_documented() -> None:
    assert "OTEL_ATTRIBUTE_COUNT_LIMIT" in DOC and "128" in DOC
    assert f"at least {MIN_PREFIX_CHARS} characters" in DOC


@pytest.mark.parametrize("key", tool_results.TEXT_KEYS + tool_results.ID_KEYS
                         + tool_results.SCORE_KEYS + tool_results.LIST_KEYS
                         + tool_results.NESTED_KEYS)
def test_every_tool_result_key_is_documented(key: str) -> None:
    section = DOC[DOC.index("## Tool results"):DOC.index("## What midtrace infers")]
    assert f"`{key}`" in section
