-- metric: Headline figures: requests, accuracy of graded requests, buried rate, citation alignment, unsupported confidence.
-- keys:
CREATE OR REPLACE VIEW overview AS
SELECT {{ groups }}
    count(*) AS requests,
    count(correct) AS graded,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high,
    count(*) FILTER (WHERE NOT correct) AS wrong,
    count(*) FILTER (WHERE taxonomy_class = 'buried') AS buried,
    count(*) FILTER (WHERE taxonomy_class = 'buried') / nullif(count(*) FILTER (WHERE NOT correct), 0)
        AS buried_rate,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0) AS evidence_in_prompt,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive) AS citations_aligned,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive)
        / nullif(count(*) FILTER (WHERE n_decisive_in_prompt > 0), 0) AS citation_alignment,
    count(*) FILTER (WHERE unsupported_confidence) AS unsupported_confidence,
    min(time) AS first_time,
    max(time) AS last_time
FROM {{ facts }} f
GROUP BY ALL;
