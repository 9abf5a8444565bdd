-- Which numbered migrations (schemas/sql/migrations/) a database has had applied.
{% if engine == "clickhouse" -%}
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    Int32,
    name       String,
    applied_at DateTime64(6, 'UTC')
) ENGINE = MergeTree ORDER BY version;
{%- else -%}
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL
);
{%- endif %}
