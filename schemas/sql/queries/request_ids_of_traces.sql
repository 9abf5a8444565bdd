{% if engine == "clickhouse" -%}
-- ClickHouse: the requests of the newest derivations of these traces, each with the version
-- its request_evidence row is computed at (queries/create_request_evidence.sql), read before
-- the row is computed.
{% from "parts/versions.sql" import evidence_versions -%}
{{ evidence_versions("has({trace_ids:Array(String)}, trace_id)") }};
{%- else -%}
SELECT trace_id, request_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids));
{%- endif %}
