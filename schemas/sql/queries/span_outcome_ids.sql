-- Ids and arrival times of span-sent outcomes, kept when their trace is normalized again.
SELECT trace_id, outcome_id, received_at FROM outcomes
WHERE origin = 'span' AND trace_id IN (SELECT unnest($trace_ids));
