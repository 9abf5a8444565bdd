-- metric: The weekly review: requests, accuracy, buried rate and citation alignment per ISO week (Monday, UTC), weeks without data included as zero rows, with the change from the previous week when both weeks have at least min_n graded requests.
-- keys: week
CREATE OR REPLACE VIEW weekly_overview AS
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
        count(correct) AS graded,
        count(*) FILTER (WHERE correct) AS correct,
        count(*) FILTER (WHERE NOT correct) AS wrong,
        count(*) FILTER (WHERE taxonomy_class = 'buried') AS buried,
        count(*) FILTER (WHERE n_decisive_in_prompt > 0) AS evidence_in_prompt,
        count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive) AS citations_aligned
    FROM f
    GROUP BY ALL
), filled AS (
    SELECT /*groups*/
        week,
        coalesce(requests, 0) AS requests,
        coalesce(graded, 0) AS graded,
        coalesce(correct, 0) AS correct,
        coalesce(wrong, 0) AS wrong,
        coalesce(buried, 0) AS buried,
        coalesce(evidence_in_prompt, 0) AS evidence_in_prompt,
        coalesce(citations_aligned, 0) AS citations_aligned
    FROM grid
    LEFT JOIN per_week USING (/*groups*/ week)
), rates AS (
    SELECT *,
        correct / nullif(graded, 0) AS accuracy,
        wilson_low(correct, graded) AS ci_low,
        wilson_high(correct, graded) AS ci_high,
        buried / nullif(wrong, 0) AS buried_rate,
        citations_aligned / nullif(evidence_in_prompt, 0) AS citation_alignment
    FROM filled
)
-- a change is called out only when both weeks have at least min_n (settings) in its denominator
SELECT rates.*,
    CASE WHEN graded >= s.min_n AND lag(graded) OVER w >= s.min_n
        THEN accuracy - lag(accuracy) OVER w END AS accuracy_change,
    CASE WHEN graded >= s.min_n AND lag(graded) OVER w >= s.min_n
        THEN buried_rate - lag(buried_rate) OVER w END AS buried_rate_change,
    CASE WHEN evidence_in_prompt >= s.min_n AND lag(evidence_in_prompt) OVER w >= s.min_n
        THEN citation_alignment - lag(citation_alignment) OVER w END AS citation_alignment_change
FROM rates, metric_settings s
WINDOW w AS (/*partition*/ ORDER BY week)
ORDER BY /*groups*/ week;
