SELECT text_hash, text FROM texts
WHERE text_hash IN (
    SELECT DISTINCT unnest(text_refs) FROM spans WHERE trace_id IN (SELECT unnest($trace_ids)));
