{#- The bodies both engines share (the Wilson intervals differ in how they square). -#}
{%- set CONTEXT_BUCKET %}    CASE
        WHEN prompt_tokens IS NULL THEN NULL
        WHEN prompt_tokens < 4096 THEN '<4k'
        WHEN prompt_tokens < 16384 THEN '4k-16k'
        WHEN prompt_tokens < 65536 THEN '16k-64k'
        ELSE '64k+'
    END;{% endset -%}
{%- set RELATIVE_POSITION %}    CASE
        WHEN token_start IS NOT NULL AND token_end IS NOT NULL AND prompt_tokens IS NOT NULL
            THEN least(((token_start + token_end) / 2.0) / prompt_tokens, 1.0)
        ELSE (slot - 0.5) / k
    END;{% endset -%}
-- Helpers shared by the metric views: the settings as one row, Wilson score intervals,
-- context-length buckets and ideal DCG.

CREATE OR REPLACE VIEW metric_settings AS
SELECT
    max(value) FILTER (WHERE key = 'band_early_end')  AS early_end,
    max(value) FILTER (WHERE key = 'band_late_start') AS late_start,
    max(value) FILTER (WHERE key = 'high_confidence') AS high_confidence,
    max(value) FILTER (WHERE key = 'min_n')           AS min_n
FROM settings;

{% if engine == "clickhouse" -%}
-- The same functions as ClickHouse SQL functions (below, DuckDB's macros with the comments).
-- position_band reads the settings, which a ClickHouse function cannot: the views inline it
-- (parts/dialect.sql).
CREATE OR REPLACE FUNCTION wilson_low AS (successes, n) ->
    CASE WHEN n > 0 THEN greatest(0.0,
        ((successes / n) + pow(1.959964, 2) / (2 * n)
         - 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + pow(1.959964, 2) / (4 * n * n)))
        / (1 + pow(1.959964, 2) / n))
    END;
CREATE OR REPLACE FUNCTION wilson_high AS (successes, n) ->
    CASE WHEN n > 0 THEN least(1.0,
        ((successes / n) + pow(1.959964, 2) / (2 * n)
         + 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + pow(1.959964, 2) / (4 * n * n)))
        / (1 + pow(1.959964, 2) / n))
    END;
CREATE OR REPLACE FUNCTION context_bucket AS (prompt_tokens) ->
{{ CONTEXT_BUCKET }}
CREATE OR REPLACE FUNCTION ideal_dcg AS (m) ->
    arraySum(arrayMap(i -> 1 / log2(i + 1), range(1, toUInt64(m) + 1)));
CREATE OR REPLACE FUNCTION relative_position AS (token_start, token_end, prompt_tokens, slot, k) ->
{{ RELATIVE_POSITION }}
{%- else -%}
-- Wilson score interval for `successes` out of `n` at 95% (z = 1.959964); NULL when n = 0.
-- Clamped to [0, 1]: at 0 of n the low end is 0 only up to rounding (0 of 7 gave -3.6e-17).
-- schemas/stats.py repeats this arithmetic step for step for the one frame no view returns.
CREATE OR REPLACE MACRO wilson_low(successes, n) AS
    CASE WHEN n > 0 THEN greatest(0.0,
        ((successes / n) + 1.959964 ^ 2 / (2 * n)
         - 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + 1.959964 ^ 2 / (4 * n * n)))
        / (1 + 1.959964 ^ 2 / n))
    END;
CREATE OR REPLACE MACRO wilson_high(successes, n) AS
    CASE WHEN n > 0 THEN least(1.0,
        ((successes / n) + 1.959964 ^ 2 / (2 * n)
         + 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + 1.959964 ^ 2 / (4 * n * n)))
        / (1 + 1.959964 ^ 2 / n))
    END;

-- docs/architecture.md, "Time": [0, 4096), [4096, 16384), [16384, 65536), [65536, ...).
CREATE OR REPLACE MACRO context_bucket(prompt_tokens) AS
{{ CONTEXT_BUCKET }}

-- DCG of the best possible order with m relevant items: sum over i = 1..m of 1 / log2(i + 1).
CREATE OR REPLACE MACRO ideal_dcg(m) AS
    list_sum(list_transform(range(1, m + 1), lambda i: 1 / log2(i + 1)));

-- Relative position of a placement in its prompt (docs/architecture.md, "Position band"): its token
-- midpoint over the prompt's tokens, capped at 1; (slot - 0.5) / k when it has no offsets or
-- the prompt's length is unknown.
CREATE OR REPLACE MACRO relative_position(token_start, token_end, prompt_tokens, slot, k) AS
{{ RELATIVE_POSITION }}

-- [0, band_early_end) early, [band_early_end, band_late_start) middle, [band_late_start, 1] late.
CREATE OR REPLACE MACRO position_band(relative_position) AS
    CASE
        WHEN relative_position IS NULL THEN NULL
        WHEN relative_position < (SELECT early_end FROM metric_settings) THEN 'early'
        WHEN relative_position < (SELECT late_start FROM metric_settings) THEN 'middle'
        ELSE 'late'
    END;
{%- endif %}
