-- The largest export id in the log: new exports are numbered after it.
SELECT coalesce(max(export_id), 0) FROM intake_log;
