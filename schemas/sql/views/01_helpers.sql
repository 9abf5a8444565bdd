-- Helpers shared by the metric views: the settings as one row, Wilson score intervals,
-- context-length buckets and ideal DCG.

CREATE OR REPLACE VIEW metric_settings AS
SELECT
    max(value) FILTER (WHERE key = 'band_early_end')  AS early_end,
    max(value) FILTER (WHERE key = 'band_late_start') AS late_start,
    max(value) FILTER (WHERE key = 'high_confidence') AS high_confidence,
    max(value) FILTER (WHERE key = 'min_n')           AS min_n
FROM settings;

-- Wilson score interval for `successes` out of `n` at 95% (z = 1.959964); NULL when n = 0.
CREATE OR REPLACE MACRO wilson_low(successes, n) AS
    CASE WHEN n > 0 THEN
        ((successes / n) + 1.959964 ^ 2 / (2 * n)
         - 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + 1.959964 ^ 2 / (4 * n * n)))
        / (1 + 1.959964 ^ 2 / n)
    END;
CREATE OR REPLACE MACRO wilson_high(successes, n) AS
    CASE WHEN n > 0 THEN
        ((successes / n) + 1.959964 ^ 2 / (2 * n)
         + 1.959964 * sqrt((successes / n) * (1 - successes / n) / n + 1.959964 ^ 2 / (4 * n * n)))
        / (1 + 1.959964 ^ 2 / n)
    END;

-- DESIGN.md, "Time": [0, 4096), [4096, 16384), [16384, 65536), [65536, ...).
CREATE OR REPLACE MACRO context_bucket(prompt_tokens) AS
    CASE
        WHEN prompt_tokens IS NULL THEN NULL
        WHEN prompt_tokens < 4096 THEN '<4k'
        WHEN prompt_tokens < 16384 THEN '4k-16k'
        WHEN prompt_tokens < 65536 THEN '16k-64k'
        ELSE '64k+'
    END;

-- DCG of the best possible order with m relevant items: sum over i = 1..m of 1 / log2(i + 1).
CREATE OR REPLACE MACRO ideal_dcg(m) AS
    list_sum(list_transform(range(1, m + 1), lambda i: 1 / log2(i + 1)));
