"""Docs are tested: every metric view, column, filter and report section is documented."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from midtrace.collector.storage.store import Store
from midtrace.report import SECTIONS
from midtrace.collector.query import reads

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _columns(conn: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    return [d[0] for d in conn.execute(f"SELECT * FROM {name} LIMIT 0").description]


def test_every_view_and_column_is_in_metrics_md() -> None:
    text = (DOCS / "metrics.md").read_text()
    store = Store(duckdb.connect())
    names = ["request_outcomes", "placement_positions", "request_evidence_live", "request_facts",
             *reads.metric_views()]
    missing = []
    for name in names:
        if f"`{name}`" not in text:
            missing.append(name)
        for column in _columns(store.conn, name):
            if f"`{column}`" not in text:
                missing.append(f"{name}.{column}")
    assert not missing, f"undocumented in docs/metrics.md: {missing}"


def test_query_api_md_names_every_key_and_endpoint() -> None:
    text = (DOCS / "query-api.md").read_text()
    for key in (*reads.FILTER_KEYS, *reads.GROUP_KEYS, *reads.CONTEXT_BUCKETS, *reads.TAXONOMY_CLASSES):
        assert f"`{key}`" in text or key in text, key
    for endpoint in ("/api/v1/views", "/api/v1/views/{name}", "/api/v1/requests",
                     "/api/v1/traces/{trace_id}", "/api/v1/facets"):
        assert endpoint in text, endpoint


def test_report_schema_md_lists_every_section_and_field() -> None:
    text = (DOCS / "report-schema.md").read_text()
    for section, (view, columns) in SECTIONS.items():
        row = re.search(rf"^\| `{section}` \| `{view}` \|(.*)$", text, re.M)
        assert row, section
        for column in columns:
            assert f"`{column}`" in row[1], f"{section}.{column}"


def test_every_report_and_gate_option_is_documented() -> None:
    from midtrace.cli import cli

    text = (DOCS / "report-and-gate.md").read_text()
    # gate --cases runs a sweep: the options it shares with `sweep` are documented there
    swept = {p.name for p in cli.commands["sweep"].params} - {"cases"}
    sweep_text = (DOCS / "sweep.md").read_text()
    for name in ("report", "gate"):
        command = cli.commands[name]
        for param in command.params:
            if name == "gate" and param.name in swept:
                assert all(f"`{opt}" in sweep_text for opt in param.opts if opt.startswith("--")), \
                    f"gate {param.opts} (a sweep option) is not in sweep.md"
                continue
            for opt in param.opts:
                if opt.startswith("--"):
                    assert f"`{opt}" in text, f"{name} {opt}"
            envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
            for var in envvars:
                assert f"`{var}`" in text, f"{name} {var}"
