-- metric: Each packing strategy of a sweep experiment against each other one, paired by case: graded requests of the same case, model, placement condition and repeat under both, counted by which of the two was right.
-- keys: experiment, strategy, versus
-- traffic: experiment
--
-- A pair: one graded request under `strategy` and one under `versus` with the same case_id,
-- model and condition ('absent' excluded, as in sweep_summary's accuracy); a condition run
-- several times pairs its i-th graded request under one strategy with the i-th under the
-- other, in time order. Requests without a case_id, or without a counterpart, are unpaired:
-- `strategy_n` and `versus_n` count the eligible graded requests of each side, so
-- pairs < strategy_n says some went unpaired. Both orders of every two strategies are rows.
{% from "parts/dialect.sql" import star_except with context -%}
CREATE OR REPLACE VIEW sweep_pairs AS
WITH graded AS (
    SELECT {{ groups }} experiment, strategy, model, case_id, condition, correct,
        row_number() OVER (PARTITION BY {{ groups }} experiment, strategy, model, case_id, condition
                           ORDER BY time, request_id) AS repeat
    FROM {{ facts }} f
    WHERE experiment IS NOT NULL AND strategy IS NOT NULL AND case_id IS NOT NULL
      AND correct IS NOT NULL AND condition IS DISTINCT FROM 'absent'
), eligible AS (
    SELECT {{ groups }} experiment, strategy, count(*) AS n
    FROM graded
    GROUP BY ALL
), counts AS (
    SELECT {{ groups }}
        experiment,
        a.strategy,
        b.strategy AS versus,
        count(*) AS pairs,
        count(DISTINCT (a.model, case_id)) AS cases,
        count(*) FILTER (WHERE a.correct AND b.correct) AS both_right,
        count(*) FILTER (WHERE a.correct AND NOT b.correct) AS only_strategy_right,
        count(*) FILTER (WHERE b.correct AND NOT a.correct) AS only_versus_right,
        count(*) FILTER (WHERE NOT a.correct AND NOT b.correct) AS both_wrong
    FROM graded a
    JOIN graded b USING ({{ groups }} experiment, case_id, repeat)
    WHERE a.strategy <> b.strategy
      AND a.model IS NOT DISTINCT FROM b.model AND a.condition IS NOT DISTINCT FROM b.condition
    GROUP BY ALL
)
SELECT {{ groups }}
    experiment,
    strategy,
    versus,
    pairs,
    cases,
    both_right,
    only_strategy_right,
    only_versus_right,
    both_wrong,
    s.n AS strategy_n,
    v.n AS versus_n
FROM counts c
LEFT JOIN eligible s USING ({{ groups }} experiment, strategy)
LEFT JOIN (SELECT {{ star_except("*", "strategy") }}, strategy AS versus FROM eligible) v
    USING ({{ groups }} experiment, versus)
ORDER BY {{ groups }} experiment, strategy, versus;
