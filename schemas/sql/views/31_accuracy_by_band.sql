-- metric: Accuracy of graded requests by the band (early, middle, late) of their decisive evidence, with Wilson 95% intervals; the closed-book condition 'absent' as a baseline row.
-- keys: band
-- requests counts every request with a decisive chunk in the prompt (graded or not): the
-- position distribution; n, correct and accuracy count graded requests only.
CREATE OR REPLACE VIEW accuracy_by_band AS
WITH banded AS (
    SELECT *, CASE WHEN condition = 'absent' THEN 'absent' ELSE decisive_band END AS band
    FROM /*facts*/request_facts f
)
SELECT /*groups*/
    band,
    count(*) AS requests,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high
FROM banded
WHERE band IS NOT NULL
GROUP BY /*groups*/ band
ORDER BY /*groups*/ list_position(['absent', 'early', 'middle', 'late'], band);
