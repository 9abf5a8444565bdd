-- The chunks each request's answer follows (collector/normalize/answer_sources.py;
-- docs/metrics.md, "Answer sources"): one row per piece of the answer found in an in-prompt
-- chunk's text. Derived like chunks and placements, so deleted and written again with them.
-- Offsets are in characters (code points) of the answer and of the chunk's text. `matched` is
-- the answer's text of the match, NULL when texts are not kept (--no-text); `matched_hash` is
-- its content hash either way. Requests stored before this migration have none until
-- `midtrace rebuild`.
{% if engine == "clickhouse" -%}
-- ClickHouse: versioned as chunks are (001_core.sql); `seq` numbers a request's rows, `time`
-- is the request's.
CREATE TABLE answer_sources_versions (
    request_id   Int64,
    chunk_id     String,
    ordinal      Int32,
    kind         String,
    answer_start Int32,
    answer_end   Int32,
    chunk_start  Int32,
    chunk_end    Int32,
    matched      Nullable(String),
    matched_hash String,
    seq          Int32,
    time         DateTime64(6, 'UTC'),
    version      UInt64
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(time) ORDER BY (request_id, version, seq);
{%- else -%}
CREATE TABLE answer_sources (
    request_id   BIGINT NOT NULL,
    chunk_id     VARCHAR NOT NULL,
    ordinal      INTEGER NOT NULL,  -- the chunk's ordinal in chunks
    kind         VARCHAR NOT NULL,  -- quote | date | number | ngram
    answer_start INTEGER NOT NULL,
    answer_end   INTEGER NOT NULL,
    chunk_start  INTEGER NOT NULL,
    chunk_end    INTEGER NOT NULL,
    matched      VARCHAR,
    matched_hash VARCHAR NOT NULL
);
{%- endif %}
