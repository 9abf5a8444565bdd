"""The OpenTelemetry Collector configuration shipped for many midtrace collectors on one
ClickHouse (deploy/otelcol-loadbalancing.yaml, docs/clickhouse.md): every span and GenAI
event of a trace reaches the same midtrace collector, over its gRPC port, with the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from midtrace.collector.settings import DEFAULT_GRPC_PORT

CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "otelcol-loadbalancing.yaml"


def exporters_of(config: dict[str, Any], pipeline: str) -> list[dict[str, Any]]:
    names = config["service"]["pipelines"][pipeline]["exporters"]
    return [config["exporters"][name] | {"name": name} for name in names]


def test_traces_and_events_are_routed_by_trace_id_to_the_same_collectors() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    pipelines = config["service"]["pipelines"]
    assert sorted(pipelines) == ["logs", "traces"]
    backends = []
    for pipeline in ("traces", "logs"):
        assert pipelines[pipeline]["receivers"] == ["otlp"]
        (exporter,) = exporters_of(config, pipeline)
        assert exporter["name"].split("/")[0] == "loadbalancing"
        assert exporter["routing_key"] == "traceID"
        otlp = exporter["protocol"]["otlp"]
        assert otlp["headers"]["authorization"] == "Bearer ${env:MIDTRACE_TOKEN}"
        hostnames = exporter["resolver"]["static"]["hostnames"]
        assert len(hostnames) >= 2
        assert all(h.rsplit(":", 1)[1] == str(DEFAULT_GRPC_PORT) for h in hostnames)
        backends.append(hostnames)
    # a GenAI event must reach the collector that derives its span's trace
    assert backends[0] == backends[1]
