-- Which SQL built the request_evidence table (see derived_state in migration 002).
{% if engine == "clickhouse" -%}
-- ClickHouse: the table is appended to, the newest row counts
SELECT argMax(definition_hash, built_at) FROM derived_state WHERE name = 'request_evidence';
{%- else -%}
SELECT definition_hash FROM derived_state WHERE name = 'request_evidence';
{%- endif %}
