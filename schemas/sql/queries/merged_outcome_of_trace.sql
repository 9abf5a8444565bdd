-- The merged outcome of one trace, for the trace inspector.
SELECT * EXCLUDE (trace_id) FROM request_outcomes WHERE trace_id = $trace_id;
