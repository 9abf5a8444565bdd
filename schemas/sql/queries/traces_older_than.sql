-- Traces whose newest span ended before the cutoff ($1, ns since the epoch), and outcomes
-- for traces never received that arrived before the cutoff ($2).
SELECT trace_id FROM spans GROUP BY trace_id HAVING max(end_ns) < $1
UNION
SELECT trace_id FROM outcomes
WHERE trace_id NOT IN (SELECT trace_id FROM spans)
GROUP BY trace_id HAVING max(received_at) < $2;
