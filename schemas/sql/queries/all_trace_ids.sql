SELECT DISTINCT trace_id FROM spans ORDER BY trace_id;
