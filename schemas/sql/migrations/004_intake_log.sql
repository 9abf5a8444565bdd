-- The intake log: every acknowledged export as it was received, kept until its spans are
-- derived (docs/architecture.md, "The write path"). An export is acknowledged once it is
-- here; the rows of an export leave in the transaction that derives it, so after a crash
-- whatever is still here is derived again when the store is next opened for writing.
{% if engine == "clickhouse" -%}
CREATE TABLE intake_log (
    export_id        Int64,
    received_at      DateTime64(6, 'UTC'),
    content_type     String,
    content_encoding Nullable(String),
    body             String
) ENGINE = MergeTree ORDER BY export_id;
{%- else -%}
CREATE TABLE intake_log (
    export_id        BIGINT NOT NULL,
    received_at      TIMESTAMPTZ NOT NULL,
    content_type     VARCHAR NOT NULL,
    content_encoding VARCHAR,
    body             BLOB NOT NULL
);
{%- endif %}
