"""`--store URL` (alias `--db`) on every command that opens a store, and its precedence:
flag > MIDTRACE_STORE > MIDTRACE_DB."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from midtrace.cli import cli
from midtrace.collector.settings import ClickHouseURL, SettingsError, parse_store
from midtrace.collector.storage import clickhouse


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


COMMANDS = [["rebuild"], ["export", "--trace-id", "ab" * 16], ["collector"], ["cases"],
            ["report"], ["gate"], ["dashboard"], ["prune", "--older-than", "30d"]]
# The commands that take a ClickHouse store (tests/test_clickhouse_reads.py,
# tests/e2e/test_clickhouse_collectors.py); the others refuse it.
CLICKHOUSE_READERS = ("report", "gate", "dashboard", "collector", "rebuild", "prune", "export",
                      "cases")
BAD_STORES = [
    ("clickhouse://localhost:8123/traces", "cannot use a ClickHouse store (clickhouse://) yet"),
    ("chdb:///tmp/x", "cannot use a ClickHouse store (chdb://) yet"),
    ("clickhouse://bob:secret@h/db", "MIDTRACE_CLICKHOUSE_PASSWORD, not in the store URL"),
    ("mysql://h/db", "is not a store midtrace knows"),
]


@pytest.mark.parametrize("command, store, message", [
    pytest.param(command, store, message, id=f"{command[0]}-{store}")
    for command in COMMANDS for store, message in BAD_STORES
    if not (command[0] in CLICKHOUSE_READERS and message.endswith("yet"))])
def test_a_store_url_midtrace_cannot_open_is_a_usage_error(
        command: list[str], store: str, message: str) -> None:
    result = CliRunner().invoke(cli, [*command, "--store", store])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "secret" not in result.output


@pytest.mark.parametrize("url, parsed, shown", [
    ("chdb:///var/midtrace", ClickHouseURL("chdb", path=Path("/var/midtrace")),
     "chdb:///var/midtrace"),
    ("clickhouse://ch.internal", ClickHouseURL("clickhouse", "ch.internal", 8123),
     "clickhouse://default@ch.internal:8123/default"),
    ("clickhouses://midtrace@ch.internal/traces",
     ClickHouseURL("clickhouses", "ch.internal", 8443, "midtrace", "traces"),
     "clickhouses://midtrace@ch.internal:8443/traces"),
    ("clickhouse://[::1]:9000/t", ClickHouseURL("clickhouse", "::1", 9000, database="t"),
     "clickhouse://default@[::1]:9000/t"),
])
def test_a_clickhouse_url_names_its_server_or_folder(url: str, parsed: ClickHouseURL,
                                                     shown: str) -> None:
    assert parse_store(url) == parsed
    assert str(parsed) == shown


@pytest.mark.parametrize("url, message", [
    ("clickhouse://bob:secret@h/db", "MIDTRACE_CLICKHOUSE_PASSWORD"),
    ("clickhouse:///db", "needs a host"),
    ("clickhouse://h:70000/db", "Port out of range"),
    ("clickhouse://h/traces;drop", "not a ClickHouse database name"),
    ("chdb://", "needs a folder"),
])
def test_a_bad_clickhouse_url_says_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as e:
        parse_store(url)
    assert "secret" not in str(e.value)


def test_a_chdb_store_opens_through_clickhouse_connect_with_the_session_settings(
        chdb_database: ClickHouseURL, tmp_path: Path) -> None:
    """connect() opens a chdb database with the client a server is read with, every query
    carrying the settings that make ClickHouse answer as DuckDB; a second connect shares the
    process's one chdb folder, and another folder is refused with a message."""
    conn = clickhouse.connect(chdb_database)
    assert clickhouse.connect(chdb_database) is conn
    with pytest.raises(clickhouse.StoreError, match="cannot open chdb://.*other"):
        clickhouse.connect(parse_store(f"chdb://{tmp_path}/other"))
    settings = conn.query("SELECT getSetting('join_use_nulls') AS j, "
                          "getSetting('aggregate_functions_null_for_empty') AS a").to_pylist()
    assert settings == [{"j": True, "a": True}]
    conn.command("CREATE TABLE t (x Int64) ENGINE = MergeTree ORDER BY x")
    conn.insert("t", pa.table({"x": [3, 1, 2]}))
    assert conn.query("SELECT sum(x) AS s FROM t WHERE x >= {lo:Int64}", {"lo": 2}).to_pylist() \
        == [{"s": 5}]


@pytest.mark.parametrize("args, message", [
    (["--memory-limit", "lots"], "'lots' is not a size"),
    (["--memory-limit", "512"], "'512' is not a size"),
    (["--memory-limit", "32MB"], "--memory-limit 32MB is too small"),
    (["--store", "chdb:///tmp/x", "--memory-limit", "1GB"], "a ClickHouse server's memory"),
])
def test_a_memory_limit_midtrace_cannot_use_is_a_usage_error(args: list[str], message: str,
                                                            tmp_path: Path) -> None:
    store = [] if "--store" in args else ["--store", str(tmp_path / "m.duckdb")]
    result = CliRunner().invoke(cli, ["collector", *store, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "m.duckdb").exists()


def test_a_memory_limit_holds_duckdb_and_its_log_to_it_and_outlives_a_reopen(
        tmp_path: Path) -> None:
    from midtrace.collector.settings import parse_size
    from midtrace.collector.storage.database import CHECKPOINT_THRESHOLD
    from midtrace.collector.storage.store import Store
    from midtrace.collector.storage.writer import MAX_BACKLOG_BYTES, backlog_bytes

    def settings(store: Store) -> tuple[str, str]:
        return store.conn.execute("SELECT current_setting('memory_limit'), "
                                  "current_setting('checkpoint_threshold')").fetchone()  # type: ignore[return-value]

    limit = parse_size("100MiB")
    assert limit // 4 < parse_size(CHECKPOINT_THRESHOLD)
    store = Store.open(tmp_path / "m.duckdb", memory_limit=limit)
    assert settings(store) == ("100.0 MiB", "25.0 MiB")
    store.reopen()
    assert settings(store) == ("100.0 MiB", "25.0 MiB")
    store.close()
    default = Store.open(tmp_path / "d.duckdb")
    assert settings(default)[1] == f"{parse_size(CHECKPOINT_THRESHOLD) / 2**20:.1f} MiB"
    default.close()
    assert backlog_bytes(None) == MAX_BACKLOG_BYTES
    assert backlog_bytes(limit) == limit * 3 // 8 < MAX_BACKLOG_BYTES
    assert backlog_bytes(4 << 30) == MAX_BACKLOG_BYTES
