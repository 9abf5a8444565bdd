"""`--store URL` (alias `--db`) on every command that opens a store, and its precedence:
flag > MIDTRACE_STORE > MIDTRACE_DB."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from midtrace.cli import cli


@pytest.mark.parametrize("args, env, used", [
    (["--store", "duckdb://{tmp}/flag.duckdb"], {}, "flag.duckdb"),
    (["--store", "{tmp}/flag.duckdb"], {"MIDTRACE_STORE": "{tmp}/env.duckdb"}, "flag.duckdb"),
    (["--db", "{tmp}/flag.duckdb"], {"MIDTRACE_STORE": "{tmp}/env.duckdb"}, "flag.duckdb"),
    ([], {"MIDTRACE_STORE": "duckdb://{tmp}/env.duckdb", "MIDTRACE_DB": "{tmp}/old.duckdb"},
     "env.duckdb"),
    ([], {"MIDTRACE_DB": "{tmp}/old.duckdb"}, "old.duckdb"),
])
def test_the_store_comes_from_the_flag_then_the_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str],
        used: str) -> None:
    for key in ("MIDTRACE_STORE", "MIDTRACE_DB"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(tmp=tmp_path))
    result = CliRunner().invoke(cli, ["rebuild", *(a.format(tmp=tmp_path) for a in args)])
    assert result.exit_code == 0, result.output
    assert f"in {tmp_path / used}" in result.output
    assert sorted(p.name for p in tmp_path.glob("*.duckdb")) == [used]


@pytest.mark.parametrize("command", [["rebuild"], ["export", "--trace-id", "ab" * 16],
                                     ["collector"], ["report"], ["dashboard"]])
@pytest.mark.parametrize("store, message", [
    ("clickhouse://localhost:8123/traces", "not supported by this version"),
    ("chdb:///tmp/x", "not supported by this version"),
    ("mysql://h/db", "is not a store midtrace knows"),
])
def test_a_store_url_midtrace_cannot_open_is_a_usage_error(
        command: list[str], store: str, message: str) -> None:
    result = CliRunner().invoke(cli, [*command, "--store", store])
    assert result.exit_code == 2, result.output
    assert message in result.output
