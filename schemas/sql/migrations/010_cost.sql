-- Cost (docs/metrics.md, "Cost"). requests.output_tokens: the tokens the answering call
-- generated (midtrace.answer.tokens, else gen_ai.usage.output_tokens or the older
-- gen_ai.usage.completion_tokens, else llm.token_count.completion); requests stored before
-- this column existed have it on `midtrace rebuild`.
{% if engine == "clickhouse" -%}
ALTER TABLE requests_versions ADD COLUMN output_tokens Nullable(Int32);
{%- else -%}
ALTER TABLE requests ADD COLUMN output_tokens INTEGER;
{%- endif %}

-- The price table the store was last opened for writing with (midtrace/prices.json, or
-- --prices / MIDTRACE_PRICES), so a copy of the file prices its requests the same way read
-- only. US dollars per million tokens, by model name; `example` marks the shipped example
-- entries.
{% if engine == "clickhouse" -%}
CREATE TABLE prices (
    model           String,
    input_per_mtok  Float64,
    output_per_mtok Float64,
    example         Bool
) ENGINE = MergeTree ORDER BY model;
{%- else -%}
CREATE TABLE prices (
    model           VARCHAR PRIMARY KEY,
    input_per_mtok  DOUBLE NOT NULL,
    output_per_mtok DOUBLE NOT NULL,
    example         BOOLEAN NOT NULL
);
{%- endif %}
