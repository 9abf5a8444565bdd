-- What the machine graders (references, judge) currently say about some traces, merged
-- within each kind by the request_outcomes rule: the store leaves out a new machine grade
-- that would change none of these (collector/storage/store.py, docs/grading.md).
{% if engine == "clickhouse" -%}
-- ClickHouse: a list no grade of the kind sets reads as empty (its <list>_set flags).
WITH ranked AS (
    SELECT *, coalesce(time, received_at) AS effective_time
    FROM outcomes
    WHERE grader IN ('references', 'judge') AND has({trace_ids:Array(String)}, trace_id)
)
SELECT
    trace_id,
    grader,
    argMaxIf(correct, (effective_time, outcome_id), correct IS NOT NULL) AS correct,
    argMaxIf(score, (effective_time, outcome_id), score IS NOT NULL) AS score,
    argMaxIf(decisive_chunk_ids, (effective_time, outcome_id), decisive_chunk_ids_set) AS decisive_chunk_ids,
    argMaxIf(required_constraints, (effective_time, outcome_id), required_constraints_set) AS required_constraints,
    argMaxIf(recalled_constraints, (effective_time, outcome_id), recalled_constraints_set) AS recalled_constraints,
    argMaxIf(reviewer, (effective_time, outcome_id), reviewer IS NOT NULL) AS reviewer,
    argMaxIf(note, (effective_time, outcome_id), note IS NOT NULL) AS note
FROM ranked
GROUP BY trace_id, grader;
{%- else -%}
WITH ranked AS (
    SELECT *, coalesce(time, received_at) AS effective_time
    FROM outcomes
    WHERE grader IN ('references', 'judge') AND trace_id IN (SELECT unnest($trace_ids))
)
SELECT
    trace_id,
    grader,
    arg_max(correct, (effective_time, outcome_id)) FILTER (WHERE correct IS NOT NULL) AS correct,
    arg_max(score, (effective_time, outcome_id)) FILTER (WHERE score IS NOT NULL) AS score,
    arg_max(decisive_chunk_ids, (effective_time, outcome_id)) FILTER (WHERE decisive_chunk_ids IS NOT NULL) AS decisive_chunk_ids,
    arg_max(required_constraints, (effective_time, outcome_id)) FILTER (WHERE required_constraints IS NOT NULL) AS required_constraints,
    arg_max(recalled_constraints, (effective_time, outcome_id)) FILTER (WHERE recalled_constraints IS NOT NULL) AS recalled_constraints,
    arg_max(reviewer, (effective_time, outcome_id)) FILTER (WHERE reviewer IS NOT NULL) AS reviewer,
    arg_max(note, (effective_time, outcome_id)) FILTER (WHERE note IS NOT NULL) AS note
FROM ranked
GROUP BY trace_id, grader;
{%- endif %}
