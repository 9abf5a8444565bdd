-- metric: Sweep experiments side by side: accuracy per experiment, packing strategy and placement condition, with Wilson 95% intervals and the decisive band and slots each condition produced.
-- keys: experiment, strategy, condition
-- traffic: experiment
{% from "parts/dialect.sql" import mode, sorted_distinct with context -%}
CREATE OR REPLACE VIEW sweep_conditions AS
SELECT {{ groups }}
    experiment,
    strategy,
    condition,
    count(*) AS requests,
    count(DISTINCT case_id) AS cases,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high,
    {{ mode("decisive_band") }} AS decisive_band,
    {{ sorted_distinct("decisive_slot") }} AS decisive_slots
FROM {{ facts }} f
WHERE experiment IS NOT NULL
GROUP BY {{ groups }} experiment, strategy, condition
ORDER BY {{ groups }} experiment, strategy, condition;
