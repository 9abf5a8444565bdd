{% from "parts/filters.sql" import param with context -%}
-- The replays of one request (docs/replay.md): requests recorded by `midtrace replay` carry
-- the original's trace id as their case id and the condition 'replay'. One row per experiment
-- and layout (the replay's strategy), for the inspector's link to the Experiments page.
SELECT r.experiment_id AS experiment,
       r.strategy AS layout,
       any_value(r.model) AS model,
       count(*) AS calls,
       count(*) FILTER (WHERE f.correct) AS correct,
       count(f.correct) AS graded,
       max(r.time) AS last_time
FROM requests r
JOIN request_facts f USING (request_id)
WHERE r.case_id = {{ param("trace_id") }} AND r.condition = 'replay' AND r.experiment_id IS NOT NULL
GROUP BY r.experiment_id, r.strategy
ORDER BY max(r.time) DESC, r.experiment_id, r.strategy;
