-- Outcomes merged field by field (docs/grading.md, "Precedence"): for each field, the value
-- from the strongest outcome that sets it wins. Strongest first by who graded: a person
-- (grader 'person' or NULL: posts that name no grader, span attributes, rows older than the
-- grader column) over references over the judge, whatever their times; within one kind,
-- posted outcomes ('api') over span attributes ('span'), then the newest by `time` (else
-- arrival time), then arrival order. `grader` is the kind whose `correct` won.
-- correct_<kind> and score_<kind> are each kind's own merged verdict, what the `grader=`
-- filter counts (parts/graders.sql).
-- request_evidence_live inlines this query, limited to the traces it covers (parts/scope.sql).
{% from "parts/scope.sql" import scoped, trace_in_scope with context %}
{% from "parts/dialect.sql" import arg_max_if, list_is_set with context -%}
{% set strongest = "(grader_rank, priority, effective_time, outcome_id)" -%}
{% set newest = "(priority, effective_time, outcome_id)" -%}
CREATE OR REPLACE VIEW request_outcomes AS
WITH ranked AS (
    SELECT *,
           (CASE coalesce(grader, 'person') WHEN 'person' THEN 2 WHEN 'references' THEN 1 ELSE 0 END)
               AS grader_rank,
           (CASE origin WHEN 'api' THEN 1 ELSE 0 END) AS priority,
           coalesce(time, received_at) AS effective_time
    FROM {{ scoped("outcomes") }} o
    WHERE {{ trace_in_scope("o") }}
)
SELECT
    trace_id,
    {{ arg_max_if("correct", strongest, "correct IS NOT NULL") }} AS correct,
    {{ arg_max_if("score", strongest, "score IS NOT NULL") }} AS score,
    {{ arg_max_if("decisive_chunk_ids", strongest, list_is_set("decisive_chunk_ids")) }} AS decisive_chunk_ids,
    {{ arg_max_if("required_constraints", strongest, list_is_set("required_constraints")) }} AS required_constraints,
    {{ arg_max_if("recalled_constraints", strongest, list_is_set("recalled_constraints")) }} AS recalled_constraints,
    {{ arg_max_if("reviewer", strongest, "reviewer IS NOT NULL") }} AS reviewer,
    {{ arg_max_if("note", strongest, "note IS NOT NULL") }} AS note,
    {{ arg_max_if("coalesce(grader, 'person')", strongest, "correct IS NOT NULL") }} AS grader,
{%- for kind in ("person", "references", "judge") %}
    {{ arg_max_if("correct", newest, "correct IS NOT NULL AND coalesce(grader, 'person') = '" ~ kind ~ "'") }} AS correct_{{ kind }},
    {{ arg_max_if("score", newest, "score IS NOT NULL AND coalesce(grader, 'person') = '" ~ kind ~ "'") }} AS score_{{ kind }},
{%- endfor %}
    count(*) AS n_outcomes,
    max(effective_time) AS graded_at
{%- if engine == "clickhouse" %},
    -- ClickHouse's lists are never NULL: whether any outcome set the required constraints
    max(required_constraints_set) AS required_constraints_set
{%- endif %}
FROM ranked
GROUP BY trace_id;
