-- Which of the traces $trace_ids the store holds anything of (spans, derived rows, outcomes):
-- what `prune --trace-id` reports as deleted, the others as not stored.
SELECT trace_id FROM spans WHERE trace_id IN (SELECT unnest($trace_ids))
UNION
SELECT trace_id FROM requests WHERE trace_id IN (SELECT unnest($trace_ids))
UNION
SELECT trace_id FROM outcomes WHERE trace_id IN (SELECT unnest($trace_ids));
