-- metric: Accuracy of graded requests by the slot of their decisive evidence among the k chunks in the prompt (the U-curve), with Wilson 95% intervals.
-- keys: k, slot
CREATE OR REPLACE VIEW accuracy_by_slot AS
SELECT /*groups*/
    k,
    decisive_slot AS slot,
    count(*) AS requests,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high
FROM /*facts*/request_facts f
WHERE decisive_slot IS NOT NULL AND condition IS DISTINCT FROM 'absent'
GROUP BY /*groups*/ k, decisive_slot
ORDER BY ALL;
