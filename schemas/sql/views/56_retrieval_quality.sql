-- metric: Retrieval context: hit rate, MRR and NDCG of the decisive chunks in retrieval order and in prompt order, over requests with a known decisive chunk.
-- keys:
CREATE OR REPLACE VIEW retrieval_quality AS
SELECT {{ groups }}
    count(*) AS requests,
    avg(CASE WHEN n_decisive_retrieved > 0 THEN 1.0 ELSE 0.0 END) AS retrieval_hit_rate,
    avg(retrieval_rr) AS retrieval_mrr,
    avg(retrieval_ndcg) AS retrieval_ndcg,
    avg(CASE WHEN n_decisive_in_prompt > 0 THEN 1.0 ELSE 0.0 END) AS prompt_hit_rate,
    avg(prompt_rr) AS prompt_mrr,
    avg(prompt_ndcg) AS prompt_ndcg
FROM {{ facts }} f
WHERE n_decisive > 0
GROUP BY ALL;
