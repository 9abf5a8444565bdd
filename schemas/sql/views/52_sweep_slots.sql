-- metric: Sweep accuracy by the prompt slot of the decisive chunk, per experiment and packing strategy, over requests with one decisive chunk (the position curve of single-evidence cases), with Wilson 95% intervals.
-- keys: experiment, strategy, slot
-- traffic: experiment
--
-- slot: the decisive chunk's 1-based position among the prompt's chunks, whatever their
--   number k (a sweep's cases may differ in k; accuracy_by_slot keeps k apart). Requests
--   whose decisive chunk is not in the prompt (condition 'absent') have no slot and are left
--   out, and so are multi-piece requests: one slot does not describe where their evidence sat.
{% from "parts/accuracy.sql" import accuracy_columns %}
CREATE OR REPLACE VIEW sweep_slots AS
SELECT {{ groups }}
    experiment,
    strategy,
    decisive_slot AS slot,
    {{ accuracy_columns() }}
FROM {{ facts }} f
WHERE experiment IS NOT NULL AND n_decisive = 1 AND decisive_slot IS NOT NULL
GROUP BY {{ groups }} experiment, strategy, decisive_slot
ORDER BY {{ groups }} experiment, strategy, slot;
