-- metric: Unsupported confidence: graded-wrong answers stated with confidence at or above the high_confidence setting while the decisive evidence was in the prompt.
-- keys:
CREATE OR REPLACE VIEW unsupported_confidence AS
SELECT {{ groups }}
    count(correct) AS graded,
    count(correct) FILTER (WHERE n_decisive_in_prompt > 0 AND confidence IS NOT NULL)
        AS graded_with_evidence_and_confidence,
    count(*) FILTER (WHERE unsupported_confidence) AS unsupported,
    count(*) FILTER (WHERE unsupported_confidence AND taxonomy_class = 'buried') AS unsupported_buried,
    count(*) FILTER (WHERE unsupported_confidence)
        / nullif(count(correct) FILTER (WHERE n_decisive_in_prompt > 0 AND confidence IS NOT NULL), 0)
        AS unsupported_rate
FROM {{ facts }} f
GROUP BY ALL;
