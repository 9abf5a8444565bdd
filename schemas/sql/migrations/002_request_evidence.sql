-- Bookkeeping for tables the store derives from others. request_evidence (per-request facts
-- the metric views read, docs/metrics.md) is created from the view request_evidence_live and
-- rebuilt whenever the SQL that defines it changes; definition_hash records which SQL built it.
{% if engine == "clickhouse" -%}
CREATE TABLE derived_state (
    name            String,
    definition_hash String,
    built_at        DateTime64(6, 'UTC')
) ENGINE = MergeTree ORDER BY name;
{%- else -%}
CREATE TABLE derived_state (
    name            VARCHAR PRIMARY KEY,
    definition_hash VARCHAR NOT NULL,
    built_at        TIMESTAMPTZ NOT NULL
);
{%- endif %}
