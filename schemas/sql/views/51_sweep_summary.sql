-- metric: Sweep metrics per experiment and packing strategy: accuracy with its Wilson 95% interval, position sensitivity delta, buried-evidence failure rate, answer consistency across permutations, constraint recall, and the closed-book baseline.
-- keys: experiment, strategy
-- traffic: experiment
--
-- sensitivity_delta: max minus min accuracy across the placement conditions (graded requests,
--   condition 'absent' excluded; NULL with fewer than two conditions). best_condition and
--   worst_condition: a tie goes to the condition first in text order, so reruns agree.
-- buried_failure_rate: among cases with at least one graded request whose decisive evidence
--   reached the prompt only in the middle band (no occurrence at an edge) and at least one
--   whose decisive evidence had an occurrence at an edge, the share that were correct in some
--   edge request and wrong in every middle-only request.
-- A case is one case_id answered by one model: the same question on two models is two cases.
-- answer_consistency: among cases with answers in at least two conditions (excluding 'absent'),
--   the share whose normalised answers (citation markers removed, lower case, whitespace
--   collapsed, trailing punctuation dropped) are all the same.
-- constraint_recall: required constraints kept by the answers, over the placement conditions
--   ('absent' excluded: without the evidence there is nothing to keep).
{% from "parts/dialect.sql" import bool_and, bool_or, first_by with context -%}
CREATE OR REPLACE VIEW sweep_summary AS
WITH f AS (
    SELECT * FROM {{ facts }} f WHERE experiment IS NOT NULL
), per_condition AS (
    SELECT {{ groups }} experiment, strategy, condition,
        count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy
    FROM f
    WHERE condition IS DISTINCT FROM 'absent'
    GROUP BY ALL
), spread AS (
    SELECT {{ groups }} experiment, strategy,
        count(accuracy) AS conditions,
        CASE WHEN count(accuracy) >= 2 THEN max(accuracy) - min(accuracy) END AS sensitivity_delta,
        {{ first_by("condition", ["accuracy DESC", "condition"], "accuracy IS NOT NULL") }}
            AS best_condition,
        {{ first_by("condition", ["accuracy ASC", "condition"], "accuracy IS NOT NULL") }}
            AS worst_condition
    FROM per_condition
    GROUP BY ALL
), per_case AS (
    SELECT {{ groups }} experiment, strategy, case_id, model AS case_model,
        count(*) FILTER (WHERE correct IS NOT NULL AND decisive_at_edge) AS edge_graded,
        count(*) FILTER (WHERE correct IS NOT NULL AND NOT decisive_at_edge) AS middle_graded,
        {{ bool_or("correct") }} FILTER (WHERE decisive_at_edge) AS edge_any_correct,
        {{ bool_and("NOT correct") }} FILTER (WHERE correct IS NOT NULL AND NOT decisive_at_edge)
            AS middle_all_wrong,
        count(DISTINCT condition) FILTER (WHERE answer_key IS NOT NULL
                                           AND condition IS DISTINCT FROM 'absent') AS answered_conditions,
        count(DISTINCT answer_key) FILTER (WHERE condition IS DISTINCT FROM 'absent')
            AS distinct_answers
    FROM f
    WHERE case_id IS NOT NULL
    GROUP BY ALL
), cases AS (
    SELECT {{ groups }} experiment, strategy,
        count(*) AS cases,
        count(*) FILTER (WHERE edge_graded > 0 AND middle_graded > 0) AS buried_eligible_cases,
        count(*) FILTER (WHERE edge_graded > 0 AND middle_graded > 0
                           AND edge_any_correct AND middle_all_wrong) AS buried_failure_cases,
        count(*) FILTER (WHERE answered_conditions >= 2) AS consistency_cases,
        count(*) FILTER (WHERE answered_conditions >= 2 AND distinct_answers = 1) AS consistent_cases
    FROM per_case
    GROUP BY ALL
), totals AS (
    SELECT {{ groups }} experiment, strategy,
        count(*) AS requests,
        count(correct) FILTER (WHERE condition IS DISTINCT FROM 'absent') AS n,
        count(*) FILTER (WHERE correct AND condition IS DISTINCT FROM 'absent') AS correct,
        count(*) FILTER (WHERE correct AND condition IS DISTINCT FROM 'absent')
            / nullif(count(correct) FILTER (WHERE condition IS DISTINCT FROM 'absent'), 0) AS accuracy,
        count(correct) FILTER (WHERE condition = 'absent') AS absent_n,
        count(*) FILTER (WHERE correct AND condition = 'absent')
            / nullif(count(correct) FILTER (WHERE condition = 'absent'), 0) AS absent_accuracy,
        CAST(coalesce(sum(n_required) FILTER (WHERE condition IS DISTINCT FROM 'absent'), 0)
             AS BIGINT) AS constraints_required,
        CAST(coalesce(sum(n_recalled) FILTER (WHERE condition IS DISTINCT FROM 'absent'), 0)
             AS BIGINT) AS constraints_recalled
    FROM f
    GROUP BY ALL
)
SELECT {{ groups }}
    experiment,
    strategy,
    t.requests,
    t.n,
    t.correct,
    t.accuracy,
    wilson_low(t.correct, t.n) AS ci_low,
    wilson_high(t.correct, t.n) AS ci_high,
    t.absent_n,
    t.absent_accuracy,
    coalesce(s.conditions, 0) AS conditions,
    s.sensitivity_delta,
    s.best_condition,
    s.worst_condition,
    coalesce(c.cases, 0) AS cases,
    coalesce(c.buried_eligible_cases, 0) AS buried_eligible_cases,
    coalesce(c.buried_failure_cases, 0) AS buried_failure_cases,
    c.buried_failure_cases / nullif(c.buried_eligible_cases, 0) AS buried_failure_rate,
    coalesce(c.consistency_cases, 0) AS consistency_cases,
    coalesce(c.consistent_cases, 0) AS consistent_cases,
    c.consistent_cases / nullif(c.consistency_cases, 0) AS answer_consistency,
    wilson_low(c.consistent_cases, c.consistency_cases) AS answer_consistency_ci_low,
    wilson_high(c.consistent_cases, c.consistency_cases) AS answer_consistency_ci_high,
    t.constraints_required,
    t.constraints_recalled,
    t.constraints_recalled / nullif(t.constraints_required, 0) AS constraint_recall,
    wilson_low(t.constraints_recalled, t.constraints_required) AS constraint_recall_ci_low,
    wilson_high(t.constraints_recalled, t.constraints_required) AS constraint_recall_ci_high
FROM totals t
LEFT JOIN spread s USING ({{ groups }} experiment, strategy)
LEFT JOIN cases c USING ({{ groups }} experiment, strategy)
ORDER BY {{ groups }} experiment, strategy;
