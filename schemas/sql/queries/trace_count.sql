SELECT count(DISTINCT trace_id) FROM spans;
