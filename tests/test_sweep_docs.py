"""docs/sweep.md names every option and variable of `midtrace sweep`."""

from __future__ import annotations

from pathlib import Path

import click

from midtrace.cli import cli
from midtrace.sweep.cases import CASE_FIELDS, CHUNK_FIELDS, DECISIVE_LABELS, DISTRACTOR_LABELS
from midtrace.sweep.client import API_KEY_ENVS
from midtrace.sweep.prompt import PLACEHOLDERS

DOC = (Path(__file__).parent.parent / "docs" / "sweep.md").read_text()


def test_every_sweep_option_and_variable_is_documented() -> None:
    command = cli.commands["sweep"]  # type: ignore[attr-defined]
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        for opt in param.opts:
            assert f"`{opt}" in DOC, f"{opt} is not in docs/sweep.md"
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
        for var in envvars:
            assert f"`{var}`" in DOC, f"{var} is not in docs/sweep.md"
    for env in API_KEY_ENVS:
        assert f"`{env}`" in DOC


def test_case_fields_labels_and_placeholders_are_documented() -> None:
    for name in CASE_FIELDS + CHUNK_FIELDS + DECISIVE_LABELS + DISTRACTOR_LABELS:
        assert f"`{name}`" in DOC, name
    for name in PLACEHOLDERS:
        assert f"`{{{name}}}`" in DOC, name
    for condition in ("rank_<r>", "adjacent", "both_edges", "separated", "absent"):
        assert f"`{condition}`" in DOC
