-- Large strings in kept spans are stored once, by reference (collector/spanstore.py):
-- `texts` holds each distinct string keyed by the hex sha256 of its exact UTF-8 bytes
-- (exact, not the normalised chunk hash, because a span must be rebuilt byte for byte);
-- `spans.text_refs` lists the hashes a span's attributes refer to. Rows written before this
-- migration keep text_refs NULL and their attributes inline, and are read as they are.
{% if engine == "clickhouse" -%}
-- ClickHouse: writers sharing a store may each insert a text; merges keep one copy of each.
CREATE TABLE texts (
    text_hash String,
    text      String
) ENGINE = ReplacingMergeTree ORDER BY text_hash;
ALTER TABLE spans ADD COLUMN text_refs Array(String);
{%- else -%}
CREATE TABLE texts (
    text_hash VARCHAR PRIMARY KEY,
    text      VARCHAR NOT NULL
);
ALTER TABLE spans ADD COLUMN text_refs VARCHAR[];
{%- endif %}
