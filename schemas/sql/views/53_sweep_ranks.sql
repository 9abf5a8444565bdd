-- metric: Sweep accuracy by the decisive chunk's retrieval rank, per experiment and packing strategy, with Wilson 95% intervals and where each strategy put that rank in the prompt (slot and band).
-- keys: experiment, strategy, retrieval_rank
-- traffic: experiment
--
-- retrieval_rank: the rank a sweep condition gave the decisive chunk before the packing
--   strategy ordered the prompt (rank_3: 3). It is 1 / retrieval_rr, the reciprocal rank
--   request_evidence keeps (docs/metrics.md, retrieval_quality), over requests with one
--   decisive chunk that was retrieved: multi-piece requests have no one rank, 'absent' none.
-- slot, band: where that rank landed in the prompt, the most common slot and band among the
--   requests (ties to the lower slot, the earlier band); slots lists every slot seen, since a
--   sweep's cases may differ in k.
{% from "parts/dialect.sql" import mode, sorted_distinct with context -%}
CREATE OR REPLACE VIEW sweep_ranks AS
WITH ranked AS (
    SELECT *, CAST(round(1 / retrieval_rr) AS INTEGER) AS retrieval_rank
    FROM {{ facts }} f
    WHERE experiment IS NOT NULL AND n_decisive = 1 AND retrieval_rr > 0
)
SELECT {{ groups }}
    experiment,
    strategy,
    retrieval_rank,
    count(*) AS requests,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high,
    CAST({{ mode("decisive_slot", "decisive_slot") }} AS INTEGER) AS slot,
    {{ sorted_distinct("decisive_slot") }} AS slots,
    {{ mode("decisive_band", "CASE decisive_band WHEN 'early' THEN 1 WHEN 'middle' THEN 2
                                                   WHEN 'late' THEN 3 END") }} AS band,
    count(*) FILTER (WHERE decisive_band = 'middle') / count(*) AS middle_share
FROM ranked
GROUP BY {{ groups }} experiment, strategy, retrieval_rank
ORDER BY {{ groups }} experiment, strategy, retrieval_rank;
