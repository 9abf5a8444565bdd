-- Outcomes merged field by field (docs/grading.md, "Precedence"): for each field, the value
-- from the strongest outcome that sets it wins. Strongest first by who graded: a person
-- (grader 'person' or NULL: posts that name no grader, span attributes, rows older than the
-- grader column) over references over the judge, whatever their times; within one kind,
-- posted outcomes ('api') over span attributes ('span'), then the newest by `time` (else
-- arrival time), then arrival order. `grader` is the kind whose `correct` won.
-- correct_<kind> and score_<kind> are each kind's own merged verdict, what the `grader=`
-- filter counts (parts/graders.sql).
-- request_evidence_live inlines this query, limited to the traces it covers (parts/scope.sql).
{% from "parts/scope.sql" import trace_in_scope with context %}
CREATE OR REPLACE VIEW request_outcomes AS
WITH ranked AS (
    SELECT *,
           (CASE coalesce(grader, 'person') WHEN 'person' THEN 2 WHEN 'references' THEN 1 ELSE 0 END)
               AS grader_rank,
           (CASE origin WHEN 'api' THEN 1 ELSE 0 END) AS priority,
           coalesce(time, received_at) AS effective_time
    FROM outcomes o
    WHERE {{ trace_in_scope("o") }}
)
SELECT
    trace_id,
    arg_max(correct, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE correct IS NOT NULL) AS correct,
    arg_max(score, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE score IS NOT NULL) AS score,
    arg_max(decisive_chunk_ids, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE decisive_chunk_ids IS NOT NULL) AS decisive_chunk_ids,
    arg_max(required_constraints, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE required_constraints IS NOT NULL) AS required_constraints,
    arg_max(recalled_constraints, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE recalled_constraints IS NOT NULL) AS recalled_constraints,
    arg_max(reviewer, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE reviewer IS NOT NULL) AS reviewer,
    arg_max(note, (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE note IS NOT NULL) AS note,
    arg_max(coalesce(grader, 'person'), (grader_rank, priority, effective_time, outcome_id)) FILTER (WHERE correct IS NOT NULL) AS grader,
{%- for kind in ("person", "references", "judge") %}
    arg_max(correct, (priority, effective_time, outcome_id)) FILTER (WHERE correct IS NOT NULL AND coalesce(grader, 'person') = '{{ kind }}') AS correct_{{ kind }},
    arg_max(score, (priority, effective_time, outcome_id)) FILTER (WHERE score IS NOT NULL AND coalesce(grader, 'person') = '{{ kind }}') AS score_{{ kind }},
{%- endfor %}
    count(*) AS n_outcomes,
    max(effective_time) AS graded_at
FROM ranked
GROUP BY trace_id;
