-- Outcomes merged field by field (docs/architecture.md, "Outcomes"): for each field, the value from
-- the newest outcome that sets it wins. Posted outcomes ('api') override span attributes
-- ('span'); among equals, newest by `time` (else arrival time), then arrival order.
-- request_evidence_live inlines this query, limited to the traces it covers (parts/scope.sql).
{% from "parts/scope.sql" import trace_in_scope with context %}
CREATE OR REPLACE VIEW request_outcomes AS
WITH ranked AS (
    SELECT *,
           (CASE origin WHEN 'api' THEN 1 ELSE 0 END) AS priority,
           coalesce(time, received_at) AS effective_time
    FROM outcomes o
    WHERE {{ trace_in_scope("o") }}
)
SELECT
    trace_id,
    arg_max(correct, (priority, effective_time, outcome_id)) FILTER (WHERE correct IS NOT NULL) AS correct,
    arg_max(score, (priority, effective_time, outcome_id)) FILTER (WHERE score IS NOT NULL) AS score,
    arg_max(decisive_chunk_ids, (priority, effective_time, outcome_id)) FILTER (WHERE decisive_chunk_ids IS NOT NULL) AS decisive_chunk_ids,
    arg_max(required_constraints, (priority, effective_time, outcome_id)) FILTER (WHERE required_constraints IS NOT NULL) AS required_constraints,
    arg_max(recalled_constraints, (priority, effective_time, outcome_id)) FILTER (WHERE recalled_constraints IS NOT NULL) AS recalled_constraints,
    arg_max(reviewer, (priority, effective_time, outcome_id)) FILTER (WHERE reviewer IS NOT NULL) AS reviewer,
    arg_max(note, (priority, effective_time, outcome_id)) FILTER (WHERE note IS NOT NULL) AS note,
    count(*) AS n_outcomes,
    max(effective_time) AS graded_at
FROM ranked
GROUP BY trace_id;
