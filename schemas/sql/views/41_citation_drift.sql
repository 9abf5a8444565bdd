-- metric: Citation drift: citation alignment and the non-canonical citation share by ISO week (Monday, UTC), weeks without data included, with the change from the previous week when both weeks have at least min_n requests behind it.
-- keys: week
CREATE OR REPLACE VIEW citation_drift AS
WITH f AS (
    SELECT * FROM /*facts*/request_facts f
), weeks AS (
    SELECT CAST(unnest(generate_series(min(week), max(week), INTERVAL 7 DAY)) AS DATE) AS week FROM f
), grid AS (
    SELECT * FROM (SELECT DISTINCT /*groups*/ 1 AS one FROM f) CROSS JOIN weeks
), per_week AS (
    SELECT /*groups*/
        week,
        count(*) AS requests,
        count(*) FILTER (WHERE n_cited > 0) AS citing,
        count(*) FILTER (WHERE n_decisive_in_prompt > 0) AS evidence_in_prompt,
        count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive) AS aligned,
        count(*) FILTER (WHERE cites_noncanonical) AS citing_noncanonical
    FROM f
    GROUP BY ALL
), filled AS (
    SELECT /*groups*/
        week,
        coalesce(requests, 0) AS requests,
        coalesce(citing, 0) AS citing,
        coalesce(evidence_in_prompt, 0) AS evidence_in_prompt,
        coalesce(aligned, 0) AS aligned,
        coalesce(citing_noncanonical, 0) AS citing_noncanonical
    FROM grid
    LEFT JOIN per_week USING (/*groups*/ week)
), rates AS (
    SELECT *,
        aligned / nullif(evidence_in_prompt, 0) AS alignment,
        wilson_low(aligned, evidence_in_prompt) AS ci_low,
        wilson_high(aligned, evidence_in_prompt) AS ci_high,
        citing_noncanonical / nullif(citing, 0) AS noncanonical_share
    FROM filled
)
-- a change is called out only when both weeks have at least min_n (settings) in its denominator
SELECT rates.*,
    CASE WHEN evidence_in_prompt >= s.min_n AND lag(evidence_in_prompt) OVER w >= s.min_n
        THEN alignment - lag(alignment) OVER w END AS alignment_change,
    CASE WHEN citing >= s.min_n AND lag(citing) OVER w >= s.min_n
        THEN noncanonical_share - lag(noncanonical_share) OVER w END AS noncanonical_share_change
FROM rates, metric_settings s
WINDOW w AS (/*partition*/ ORDER BY week)
ORDER BY /*groups*/ week;
