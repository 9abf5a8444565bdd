-- metric: Sweep accuracy by the prompt slot of the decisive chunk, per experiment and packing strategy, over requests with one decisive chunk (the position curve of single-evidence cases), with Wilson 95% intervals.
-- keys: experiment, strategy, slot
--
-- slot: the decisive chunk's 1-based position among the prompt's chunks, whatever their
--   number k (a sweep's cases may differ in k; accuracy_by_slot keeps k apart). Requests
--   whose decisive chunk is not in the prompt (condition 'absent') have no slot and are left
--   out, and so are multi-piece requests: one slot does not describe where their evidence sat.
CREATE OR REPLACE VIEW sweep_slots AS
SELECT /*groups*/
    experiment,
    strategy,
    decisive_slot AS slot,
    count(*) AS requests,
    count(correct) AS n,
    count(*) FILTER (WHERE correct) AS correct,
    count(*) FILTER (WHERE correct) / nullif(count(correct), 0) AS accuracy,
    wilson_low(count(*) FILTER (WHERE correct), count(correct)) AS ci_low,
    wilson_high(count(*) FILTER (WHERE correct), count(correct)) AS ci_high
FROM /*facts*/request_facts f
WHERE experiment IS NOT NULL AND n_decisive = 1 AND decisive_slot IS NOT NULL
GROUP BY /*groups*/ experiment, strategy, decisive_slot
ORDER BY /*groups*/ experiment, strategy, slot;
