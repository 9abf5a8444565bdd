-- The exports acknowledged and not yet derived, oldest first.
SELECT export_id, received_at, content_type, content_encoding, body
FROM intake_log
ORDER BY export_id;
