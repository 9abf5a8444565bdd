-- The exports derived in this transaction (and any earlier one that failed to derive) leave
-- the log.
DELETE FROM intake_log WHERE export_id <= $through;
