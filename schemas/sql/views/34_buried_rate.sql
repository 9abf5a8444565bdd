-- metric: Buried rate: buried / graded-wrong requests, with a Wilson 95% interval (the figure the gate watches).
-- keys:
CREATE OR REPLACE VIEW buried_rate AS
SELECT {{ groups }}
    count(correct) AS graded,
    count(*) FILTER (WHERE NOT correct) AS wrong,
    count(*) FILTER (WHERE taxonomy_class = 'buried') AS buried,
    count(*) FILTER (WHERE taxonomy_class = 'buried') / nullif(count(*) FILTER (WHERE NOT correct), 0)
        AS buried_rate,
    wilson_low(count(*) FILTER (WHERE taxonomy_class = 'buried'), count(*) FILTER (WHERE NOT correct))
        AS ci_low,
    wilson_high(count(*) FILTER (WHERE taxonomy_class = 'buried'), count(*) FILTER (WHERE NOT correct))
        AS ci_high
FROM {{ facts }} f
GROUP BY ALL;
