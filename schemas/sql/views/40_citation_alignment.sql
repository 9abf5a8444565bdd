-- metric: Citation alignment: among requests whose decisive evidence was in the prompt, the share whose citations include a decisive chunk; beside it the share of citing requests that cite a deprecated or non-canonical source.
-- keys:
CREATE OR REPLACE VIEW citation_alignment AS
SELECT {{ groups }}
    count(*) AS requests,
    count(*) FILTER (WHERE n_cited > 0) AS citing,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0) AS evidence_in_prompt,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive) AS aligned,
    count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive)
        / nullif(count(*) FILTER (WHERE n_decisive_in_prompt > 0), 0) AS alignment,
    wilson_low(count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive),
               count(*) FILTER (WHERE n_decisive_in_prompt > 0)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE n_decisive_in_prompt > 0 AND cites_decisive),
                count(*) FILTER (WHERE n_decisive_in_prompt > 0)) AS ci_high,
    count(*) FILTER (WHERE cites_noncanonical) AS citing_noncanonical,
    count(*) FILTER (WHERE cites_noncanonical) / nullif(count(*) FILTER (WHERE n_cited > 0), 0)
        AS noncanonical_share
FROM {{ facts }} f
GROUP BY ALL;
