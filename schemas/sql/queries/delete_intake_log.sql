-- The exports derived in this transaction leave the log. One whose derivation failed stays,
-- to be derived again when the store is next opened for writing (or reopened).
DELETE FROM intake_log WHERE export_id IN (SELECT unnest($export_ids));
