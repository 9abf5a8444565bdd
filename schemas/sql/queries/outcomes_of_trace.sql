-- Every outcome received for one trace, in arrival order, for the trace inspector.
SELECT * EXCLUDE (trace_id) FROM outcomes WHERE trace_id = $trace_id ORDER BY outcome_id;
