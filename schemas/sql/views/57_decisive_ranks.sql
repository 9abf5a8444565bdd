-- metric: How often the decisive chunk sits at each retrieval rank: requests with a retrieved decisive chunk by the best retrieval rank among their decisive chunks, and their share; the weights of a sweep's production-weighted accuracy.
-- keys: retrieval_rank
--
-- retrieval_rank: 1 / retrieval_rr, the reciprocal rank request_evidence keeps (the best
--   retrieval rank of a decisive chunk; docs/metrics.md, retrieval_quality). Graded or not:
--   where the evidence lands is known from the app's labels before any grade. share: of the
--   requests with a retrieved decisive chunk (in the group).
CREATE OR REPLACE VIEW decisive_ranks AS
WITH ranked AS (
    SELECT {{ groups }} CAST(round(1 / retrieval_rr) AS INTEGER) AS retrieval_rank
    FROM {{ facts }} f
    WHERE retrieval_rr > 0
)
SELECT {{ groups }}
    retrieval_rank,
    count(*) AS requests,
    count(*) / sum(count(*)) OVER ({{ partition }}) AS share
FROM ranked
GROUP BY {{ groups }} retrieval_rank
ORDER BY {{ groups }} retrieval_rank;
