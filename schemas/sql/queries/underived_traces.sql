-- engine: clickhouse
-- Traces with stored spans that the newest derivation of the trace has not read: a writer
-- stopped between inserting a trace's spans and deriving it, or is deriving it now (deriving
-- it again is harmless). A derivation's version holds the number of spans it read in its
-- high 22 bits (migrations/001_core.sql).
SELECT s.trace_id
FROM (SELECT trace_id, uniqExact(span_id) AS n FROM spans GROUP BY trace_id) s
LEFT JOIN current_derivations d ON d.trace_id = s.trace_id
WHERE d.version IS NULL OR bitShiftRight(d.version, 42) < least(s.n, 4194303)
ORDER BY s.trace_id;
